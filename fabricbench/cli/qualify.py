"""`fabricbench qualify`: check a node against a spec and give verdicts, JUnit and a report; write a spec
from a known-good node; find the outliers of a fleet.

    fabricbench qualify --spec builtin:h200-sxm-8 --out q/          (exit 0 pass, 1 fail/error, 2 bad input)
    fabricbench qualify --spec node.toml --out q/ --resume --only allreduce_bw
    fabricbench qualify --spec node.toml --out q2/ --baseline q/results.jsonl --tolerance 0.05
    fabricbench qualify --init node.toml --from q/results.jsonl --margin 0.9
    fabricbench qualify --fleet node1/ node2/ node3/ --out fleet/
    fabricbench qualify --spec node.toml --dry-run                   (check the spec, list its checks)
    fabricbench qualify --list-specs | --list-kinds

The library decides (fabricbench/qualifying/api.py); this module maps flags.
"""

from __future__ import annotations

import dataclasses
import json
import os

import click


def _names(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        from fabricbench.errors import UsageError

        raise UsageError("--only/--skip is empty; give check names separated by commas")
    return names


@click.command(context_settings={"show_default": True})
@click.argument("inputs", nargs=-1)
@click.option("--spec", "spec_path", default=None, help="A TOML spec, or builtin:NAME (see --list-specs).")
@click.option("--out", "out_dir", default=None, help="Folder for results.jsonl, verdicts.json, junit.xml, report.")
@click.option("--resume", is_flag=True, help="Continue the run in --out: measured units are reused.")
@click.option("--only", default=None, help="Run only these checks (comma list of names).")
@click.option("--skip", default=None, help="Skip these checks (comma list of names).")
@click.option("--fabric", default=None, help="Run the checks that use the default fabric under this one instead.")
@click.option("--topo-file", default=None, help="Judge topology checks on a saved `nvidia-smi topo -m` output.")
@click.option("--baseline", default=None, help="An earlier results.jsonl of this node: flag regressions.")
@click.option("--tolerance", type=float, default=0.05, help="Regression tolerance against --baseline.")
@click.option("--init", "init_path", default=None, help="Write a spec here from --from RESULTS.jsonl.")
@click.option("--from", "from_path", default=None,
              help="Results to read: --init writes a spec from them; --spec judges them, measuring nothing.")
@click.option("--margin", type=float, default=0.9, help="--init: thresholds = measured x margin.")
@click.option("--name", default=None, help="--init: the spec's name (default: from the host).")
@click.option("--fleet", is_flag=True, help="Compare the nodes given as INPUTS (qualify --out folders or results).")
@click.option("--fraction", type=float, default=0.9, help="--fleet: a node below this x the median is an outlier.")
@click.option("--list-specs", is_flag=True, help="List the built-in specs and exit.")
@click.option("--list-kinds", is_flag=True, help="List the check kinds and their keys, then exit.")
@click.option("--json", "as_json", is_flag=True, help="Print the verdicts as JSON instead of the table.")
@click.option("--quiet", is_flag=True, help="No progress lines.")
@click.option("--dry-run", is_flag=True, help="Check the spec and list the checks it would run; measure nothing.")
def qualify(inputs, spec_path, out_dir, resume, only, skip, fabric, topo_file, baseline, tolerance, init_path, from_path,
            margin, name, fleet, fraction, list_specs, list_kinds, as_json, quiet, dry_run):
    """Check a node against a spec: verdicts with numbers, JUnit, report; specs from runs; fleets.

    \b
    Exit status: 0 every check passed or was waived; 1 a check failed or errored; 2 bad input.
    \b
    Spec format (TOML; `--list-kinds` shows every kind's keys):
      [spec]
      name = "my-node"
      [run]                      # optional: engine = "native" (default) or "torch",
      engine = "torch"           #   backend = "gloo"/"nccl", nprocs, iters, warmup,
      backend = "gloo"           #   timeout_s, unit_timeout_s
      nprocs = 2
      [[check]]
      name = "allreduce_bw"      # unique; --only/--skip and JUnit use it
      kind = "collective"        # topology, collective, correctness, transport,
      op = "all_reduce"          #   contrast, p2p, host_copy, train
      sizes = ["8", "1G"]
      gpus = "all"               # or "each_island", "each_pair", [[0,1],[2,3]]
      min_busbw_gbps = 300       # or reference_busbw_gbps + min_fraction
    """
    from fabricbench.errors import UsageError

    modes = [m for m, on in (("--spec", spec_path), ("--init", init_path), ("--fleet", fleet),
                             ("--list-specs", list_specs), ("--list-kinds", list_kinds)) if on]
    if len(modes) != 1:
        raise UsageError("give one of --spec FILE, --init SPEC --from RESULTS, --fleet DIR..., --list-specs, "
                         "--list-kinds" + (f" (got {', '.join(modes)})" if modes else ""))
    if dry_run and not spec_path:
        raise UsageError("--dry-run goes with --spec (it checks a spec and lists its checks)")
    if inputs and not fleet:
        raise UsageError(f"unexpected argument(s) {' '.join(inputs)}; folders to compare go with --fleet")
    if list_specs:
        return _list_specs()
    if list_kinds:
        return _list_kinds()
    if init_path:
        return _init(init_path, from_path, margin, name)
    if fleet:
        return _fleet(inputs, out_dir, fraction, as_json)
    if dry_run:
        return _dry_run(spec_path, _names(only), _names(skip), fabric, as_json)
    from fabricbench.qualifying.api import qualify as run
    from fabricbench.qualifying.report import render

    echo = None if quiet or as_json else (lambda s: click.echo(s, err=True))
    res = run(spec_path, out=out_dir, only=_names(only), skip=_names(skip), resume=resume, topo_file=topo_file,
              baseline=baseline, tolerance=tolerance, fabric=fabric, echo=echo, records_from=from_path)
    if "RANK" in os.environ and os.environ.get("RANK") != "0":
        return 0  # rank 0 reports for the whole launch
    if as_json:
        click.echo(json.dumps(res.to_dict(), indent=2))
    else:
        render(res)
    return res.exit_code


def _dry_run(spec_path: str, only, skip, fabric: str | None, as_json: bool) -> int:
    """The spec read and checked as a run would (every mistake exit 2), then what would run; for spec
    authors and CI jobs that keep specs."""
    from fabricbench.qualifying.api import select
    from fabricbench.qualifying.spec import load_spec

    spec = load_spec(spec_path)
    if fabric:
        spec = spec.under(fabric)
    checks = select(spec, only, skip)
    if as_json:
        click.echo(json.dumps({"spec": spec.name, "path": spec.path, "run": dataclasses.asdict(spec.run),
                               "checks": [{"name": c.name, "kind": c.kind, **_jsonable(c.params)} for c in checks]},
                              indent=2))
        return 0
    r = spec.run
    where = (f"{r.nprocs} {r.backend} rank(s)" if r.cpu_ranks else f"engine {r.engine}"
             + (f", backend {r.backend}" if r.backend else ""))
    click.echo(f"{spec.name} ({spec.path}): {len(checks)} of {len(spec.checks)} check(s), {where}, "
               f"iters {r.iters}, warmup {r.warmup}; nothing measured")
    for c in checks:
        keys = ", ".join(f"{k}={_shown(k, v)}" for k, v in _jsonable(c.params).items() if v is not None)
        click.echo(f"  {c.name:28s} {c.kind:12s} {keys}")
    return 0


def _shown(key: str, value):
    from fabricbench.sizes import format_size

    if key in ("size", "busbw_size", "latency_size") and isinstance(value, int):
        return format_size(value)
    if key == "sizes" and isinstance(value, list):
        return ",".join(format_size(v) for v in value)
    return value


def _jsonable(params: dict) -> dict:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in params.items()}


def _list_specs() -> int:
    from fabricbench.qualifying.spec import builtin_names, load_spec

    for n in builtin_names():
        s = load_spec(f"builtin:{n}")
        click.echo(f"builtin:{n:18s} {len(s.checks):2d} checks  {s.description or s.name}")
    return 0


def _list_kinds() -> int:
    from fabricbench.qualifying.checks import CHECKS

    for k in CHECKS:
        click.echo(f"{k.name:12s} {k.description}")
        for key, f in k.fields.items():
            click.echo(f"    {key:24s} {f.expects}{' (required)' if f.required else ''}: {f.doc}")
    return 0


def _init(init_path: str, from_path: str | None, margin: float, name: str | None) -> int:
    from fabricbench.errors import UsageError
    from fabricbench.qualifying.api import init_spec
    from fabricbench.qualifying.spec import parse_spec

    if not from_path:
        raise UsageError("--init needs --from RESULTS.jsonl (a known-good run's results)")
    text = init_spec(from_path, margin=margin, name=name)
    spec = parse_spec(text, init_path)  # what we write must read back
    try:
        with open(init_path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as e:
        raise UsageError(f"--init {init_path}: cannot write there ({e.strerror})") from None
    click.echo(f"wrote {init_path}: {len(spec.checks)} checks ({', '.join(c.name for c in spec.checks)}), "
               f"thresholds = measured x {margin:g}")
    return 0


def _fleet(inputs, out_dir, fraction, as_json) -> int:
    from fabricbench.qualifying.api import fleet
    from fabricbench.qualifying.fleet import render

    res = fleet(list(inputs), out=out_dir, fraction=fraction)
    if as_json:
        click.echo(json.dumps(res.to_dict(), indent=2))
    else:
        render(res)
    return res.exit_code
