"""nccl-tests' text output, every era, -> collective records (and the NCCL log mixed into it).

    fabricbench import all_reduce_perf.log --out imported.jsonl

What varies between eras and copies, and how it is read:
- the table's columns: taken from its header line (`size count type redop root time algbw busbw #wrong
  ...`), which names them in every era: no `root` and `error` (a largest deviation) in the old one,
  `#wrong` (a count) in the current one, `i_min i_max i_p99 i_cv%` with -I 1, tuning columns with -U 1;
  a block without a header is read by its shape (two equal groups of figures after the names);
- `N/A` in the wrong column: not checked (null); `#` lost from header lines in a copy; mpirun/srun tags;
- NCCL INFO lines anywhere, even inside a row (nccl-tests and NCCL share stdout): the row's pieces are
  joined back together and the log goes to that run's transport;
- runs: a new one at `# Collective test starting`, at `# nThread ...`, or at a command line naming a
  `*_perf` program, once the current run has rows; the op comes from those lines (or the file name);
  NCCL lines after a run concluded belong to the next run (another process starting it);
- the first nccl-tests (and NCCL 1's tests): `bytes N type op ... res` headers, rows behind `#`, time
  in milliseconds (converted; told by the units line, else by algbw = bytes / time).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from fabricbench.fabrics.transport import parse_nccl_log
from fabricbench.importing import infer
from fabricbench.importing.base import Source, dtype_name, op_name
from fabricbench.importing.collective import Side, record
from fabricbench.importing.nccl_tests_scan import Run, Scanner

TOOL = "nccl-tests"

_FILE_OPS = re.compile(r"(all[_-]?reduce|all[_-]?gather|reduce[_-]?scatter|all[_-]?to[_-]?all|broadcast|sendrecv)",
                       re.IGNORECASE)
_ROW_SHAPE = re.compile(r"(?m)^(?:\S*:|\[\d+\])?\s*\d+\s+\d+\s+(?:float|half|double|int8|uint8|int32|uint32|int64|uint64|"
                        r"bfloat16|char|int|f8e4m3|f8e5m2)\s+\S+\s+-?\d")


def sniff(text: str) -> bool:
    return bool(re.search(r"(?m)^(?:\[\d+\])?\W*\s*size\s+count\s+type\b|Collective test starting|nThread +\d+ +nGpus",
                          text)
                or _ROW_SHAPE.search(text))


def read(src: Source) -> Iterator[dict[str, Any]]:
    number_of_run = 0
    file_op = _op_from_file_name(src.name)
    for r in Scanner(src).runs():
        if not r.rows:
            continue
        yield from _records(src, r, number_of_run, file_op)
        number_of_run += 1


def _time_scale(run: Run, sides: list[Side]) -> float:
    """1 for microseconds, 1000 where the table printed milliseconds (the first nccl-tests and NCCL 1's
    tests did, under a header without units): told by the units line, else by algbw = bytes / time."""
    if run.time_unit is not None:
        return 1000.0 if run.time_unit == "ms" else 1.0
    ratios = []
    for g, side in zip(run.rows, sides):
        size = int(g.pre["size"])
        if side is not None and side.time_us and side.algbw and size > 0:
            ratios.append(size / (side.time_us * 1e-6) / 1e9 / side.algbw)
    ratios.sort()
    if ratios:  # 1 for microseconds, 1000 for milliseconds (the printed algbw's rounding is far smaller)
        return 1000.0 if ratios[len(ratios) // 2] > 30 else 1.0
    return 1000.0 if run.first_era else 1.0


def _scaled(side: Side, scale: float) -> Side:
    def f(v):
        return None if v is None else round(v * scale, 6)

    side.time_us, side.min_us, side.max_us, side.p99_us = f(side.time_us), f(side.min_us), f(side.max_us), f(side.p99_us)
    if "samples_us" in side.extra:
        side.extra["samples_us"] = [f(v) for v in side.extra["samples_us"]]
    side.extra["time_printed_in"] = "ms"
    return side


def _op_from_file_name(name: str) -> str | None:
    m = _FILE_OPS.search(name)
    return op_name(re.sub(r"[_-]", "", m.group(1).lower())) if m else None


def _records(src: Source, run: Run, index: int, file_op: str | None) -> Iterator[dict[str, Any]]:
    facts = run.facts
    first = run.rows.first_line()
    if facts.op is None and file_op is not None:
        facts.op = file_op
        src.warn(first, f"run {index}: the op ({file_op}) is taken from the file name: nccl-tests did not print it")
    if run.ranks:
        ordered = [run.ranks[k] for k in sorted(run.ranks)]
        facts.gpus = [d for _, d, _ in ordered]
        facts.gpu_names = [n for _, _, n in ordered]
        facts.hosts = list(dict.fromkeys(h for h, _, _ in ordered if h))
    if run.log:
        facts.log = parse_nccl_log(run.log.text())
        facts.log.log_lines += run.log.dropped
        if facts.nccl_version is None:
            facts.nccl_version = facts.log.nccl_version
    told = facts.log.nranks if facts.log and facts.log.nranks else (max(run.ranks) + 1 if run.ranks else None)
    inferred = ["nranks"] if told is not None and not (facts.log and facts.log.nranks) else []  # from Rank lines
    facts.nranks = src.ranks(told, first)
    head = src.header("collective", index, tool=TOOL, tool_version=facts.tool_version, line=first,
                      host=facts.host, timestamp=facts.timestamp)
    placed = [g.placements() for g in run.rows]
    scale = _time_scale(run, [next((s for s in p if s is not None), None) for p in placed])
    if facts.op is None:
        inferred += _infer_op(src, facts, run, placed, first, index)
    if facts.op is None:  # said only now: the columns may still tell it (_infer_op's warning says so then)
        src.warn(first, f"run {index}: nccl-tests did not say which collective this is (no '# Collective test "
                        f"starting' or *_perf command line) and its columns do not tell it: op left null")
    for g, sides in zip(run.rows, placed):
        pre = g.pre
        size, count = int(pre["size"]), int(pre["count"])
        root = pre.get("root")
        root_v = int(root) if root is not None and re.fullmatch(r"-?\d+", root) else None
        redop = pre.get("redop")
        placements = [False, True] if len(sides) >= 2 else [True]
        for inplace, side in zip(placements, sides):
            if side is None:
                continue  # its figures were impossible (refused, counted)
            if scale != 1:
                side = _scaled(side, scale)
            if side.time_us is None and side.algbw is None and side.busbw is None:
                continue  # a placement nccl-tests left blank (trace replay prints in-place only)
            rec = record(dict(head, source={**head["source"], "line": g.line}), facts, nbytes=size, count=count,
                         dtype=dtype_name(pre["type"]), redop=None if redop in (None, "none") else redop,
                         root=None if root_v is None or root_v < 0 else root_v, inplace=inplace, side=side)
            if inferred:
                rec["extra"]["inferred"] = inferred
            yield rec


def _infer_op(src: Source, facts, run: Run, placed, first: int, index: int) -> list[str]:
    """Fill the op (and the rank count) the columns imply unambiguously (infer.py); the fields inferred."""
    rows = []
    for g, sides in zip(run.rows, placed):
        root = g.pre.get("root")
        side = next((s for s in sides if s is not None), None)
        if side is None:
            continue
        rows.append((g.pre.get("redop"), int(root) if root is not None and re.fullmatch(r"-?\d+", root) else None,
                     side.algbw, side.busbw))
    op, n = infer.collective(rows, facts.nranks)
    if op is None:
        return []
    facts.op = op
    got = ["op"]
    if n is not None:
        facts.nranks, got = n, got + ["nranks"]
    src.warn(first, f"run {index}: the op ({op}{f', {n} ranks' if n else ''}) is inferred from the columns "
                    f"(redop, root, busbw/algbw): extra.inferred says so")
    return got
