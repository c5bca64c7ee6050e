"""nccl-tests' -J JSON (file version 3) -> collective records.

    all_reduce_perf -b 8 -e 1G -f 2 -J ar.json && fabricbench import ar.json --out imported.jsonl

Its quirks (nccl-tests src/util.cu): booleans are the strings "true"/"false", `root` a padded string
("    -1"), NaN the string "nan", `nwrong` null when not checked; per-iteration statistics sit in
`out_of_place_per_iter` / `in_place_per_iter`. `env` is the whole environment of the run: only the
allow-listed variables are kept (results/context.allowed_env), as for our own records. A file cut short
(the run died) keeps the results written before the cut, with a warning.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from fabricbench.importing.base import (
    Source,
    dtype_name,
    env_from_list,
    nccl_version_from_code,
    number,
    op_name,
)
from fabricbench.importing.collective import RunFacts, Side, record
from fabricbench.importing.repeats import MAX_WHOLE, Table, figures_problem

TOOL = "nccl-tests"


def sniff(text: str) -> bool:
    head = text.lstrip()[:4096]
    return head.startswith("{") and ('"results"' in head or '"nccl_version"' in head or '"config"' in head
                                     or '"args"' in head)


def read(src: Source) -> Iterator[dict[str, Any]]:
    try:
        doc = src.loads(src.text)
    except json.JSONDecodeError as e:
        doc = _salvage(src, e)
    if not isinstance(doc, dict):
        src.fail(1, "not an nccl-tests -J JSON object")
    version = doc.get("version")
    if version not in (None, 3, 4):  # 4 (nccl-tests 2.20) adds a "tuning" object per result
        src.warn(1, f"nccl-tests JSON version {version}: read as version 3")
    results = doc.get("results")
    if not isinstance(results, list):
        src.fail(1, "no 'results' list: not an nccl-tests -J file, or the run wrote no table")
    config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    facts = RunFacts()
    args = doc.get("args") if isinstance(doc.get("args"), list) else []
    if args and isinstance(args[0], str):
        facts.op = op_name(args[0])
    if facts.op is None:
        src.warn(1, "the JSON's args do not name an nccl-tests program: op left null")
    code = doc.get("nccl_version")
    if isinstance(code, int):
        facts.nccl_version = nccl_version_from_code(code)
    # One device entry per process (nccl-tests parses only the first Rank line of each process); a process
    # drives nthreads x ngpus consecutive GPUs from that device on (src/util.cu writeDeviceReport).
    devices = [d for d in config.get("devices") or [] if isinstance(d, dict)]
    per_proc = (_int(config.get("nthreads")) or 1) * (_int(config.get("ngpus")) or 1)
    if devices:
        for d in devices:
            first = _int(d.get("device"))
            facts.gpus += [first + i for i in range(per_proc)] if first is not None else []
            facts.gpu_names += [str(d.get("device_info") or "")] * per_proc
        facts.hosts = list(dict.fromkeys(str(d.get("hostname")) for d in devices if d.get("hostname")))
    facts.nranks = src.ranks(len(devices) * per_proc if devices else None, 1)
    facts.iters = _int(config.get("iterations"))
    facts.warmup = _int(config.get("warmup_iters"))
    facts.graph = None if config.get("graph") is None else bool(_int(config.get("graph")))
    facts.validation = None if config.get("validation") is None else bool(_int(config.get("validation")))
    facts.timestamp = doc.get("start_time") if isinstance(doc.get("start_time"), str) else None
    env = env_from_list(doc.get("env") if isinstance(doc.get("env"), list) else [])
    head = src.header("collective", 0, tool=TOOL, tool_version=None, line=None, host=facts.host,
                      timestamp=facts.timestamp, env=env)
    table = Table()
    for i, r in enumerate(results):
        if not isinstance(r, dict) or not isinstance(r.get("size"), int):
            src.warn(None, f"results[{i}]: not a measurement (no integer size); skipped")
            continue
        if not 0 <= r["size"] < MAX_WHOLE or not 0 <= (_int(r.get("count")) or 0) < MAX_WHOLE:
            src.refuse(None, f"results[{i}]: size {r['size']} or count {r.get('count')} past 64 bits")
            continue
        pre = {"size": str(r["size"]), "count": str(_int(r.get("count"))), "type": str(r.get("type")),
               "redop": str(r.get("redop")), "root": str(r.get("root", "")).strip()}
        sides = [_side(src, r, key, i) for key in ("out_of_place", "in_place")]
        table.add(i, pre, sides)  # a size printed again (-N cycles): one measurement, the repeats its samples
    for g in table:
        r = results[g.line]
        root = _int(g.pre["root"])
        redop = r.get("redop")
        for side, inplace in zip(g.placements(), (False, True)):
            if side is None:
                continue
            yield record(dict(head, source={**head["source"], "result": g.line}), facts, nbytes=r["size"],
                         count=_int(r.get("count")), dtype=dtype_name(str(r.get("type"))),
                         redop=None if redop in (None, "none") else str(redop),
                         root=root if root is not None and root >= 0 else None, inplace=inplace, side=side)


def _side(src: Source, r: dict[str, Any], key: str, i: int) -> Side | None:
    """One placement of a result; None where it is absent or its figures are impossible (refused)."""
    body = r.get(key)
    if not isinstance(body, dict):
        return None
    side = Side(time_us=number(_s(body.get("time", body.get("cpu_time")))), algbw=number(_s(body.get("alg_bw"))),
                busbw=number(_s(body.get("bus_bw"))))
    wrong = number(_s(body.get("nwrong")))
    side.wrong = None if wrong is None else int(wrong)
    per = r.get(f"{key}_per_iter")
    if isinstance(per, dict):
        side.min_us, side.max_us = number(_s(per.get("min_us"))), number(_s(per.get("max_us")))
        side.p99_us = number(_s(per.get("p99_us")))
        cv = number(_s(per.get("cv_pct")))
        side.cv = None if cv is None else cv / 100
        side.extra = {k: number(_s(per.get(k))) for k in ("avg_us", "p50_us", "p95_us", "stdev_us")
                      if number(_s(per.get(k))) is not None}
    if isinstance(r.get("tuning"), dict):
        side.extra["tuning"] = r["tuning"]
    why = figures_problem(side)
    if why:
        src.refuse(None, f"results[{i}].{key}: {why}")
        return None
    return side


def _s(v: Any) -> str | None:
    return None if v is None or isinstance(v, bool) else str(v)


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        s = v.strip().lower()
        if s in ("true", "false"):
            return int(s == "true")
        if re.fullmatch(r"-?\d+", s):
            return int(s)
    return None


def _salvage(src: Source, err: json.JSONDecodeError) -> dict[str, Any]:
    """A file cut short: the top-level fields and every complete result object before the cut."""
    text = src.text
    at = text.find('"results"')
    if at < 0:
        src.fail(err.lineno, f"not valid JSON ({err.msg}) and no 'results' list to recover")
    start = text.find("[", at)
    dec = json.JSONDecoder()
    results: list[Any] = []
    pos = start + 1
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            break
        try:
            obj, pos = dec.raw_decode(text, pos)
        except json.JSONDecodeError:
            break
        results.append(obj)
    line = text.count("\n", 0, pos) + 1
    src.warn(line, f"the JSON is cut short ({err.msg}); kept the {len(results)} complete result(s) before it")
    doc: dict[str, Any] = {"results": results}
    try:  # the fields before "results" (args, env, nccl_version, config) close with a brace once cut there
        head = json.loads(text[:at].rstrip().rstrip(",") + "}")
        if isinstance(head, dict):
            doc = {**head, "results": results}
    except json.JSONDecodeError:
        pass
    return doc
