"""Secrets never leave: a custom fabric's value outside NCCL_*/GLOO_*/CUDA_* is searched for in
every output file, every file name, stdout, stderr and the command line of every process while the
command runs, for sweep, compare, train, study and qualify (a spec's fabric, --fabric and --dry-run).

    python3 -m pytest -q tests/e2e/test_secrets.py            (the fast ones; -m slow: train and study runs)
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
from roots import DATA
from clirun import run_cli_captured

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/*/cmdline")

GLOO = ["--engine", "torch", "--backend", "gloo", "--nprocs", "2", "--ops", "all_reduce", "--sizes", "1K",
        "--iters", "2", "--warmup", "1", "--timeout", "60"]


class CmdlineWatch:
    """Reads every process's command line every 20 ms while a command runs; `hits` holds those that
    carried the secret, except the command the test itself started (the user's own typing)."""

    def __init__(self, secret: str) -> None:
        self.secret, self.hits, self.seen = secret.encode(), [], 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        me = str(os.getpid())
        while not self._stop.wait(0.02):
            for d in Path("/proc").iterdir():
                if not d.name.isdigit() or d.name == me:
                    continue
                try:
                    cmd = (d / "cmdline").read_bytes()
                except OSError:
                    continue
                if b"fabricbench" in cmd or b"torch.distributed" in cmd:
                    self.seen += 1
                if self.secret in cmd:
                    self.hits.append((int(d.name), cmd.replace(b"\0", b" ").decode(errors="replace")))

    def __enter__(self) -> "CmdlineWatch":
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()


@pytest.fixture
def secret() -> str:
    return "s3cr3t" + uuid.uuid4().hex[:10]


def run_and_search(tmp_path: Path, args: list[str], secret: str, *, timeout: float = 300):
    """Run `fabricbench ARGS` in tmp_path ({SECRET} in ARGS is the secret), then search for the secret in
    every process it started, what it printed, and every file (and file name) under tmp_path."""
    args = [a.replace("{SECRET}", secret) for a in args]
    with CmdlineWatch(secret) as watch:
        p = subprocess.Popen([sys.executable, "-m", "fabricbench", *args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=tmp_path)
        out, err = p.communicate(timeout=timeout)
    assert watch.seen, "no fabricbench process was seen: the watch did not work"
    # The user's own command names it, as typed; so does a fork of it in the instant before it execs its child.
    typed = " ".join([sys.executable, "-m", "fabricbench", *args]) + " "
    hits = [cmd for pid, cmd in watch.hits if pid != p.pid and cmd != typed]
    assert not hits, f"the secret is in a child's command line: {hits[:2]}"
    assert secret not in out and secret not in err, (out[-2000:], err[-2000:])
    for path in tmp_path.rglob("*"):
        assert secret not in path.name, path
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), f"the secret is in {path}"
    return p.returncode, out, err


def test_sweep_under_a_custom_fabric(tmp_path, secret):
    rc, out, err = run_and_search(tmp_path, ["sweep", *GLOO, "--fabric", "sec:MY_TOKEN={SECRET}", "--out",
                                             "r.jsonl"], secret)
    assert rc == 0, err
    assert '"MY_TOKEN": "***"' in (tmp_path / "r.jsonl").read_text()


def test_sweep_dry_run(tmp_path, secret):
    rc, out, err = run_and_search(tmp_path, ["sweep", *GLOO, "--fabric", "sec:MY_TOKEN={SECRET}", "--dry-run"],
                                  secret)
    assert rc == 0 and "all_reduce" in out, err


@pytest.mark.slow
def test_compare_with_a_custom_fabric(tmp_path, secret):
    rc, out, err = run_and_search(tmp_path, ["compare", "--fabrics", "default,sec:MY_TOKEN={SECRET}", *GLOO[:6],
                                             "--ops", "all_reduce", "--sizes", "1K", "--out", "c.jsonl"], secret)
    assert rc == 0, err
    assert "sec" in out


QUALIFY_SPEC = """
[spec]
name = "secret-fabric"
[run]
engine = "torch"
backend = "gloo"
nprocs = 2
iters = 2
warmup = 1
timeout_s = 60
unit_timeout_s = 240
[[check]]
name = "allreduce_bw"
kind = "collective"
op = "all_reduce"
sizes = ["1K"]
fabric = "sec:MY_TOKEN={SECRET}"
min_busbw_gbps = 0.0000001
"""


@pytest.fixture
def user_spec(tmp_path, secret) -> Path:
    """The user's spec, beside (not under) the folder searched: it holds the secret on purpose."""
    path = tmp_path.parent / f"{tmp_path.name}-spec.toml"
    path.write_text(QUALIFY_SPEC.replace("{SECRET}", secret))
    return path


@pytest.mark.slow
def test_qualify_with_a_fabric_in_its_spec(tmp_path, secret, user_spec):
    rc, out, err = run_and_search(tmp_path, ["qualify", "--spec", str(user_spec), "--out", "q"], secret)
    assert rc == 0, err
    assert (tmp_path / "q" / "spec.toml").read_text().count("MY_TOKEN=***") == 1
    assert "allreduce_bw" in (tmp_path / "q" / "junit.xml").read_text()


def test_qualify_dry_run_and_fabric_option(tmp_path, secret, user_spec):
    rc, out, err = run_and_search(tmp_path, ["qualify", "--spec", str(user_spec), "--dry-run"], secret)
    assert rc == 0 and "allreduce_bw" in out, err
    rc, out, err = run_and_search(tmp_path, ["qualify", "--spec", "builtin:h200-sxm-8", "--fabric",
                                             "sec:MY_TOKEN={SECRET}", "--dry-run"], secret)
    assert rc == 0, err


def test_study_dry_run(tmp_path, secret):
    rc, out, err = run_and_search(tmp_path, ["study", "--device", "cpu", "--nprocs", "2", "--model", "tiny-mistral",
                                             "--fabrics", "default,sec:MY_TOKEN={SECRET}", "--strategies", "ddp",
                                             "--out", "lab", "--dry-run"], secret)
    assert rc == 0 and "train ddp @ sec" in out, err


@pytest.mark.slow
def test_train_under_a_custom_fabric(tmp_path, secret):
    rc, out, err = run_and_search(tmp_path, ["train", "--strategy", "ddp", "--model", "tiny-mistral", "--device",
                                             "cpu", "--nprocs", "2", "--steps", "3", "--warmup-steps", "1",
                                             "--batch-size", "2", "--seq-len", "16", "--trace-steps", "0",
                                             "--fabric", "sec:MY_TOKEN={SECRET}", "--out", "t.jsonl"], secret)
    assert rc == 0, err
    assert '"MY_TOKEN": "***"' in (tmp_path / "t.jsonl").read_text()


@pytest.mark.slow
def test_study_under_a_custom_fabric(tmp_path, secret):
    rc, out, err = run_and_search(tmp_path, ["study", "--device", "cpu", "--nprocs", "2", "--model", "tiny-mistral",
                                             "--fabrics", "default,sec:MY_TOKEN={SECRET}", "--strategies", "ddp",
                                             "--steps", "3", "--warmup-steps", "1", "--batch-size", "2",
                                             "--seq-len", "16", "--sizes", "1K", "--iters", "2", "--warmup", "1",
                                             "--repeats", "1", "--out", "lab"], secret, timeout=900)
    assert rc == 0, err
    assert (tmp_path / "lab" / "units" / "train_ddp_sec.jsonl").exists()
    assert "sec:MY_TOKEN=***" in (tmp_path / "lab" / "report.md").read_text()


# --- one place formats any text that may hold a fabric spec: awkward values, in-process ---

AWKWARD = ["s3cr3tA,s3cr3tB", "s3cr3tP=s3cr3tQ", '"s3cr3t quoted"', "s3cr3t with spaces", "s3cr3tñé✓ü",
           "s3cr3tX,s3cr3tY z", "'s3cr3t'"]


def _parts(value: str) -> list[str]:
    """The pieces of a secret that must never be printed (each comma part, quotes stripped)."""
    return [p.strip().strip("\"'") for p in value.replace("=", ",").split(",") if len(p.strip().strip("\"'")) > 3]


@pytest.mark.parametrize("value", AWKWARD)
def test_masking_rule_on_awkward_values(value):
    from fabricbench.masking import redact, secret_values, shown_spec

    spec = f"x:MY_TOKEN={value},NCCL_ALGO=Ring"
    shown = shown_spec(spec)
    assert shown.startswith("x:MY_TOKEN=***") and shown.endswith("NCCL_ALGO=Ring"), shown
    text = redact(f"failed under {spec}; the value {value} again", secret_values([spec]))
    for part in _parts(value):
        assert part not in shown and part not in text, (part, shown, text)
    assert "NCCL_ALGO=Ring" in text  # public values stay readable


GLOO_SPEC_FILE = str(DATA / "qualify" / "gloo.toml")


@pytest.mark.parametrize("value", AWKWARD)
@pytest.mark.parametrize("args", [
    ["sweep", "--engine", "torch", "--backend", "gloo", "--nprocs", "2", "--fabric", "{SPEC}", "--dry-run"],
    ["sweep", "--fabric", "{SPEC},9bad=1", "--dry-run"],  # an error naming the fabric
    ["compare", "--fabrics", "default,{SPEC},{SPEC}"],  # a fabric given twice
    ["study", "--device", "cpu", "--model", "tiny-mistral", "--out", "s", "--fabrics", "default,{SPEC}", "--dry-run"],
    ["qualify", "--spec", GLOO_SPEC_FILE, "--fabric", "{SPEC}", "--dry-run"],
    ["train", "--device", "cpu", "--model", "nope", "--fabric", "{SPEC}"],
], ids=["sweep-dry-run", "sweep-error", "compare-twice", "study-dry-run", "qualify-dry-run", "train-error"])
def test_no_message_shows_an_awkward_secret(args, value, tmp_path, monkeypatch):
    monkeypatch.setattr("fabricbench.gpus.visible_gpu_count", lambda: 0)
    spec = f"sec:MY_TOKEN={value}"
    monkeypatch.chdir(tmp_path)  # study's --out s and whatever else a command writes land here
    code, out, err = run_cli_captured([a.replace("{SPEC}", spec) for a in args])
    text = out + err
    assert code in (0, 2), text[-500:]
    for part in _parts(value):
        assert part not in text, f"{part!r} printed: {text[-600:]}"
    for path in tmp_path.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(part.encode() in data for part in _parts(value)), path
