"""Tables at 80 columns: no figure or name is ever cut, the reflow keeps every cell, piped output keeps the
full table; the number formatter. Commands run through a real pseudo-terminal of 80 columns where they
are cheap (saved inputs, offline files); the measuring commands' tables are rendered by the functions the
commands call, on an 80-column terminal console, from records of the shape the engines write.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from types import SimpleNamespace

import pytest
from rich.console import Console

from fabricbench.reporting import table as tables
from fabricbench.reporting.analysis import comparison, fmt, fmt_count, fmt_cv, fmt_ratio
from roots import DATA

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def run_pty(args: list[str], *, cols: int = 80, timeout: float = 120.0, cwd: str | None = None) -> tuple[int, str]:
    """Run `python -m fabricbench ARGS` on a pseudo-terminal `cols` wide; (exit status, text without
    escape sequences)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, cols, 0, 0))
    env = {**os.environ, "COLUMNS": str(cols), "LINES": "50", "TERM": "xterm-256color"}
    p = subprocess.Popen([sys.executable, "-m", "fabricbench", *args], stdin=slave, stdout=slave, stderr=slave,
                         env=env, cwd=cwd, close_fds=True)
    os.close(slave)
    out, deadline = b"", time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 1 << 16)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
            elif p.poll() is not None:
                break
    finally:
        os.close(master)
        if p.poll() is None:
            p.kill()
    rc = p.wait(timeout=10)
    # as a terminal shows it: a carriage return starts the line again (a progress bar redrawing itself)
    text = out.decode("utf-8", "replace").replace("\r\n", "\n")
    lines = (ANSI.sub("", line.split("\r")[-1]) for line in text.split("\n"))
    # a progress bar is transient: the terminal erases it when the work ends (cursor moves this capture
    # does not replay), so its frames are not part of what stays on the screen
    return rc, "\n".join(line for line in lines if "━" not in line)


def assert_uncut(text: str, width: int = 80, *, must_show: tuple[str, ...] = ()) -> None:
    """No ellipsis, no line wider than the terminal, and every expected name or figure intact on one line."""
    assert "…" not in text, text
    wide = [line for line in text.splitlines() if len(line.rstrip()) > width]
    assert not wide, "\n".join(wide)
    lines = text.splitlines()
    for s in must_show:
        assert any(s in line for line in lines), f"{s!r} is cut or missing:\n{text}"


def narrow_console(width: int = 80) -> Console:
    return Console(width=width, force_terminal=True, file=io.StringIO(), color_system=None)


@pytest.fixture()
def term80(monkeypatch):
    """Every table the commands print goes to one 80-column terminal console; returns a reader."""
    con = narrow_console()
    monkeypatch.setattr(tables, "console", lambda **kw: con)
    return lambda: con.file.getvalue()


def sweep_rec(op, nbytes, *, time_us, busbw, cv=0.01, status="ok", dtype="float32", inplace=False, message=None):
    return {"op": op, "bytes": nbytes, "requested_bytes": nbytes, "count": nbytes // 4, "dtype": dtype,
            "inplace": inplace, "time_us": time_us, "algbw_gbps": busbw * 0.6, "busbw_gbps": busbw, "wrong": 0,
            "cv": cv, "status": status, "message": message, "nranks": 8}


# -- the number formatter ------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, text", [
    (1233.4, "1,233"), (2157.63, "2,158"), (268435456, "268,435,456"), (431.16, "431.16"), (5.0, "5.00"),
    (0.00233, "0.00233"), (0.0935, "0.0935"), (1.234e-7, "0.000000123"), (0, "0.00"), (-1500.0, "-1,500"),
    (None, "-"),
])
def test_fmt_is_for_people(value, text):
    assert fmt(value) == text and "e" not in fmt(value)


def test_cv_mark_ratio_direction_and_counts():
    assert fmt_cv(0.51) == "0.510 !" and fmt_cv(0.5) == "0.500" and fmt_cv(None) == "-"
    assert fmt_ratio(5.2) == "5.20×"
    assert fmt_count(7.24e9) == "7.24 billion" and fmt_count(124_000_000) == "124 million" and fmt_count(8192) == "8,192"
    runs = [SimpleNamespace(fabric=SimpleNamespace(name=n), records=[
        {"op": "all_reduce", "dtype": "float32", "inplace": False, "bytes": 1 << 20, "nranks": 2, "busbw_gbps": bw}])
        for n, bw in (("default", 10.0), ("p2p-off", 2.0))]
    row = comparison(runs)["rows"][0]
    assert row["slower"] == {"default": 1.0, "p2p-off": 5.0} and row["ratio"]["p2p-off"] == pytest.approx(0.2)


# -- the shared render ----------------------------------------------------------------------------------------

SWEEP_RECS = [sweep_rec(op, s, time_us=3981.18 * s / (8 << 30) + 3.4, busbw=2157.63 * s / (8 << 30) + 0.00233)
              for op in ("all_reduce", "all_gather", "reduce_scatter") for s in (8, 2 << 20, 8 << 30)]
SWEEP_RECS.append(sweep_rec("all_reduce", 1 << 30, time_us=10.0, busbw=1.0, cv=0.8))
SWEEP_RECS.append(dict(sweep_rec("all_to_all", 64, time_us=1.0, busbw=1.0), status="waived",
                       message="all_to_all needs NCCL >= 2.7 here: waived, nothing measured for this row"))


def test_sweep_table_at_80_columns_cuts_nothing():
    con = narrow_console()
    tables.render(con, "fabricbench sweep: native, 8 rank(s), fabric default", tables.SWEEP_COLS,
                  [tables.row(r) for r in SWEEP_RECS])
    for r in SWEEP_RECS:
        if tables.note(r):
            con.print(tables.note(r))
    text = con.file.getvalue()
    assert_uncut(text, must_show=("all_reduce", "all_gather", "reduce_scatter", "2,147,483,648", "2,158",
                                  "3,985", "0.800 !", "waived"))
    assert "us = median time" in text  # short headers, explained
    # the waived row's reason is prose: wrapped, every word kept
    words = " ".join(text.split())
    assert "nothing measured for this row" in words


def test_reflow_steps_full_short_parts_blocks():
    cols = [tables.Col("name", justify="left", key=True), tables.Col("a long header", "a", "a = a long header"),
            tables.Col("another long header", "b", "b = another long header")]
    rows = [["alpha", "1,234,567", "89.01"], ["beta", "2", "3"]]
    wide = tables.build(narrow_console(200), "t", cols, rows)
    assert len(wide) == 1 and [c.header for c in wide[0].columns] == ["name", "a long header", "another long header"]
    short = tables.build(narrow_console(30), "t", cols, rows)
    assert [c.header for c in short[0].columns] == ["name", "a", "b"] and "a = a long header" in str(short[1])
    parts = tables.build(narrow_console(18), "t", cols, rows)
    heads = [[c.header for c in p.columns] for p in parts if hasattr(p, "columns")]
    assert heads == [["name", "a"], ["name", "b"]]  # the key column repeated in each part
    blocks = tables.build(narrow_console(12), "t", cols, rows)
    assert "name: alpha" in [str(b) for b in blocks] and "a long header: 1,234,567" in [str(b) for b in blocks]
    for width in (200, 30, 18, 12):
        con = narrow_console(width)
        tables.render(con, "t", cols, rows)
        assert_uncut(con.file.getvalue(), width, must_show=("1,234,567", "alpha"))


def test_piped_output_keeps_the_full_table(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)  # no width asked for: the natural one
    buf = io.StringIO()
    con = tables.console()
    con.file = buf
    assert not con.is_terminal and con.width == tables.PIPED_WIDTH
    tables.render(con, "sweep", tables.SWEEP_COLS, [tables.row(r) for r in SWEEP_RECS])
    lines = buf.getvalue().splitlines()
    assert any(l.split()[:2] == ["op", "size"] and "algbw (GB/s)" in l for l in lines)  # full headers, one line
    row = next(l for l in lines if "reduce_scatter" in l and "8G" in l)
    assert "2,147,483,648" in row and "2,158" in row


# -- each command's table at 80 columns -----------------------------------------------------------------------

def test_compare_table(term80):
    from fabricbench.measuring.format import render_compare_table as render

    names = ["default", "p2p-off", "shaped:200mbit", "net"]
    runs = [SimpleNamespace(fabric=SimpleNamespace(name=n), waived=None, mismatch=None, error=None, transport="SHM",
                            records=[{"op": "all_reduce", "dtype": "float32", "inplace": False, "bytes": s,
                                      "nranks": 8, "busbw_gbps": bw * s / (1 << 30),
                                      "cv": 0.8 if n == "net" else 0.01} for s in (1 << 20, 1 << 30)])
            for n, bw in zip(names, (2157.6, 420.1, 0.0233, 23.3))]
    render(comparison(runs), runs)
    text = term80()
    assert_uncut(text, must_show=("shaped:200mbit", "p2p-off", "2,158", "92,601", "23.30 !") + tuple(names))
    assert "cv above 0.5" in text and "2,158 !" not in text  # only the noisy fabric is marked


def test_scaling_table_gpus_and_cpu_ranks(term80):
    from fabricbench.measuring.format import render_scaling as render

    rows = [{"op": "all_reduce", "bytes": 1 << 30, "inplace": False, "count": c, "placement": p,
             "gpus": list(range(c)), "slowest_link": "NV18", "busbw_gbps": 1234.5 / c, "algbw_gbps": 617.25 / c,
             "transport": "P2P/CUMEM/read"} for c in (2, 4, 8) for p in ("intra-island", "cross-island")]
    render(rows, SimpleNamespace(summary=lambda: "8 GPUs, 2 NVLink islands"))
    render(rows[:1], None, cpu=True)
    text = term80()
    assert_uncut(text, must_show=("cross-island", "P2P/CUMEM/read", "0,1,2,3,4,5,6,7", "617.25"))
    cpu = text.split("CPU rank count")[1]
    assert "ranks" in cpu and "GPU" not in cpu and "island" not in cpu


def test_train_table(term80):
    from fabricbench.training.format import TRAIN_COLS, cells as _cells

    recs = [{"strategy": s, "status": st, "throughput": {"samples_per_s": 1233.4}, "message": msg,
             "memory": {"max_allocated_bytes": 3 << 30, "max_reserved_bytes": 5 << 30},
             "estimate": {"with_activations_bytes": 4 << 30}}
            for s, st, msg in (("ddp", "ok", None), ("zero3", "oom", "CUDA out of memory at step 2 of 8: "
                                                                      "the estimate says 79.2 GiB"))]
    tables.render(tables.console(), "train: tiny-mistral, cuda", TRAIN_COLS, [_cells(r) for r in recs])
    assert_uncut(term80(), must_show=("1,233", "zero3", "3.00", "5.00", "4.00"))


def test_relate_table(term80):
    import fabricbench
    from fabricbench.relating.format import render
    from test_relate import lab

    render(fabricbench.relate(fabricbench.RelateConfig(inputs=lab(slow_noise=1.05))))
    text = term80()
    assert_uncut(text, must_show=("ddp", "fsdp", "fast", "slow", "wire", "predicted-only"))
    assert "N× slower" in text and "drop" not in text


# -- commands through a real pseudo-terminal of 80 columns ----------------------------------------------------

def test_pty_fabrics_advise_qualify_fleet(tmp_path):
    rc, out = run_pty(["fabrics"])
    assert rc == 0
    assert_uncut(out, must_show=("p2p-off", "NCCL_P2P_DISABLE=1", "shaped:RATE"))
    rc, out = run_pty(["advise", "--model", "mistral-7b", "--num-gpus", "4", "--topo-file",
                       str(DATA / "topo" / "h200_nvl_two_quads.txt"), "--gpu-memory", "141GB"])
    assert rc == 0, out
    assert_uncut(out, must_show=("Recommended:", "zero3", "fsdp"))
    rc, out = run_pty(["qualify", "--spec", "builtin:h200-nvl-8", "--only", "wiring", "--topo-file",
                       str(DATA / "topo" / "h200_nvl_two_quads.txt")])
    assert rc in (0, 1), out
    assert_uncut(out, must_show=("wiring",))
    from test_qualify_spec import _scaled_nodes

    dirs = _scaled_nodes(tmp_path, [1.0, 0.97, 0.5])
    rc, out = run_pty(["qualify", "--fleet", *map(str, dirs), "--out", str(tmp_path / "fleet")])
    assert rc == 1, out
    assert_uncut(out, must_show=("node1", "node2", "node3", "outlier"))


def test_pty_plans_and_relate(tmp_path):
    """sweep --dry-run (no GPU here), study --dry-run and relate from saved records, at 80 columns."""
    rc, out = run_pty(["sweep", "--dry-run", "--ops", "all_reduce,all_gather,reduce_scatter", "--sizes", "8-8G:x64"])
    assert rc == 0, out
    assert_uncut(out, must_show=("all_reduce", "all_gather", "reduce_scatter", "8,589,934,592"))
    rc, out = run_pty(["study", "--device", "cpu", "--nprocs", "2", "--fabrics", "default,shaped:1gbit",
                       "--strategies", "ddp,fsdp", "--model", "tiny-mistral", "--out", str(tmp_path / "s"),
                       "--dry-run"])
    assert rc == 0, out
    assert_uncut(out, must_show=("sweep @ shaped:1gbit", "estimate: ~"))
    from test_relate import lab

    recs = lab(slow_noise=1.05)
    sw, tr = tmp_path / "sweeps.jsonl", tmp_path / "train.jsonl"
    sw.write_text("".join(json.dumps(r) + "\n" for r in recs if r["kind"] == "collective"))
    tr.write_text("".join(json.dumps(r) + "\n" for r in recs if r["kind"] == "train"))
    rc, out = run_pty(["relate", str(sw), str(tr)])
    assert rc == 0, out
    assert_uncut(out, must_show=("ddp", "fsdp", "predicted-only", "against reference fast"))


@pytest.mark.slow
def test_pty_sweep_compare_scaling_on_gloo():
    """Tiny gloo runs through a real terminal of 80 columns: the sweep table, a comparison where the
    NCCL-only fabric is waived with its reason (never measured), scaling in ranks."""
    tiny = ["--engine", "torch", "--backend", "gloo", "--iters", "2", "--warmup", "0"]
    rc, out = run_pty(["sweep", *tiny, "--nprocs", "2", "--ops", "all_reduce,all_gather,reduce_scatter",
                       "--sizes", "1K,1M"])
    assert rc == 0, out
    assert_uncut(out, must_show=("all_reduce", "all_gather", "reduce_scatter", "262,144"))
    rc, out = run_pty(["compare", *tiny, "--nprocs", "2", "--fabrics", "default,p2p-off", "--sizes", "1K,64K"])
    assert rc == 0, out
    words = " ".join(out.split())
    assert "p2p-off: WAIVED" in words and "gloo ranks use no NCCL" in words
    assert_uncut(out, must_show=("default",))
    rc, out = run_pty(["scaling", *tiny, "--num-gpus", "2", "--sizes", "64K"])
    assert rc == 0, out
    assert_uncut(out, must_show=("CPU rank count", "ranks"))
    assert "island" not in out and "GPUs" not in out
