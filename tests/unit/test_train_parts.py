"""Training parts without processes: data, step statistics, throughput and MFU, the train CLI surface."""

import json

import pytest

from fabricbench.training import data, metrics, models
from clirun import one_error_line, refused, run_cli


def test_step_stats_values():
    st = metrics.step_stats([0.4, 0.1, 0.2, 0.3])
    assert st["median_s"] == pytest.approx(0.25)
    assert st["mean_s"] == pytest.approx(0.25)
    # the one convention of fabricbench/statistics/figures.py: p95 interpolated between order statistics
    # (0.3 + 0.85 x 0.1), cv = population stdev / mean, as in every collective record
    assert st["p95_s"] == pytest.approx(0.385)
    assert st["cv"] == pytest.approx(0.1118034 / 0.25, rel=1e-6)
    assert metrics.step_stats([0.2])["cv"] is None and metrics.step_stats([])["median_s"] is None


def test_throughput_and_mfu_arithmetic():
    out = metrics.throughput(times_s=[0.5, 0.5], global_batch=8, tokens_per_sample=512, psi=10**9, nranks=1,
                             gpu_name="NVIDIA H200")
    assert out["samples_per_s"] == pytest.approx(16.0)  # 8 x 2 / 1.0 s
    assert out["tokens_per_s"] == pytest.approx(16 * 512)
    assert out["model_flops_per_step"] == 6 * 10**9 * 8 * 512
    assert out["mfu"] == pytest.approx(6e9 * 8 * 512 / 0.5 / 989e12)
    assert metrics.throughput(times_s=[1.0], global_batch=1, tokens_per_sample=1, psi=1, nranks=1,
                              gpu_name="Some GPU")["mfu"] is None
    assert metrics.peak_flops("NVIDIA A100-SXM4-80GB") == 312e12


def test_synthetic_batches_are_fixed_per_rank():
    spec = models.resolve(name="tiny-mistral")
    kw = dict(task=spec.task, config=spec.config, batch_size=3, seq_len=16, image_size=0, dataset=None,
              world=2, device="cpu")
    a, b = iter(data.batches(rank=0, **kw)), iter(data.batches(rank=1, **kw))
    a0, a1, b0 = next(a), next(a), next(b)
    assert a0["input_ids"].shape == (3, 16) and int(a0["input_ids"].max()) < 256
    assert (a0["input_ids"] == a1["input_ids"]).all()  # the same batch again: the loss must fall
    assert not (a0["input_ids"] == b0["input_ids"]).all()  # ranks differ


def test_image_folder_dataset(tmp_path):
    from PIL import Image

    for cls, colour in (("apple_pie", (255, 0, 0)), ("sushi", (0, 0, 255))):
        (tmp_path / cls).mkdir()
        for i in range(3):
            Image.new("RGB", (40, 30), colour).save(tmp_path / cls / f"{i}.png")
    (tmp_path / "sushi" / "notes.txt").write_text("not an image")
    spec = models.resolve(name="tiny-dinov2")
    it = data.batches(task=spec.task, config=spec.config, batch_size=3, seq_len=0, image_size=32,
                      dataset=str(tmp_path), rank=0, world=1, device="cpu")
    b = next(it)
    assert b["pixel_values"].shape == (3, 3, 32, 32)
    assert b["labels"].tolist() == [0, 0, 0]
    # red, normalised with the ImageNet mean and std
    assert float(b["pixel_values"][0, 0, 0, 0]) == pytest.approx((1 - 0.485) / 0.229, rel=1e-5)
    assert float(b["pixel_values"][0, 2, 0, 0]) == pytest.approx((0 - 0.406) / 0.225, rel=1e-5)
    assert next(it)["labels"].tolist() == [1, 1, 1]


def test_text_dataset_is_byte_tokens(tmp_path):
    (tmp_path / "a.txt").write_bytes(bytes(range(64)))
    spec = models.resolve(name="tiny-mistral")
    b = next(data.batches(task=spec.task, config=spec.config, batch_size=2, seq_len=16, image_size=0,
                          dataset=str(tmp_path), rank=1, world=2, device="cpu"))
    # 4 windows of 16; rank 1 of 2 takes windows 1 and 3
    assert b["input_ids"][:, 0].tolist() == [16, 48]
    with pytest.raises(ValueError, match="64 tokens in \\*.txt/\\*.npy make no window of --seq-len 100"):
        next(data.batches(task=spec.task, config=spec.config, batch_size=2, seq_len=100, image_size=0,
                          dataset=str(tmp_path), rank=0, world=1, device="cpu"))


TRAIN_OPTIONS = {"--strategies", "--strategy", "--model", "--model-config", "--model-path", "--gpus", "--device", "--nprocs",
                 "--steps", "--warmup-steps", "--batch-size", "--seq-len", "--image-size", "--lr", "--dataset",
                 "--fabric", "--out", "--nnodes", "--node-rank", "--master-addr", "--master-port", "--timeout",
                 "--json", "--list", "--precision", "--trace-steps", "--backend", "--max-steps", "--target-ci",
                 "--repeats", "--max-repeats", "--repeat-budget", "--time-budget", "--stall-timeout",
                 "--margin", "--verbose", "--quiet"}  # --strategy, --time-budget: deprecated


def test_train_surface_is_frozen():
    from fabricbench.cli.train import train

    assert {o for p in train.params for o in p.opts} == TRAIN_OPTIONS, "options changed: update on purpose"


def test_train_exit_1_when_a_strategy_failed(monkeypatch, capsys, tmp_path):
    """Every record is written; a failed strategy (error, timeout) makes exit 1, oom and waived do not."""
    import fabricbench.training.launch as launch

    statuses = {"ddp": "ok", "zero1": "oom", "zero3": "waived", "fsdp": "error"}

    import fabricbench.training.api as api
    from fabricbench.results.schema import TrainResult

    def fake(config, writer, echo=None, quiet=False, since=None):
        recs = [TrainResult.from_record({"kind": "train", "strategy": s, "status": statuses[s],
                                         "message": f"{s} said why"}).to_dict() for s in config.strategies]
        for r in recs:
            writer.write(r)
        return recs

    monkeypatch.setattr(launch, "run", fake)
    monkeypatch.setattr(api, "require_libraries", lambda: None)  # no rank starts: nothing to import
    out = tmp_path / "t.jsonl"
    code, _, err = run_cli(["train", "--device", "cpu", "--model", "tiny-mistral", "--strategies",
                            "ddp,zero1,zero3,fsdp", "--out", out], capsys)
    line = one_error_line(err)
    assert code == 1 and "fsdp: fsdp said why" in line
    assert "ddp" not in line.split("fsdp")[0] and str(out) in line
    assert len(out.read_text().splitlines()) >= 4  # written before the exit
    code, _, err = run_cli(["train", "--device", "cpu", "--model", "tiny-mistral", "--strategies", "ddp,zero1,zero3"],
                           capsys)
    assert code == 0, err


@pytest.mark.parametrize("args, msg", [
    (["--device", "cpu", "--model", "tiny-mistral", "--strategies", "zero4"], "Error: --strategies: unknown strategy 'zero4'"),
    (["--device", "cpu", "--model", "tiny-mistral", "--steps", "4", "--warmup-steps", "3"],
     "Error: --steps 4 with --warmup-steps 3 leaves 1 timed step(s)"),
    (["--device", "cpu", "--model", "nope"], "Error: unknown model 'nope'"),
    (["--device", "cpu", "--model", "tiny-mistral", "--fabric", "warp-drive"], "Error: --fabric: unknown fabric"),
])
def test_train_errors_are_one_line_exit_2(args, msg, capsys):
    assert refused(["train", *args], capsys).startswith(msg)


def test_train_list(capsys):
    code, out, err = run_cli(["train", "--list"], capsys)
    assert code == 0, err
    out = out.splitlines()
    assert [line.split()[1] for line in out if line.startswith("strategy")] == ["ddp", "zero1", "zero2", "zero3",
                                                                                 "fsdp"]
    assert "mistral-7b" in {line.split()[1] for line in out if line.startswith("model")}


def test_launch_command_passes_rendezvous_through(tmp_path):
    from fabricbench.training.launch import TrainConfig, launch_command, worker_env

    cfg = TrainConfig(strategies=["ddp"], model="tiny-mistral", device="cuda", gpus=(2, 3), nnodes=2,
                      node_rank=1, master_addr="10.0.0.1", master_port=29555)
    cmd = launch_command(cfg, tmp_path / "spec.json")
    assert cmd[1:3] == ["-m", "torch.distributed.run"]
    assert {"--nproc-per-node=2", "--nnodes=2", "--node-rank=1", "--master-addr=10.0.0.1",
            "--master-port=29555"} <= set(cmd)
    assert cfg.world_size == 4
    assert worker_env(cfg)["CUDA_VISIBLE_DEVICES"] == "2,3"
    cpu = TrainConfig(strategies=["zero1"], model="tiny-mistral", device="cpu", nprocs=2)
    env = worker_env(cpu)
    assert (env["DS_ACCELERATOR"], env["CUDA_VISIBLE_DEVICES"]) == ("cpu", "")
    json.dumps(env)  # plain strings only


def test_model_config_and_model_path(tmp_path):
    cfg_file = tmp_path / "vit.json"
    cfg_file.write_text(json.dumps({"model_type": "dinov2", "hidden_size": 32, "num_hidden_layers": 1,
                                    "num_attention_heads": 2, "image_size": 16, "patch_size": 8,
                                    "num_labels": 5, "architectures": ["Dinov2ForImageClassification"]}))
    spec = models.resolve(config_file=str(cfg_file))
    assert (spec.name, spec.task, spec.config.num_labels) == ("vit", models.IMAGE_CLS, 5)
    m = models.build(spec)
    assert type(m).__name__ == "Dinov2ForImageClassification"
    m.save_pretrained(tmp_path / "weights")
    local = models.resolve(path=str(tmp_path / "weights"))
    loaded = models.build(local)
    first = next(iter(m.state_dict()))
    assert (loaded.state_dict()[first] == m.state_dict()[first]).all()  # the saved weights, not fresh ones
    assert models.count_params(local) == sum(p.numel() for p in m.parameters())
    with pytest.raises(ValueError, match="no \"model_type\" field"):
        (tmp_path / "bad.json").write_text("{}")
        models.resolve(config_file=str(tmp_path / "bad.json"))


@pytest.mark.slow  # real processes for more than ~3 s (docs/testing.md)
def test_cli_trains_on_an_image_folder(tmp_path, capsys):
    """`fabricbench train` end to end: 2 gloo processes, FSDP, a local dataset, --out and --json."""
    from PIL import Image

    from fabricbench.results import read_results

    rng = __import__("random").Random(7)
    for cls in ("a", "b", "c"):
        (tmp_path / "data" / cls).mkdir(parents=True)
        for i in range(4):
            Image.new("RGB", (32, 32), tuple(rng.randrange(256) for _ in range(3))).save(
                tmp_path / "data" / cls / f"{i}.png")
    out = tmp_path / "t.jsonl"
    code, stdout, err = run_cli(["train", "--strategy", "fsdp", "--model", "tiny-dinov2", "--device", "cpu",
                                 "--nprocs", "2", "--steps", "5", "--warmup-steps", "2", "--batch-size", "6",
                                 "--image-size", "32", "--lr", "1e-3", "--dataset", tmp_path / "data", "--repeats",
                                 "1", "--max-steps", "8", "--out", out, "--json"], capsys)
    assert code == 0, err
    printed = json.loads(stdout.strip().splitlines()[-1])
    (rec,) = list(read_results(out, kind="train"))
    assert rec["run_id"] == printed["run_id"]
    assert (rec["status"], rec["engine"], rec["world_size"]) == ("ok", "fsdp", 2), rec["message"]
    assert rec["dataset"] == str(tmp_path / "data") and rec["image_size"] == 32 and rec["seq_len"] is None
    assert rec["last_loss"] < rec["first_loss"]
