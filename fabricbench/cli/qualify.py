"""`fabricbench qualify`: check a node against a spec and give verdicts, JUnit and a report; write a spec
from a known-good node; find the outliers of a fleet.

    fabricbench qualify --spec builtin:h200-sxm-8 --out q/          (exit: see EXIT STATUS below)
    fabricbench qualify --spec builtin:h200-sxm-8 --level 1 --dry-run   (the plan and a time estimate)
    fabricbench qualify --spec node.toml --out q/ --prometheus /var/lib/node_exporter/fb.prom
    fabricbench qualify --spec node.toml --out q/ --resume --only allreduce_bw
    fabricbench qualify --spec node.toml --out q2/ --baseline q/results.jsonl --tolerance 0.05
    fabricbench qualify --init node.toml --from q/results.jsonl --factor 0.9
    fabricbench qualify --fleet node1/ node2/ node3/ --out fleet/
    fabricbench qualify --spec node.toml --dry-run                   (check the spec, list its checks)
    fabricbench qualify --list-specs | --list-kinds | --list-codes

The library decides (fabricbench/qualifying/api.py); this module maps flags to its configs
(fabricbench/qualifying/config.py: QualifyConfig, FleetConfig), whose fields declare the options.
"""

from __future__ import annotations

import json
import os

import click

from fabricbench.cli.declared import config_options, declared_option, option
from fabricbench.cli.options import DRY_RUN, JSON, QUIET
from fabricbench.cli.types import InputPath
from fabricbench.declare import Declared

from fabricbench.errors import UsageError
from fabricbench.files import dumps, refuse_collisions
from fabricbench.qualifying.api import fleet as run_fleet, qualify as run, qualify_plan, write_init_spec
from fabricbench.qualifying.config import FleetConfig, QualifyConfig
from fabricbench.qualifying.fleet import render as render_fleet
from fabricbench.qualifying.init_spec import summary as init_summary
from fabricbench.qualifying.listing import code_lines, kind_lines, spec_lines
from fabricbench.qualifying.report import render
from fabricbench.qualifying.verdict import CPU_SPEC
from fabricbench.reporting.table import fit_lines

# The command's modes and --init's options: this command's own, no config's (--from is QualifyConfig's)
INIT = Declared(flag="--init", kind="output file", help="Write a spec here from --from RESULTS.jsonl.")
# --init's threshold factor (never "margin": that name is ±δ of a comparison, in train and study)
FACTOR = Declared(flag="--factor", kind="fraction", lo=0, hi=1, lo_open=True,
                  help="--init: thresholds = measured x this factor (floors), or / it (ceilings).")
NAME = Declared(flag="--name", kind="text", help="--init: the spec's name (default: from the host).")
FLEET = Declared(flag="--fleet", kind="flag", help="Compare the nodes given as INPUTS (qualify --out folders or "
                 "results).")
LIST_SPECS = Declared(flag="--list-specs", kind="flag", help="List the built-in specs and exit.")
LIST_KINDS = Declared(flag="--list-kinds", kind="flag", help="List the check kinds and their keys, then exit.")
LIST_CODES = Declared(flag="--list-codes", kind="flag", help="List the finding codes and their actions, then exit.")


@click.command(context_settings={"show_default": True})
@click.argument("inputs", nargs=-1, type=InputPath(folder=True))
@declared_option(QualifyConfig, "spec", required=False)  # one of the modes: the command checks that one is given
@config_options(QualifyConfig, exclude=("spec", "records_from"))
@option(INIT, "init_path")
@declared_option(QualifyConfig, "records_from")
@option(FACTOR, "factor", 0.9)
@option(NAME, "name")
@option(FLEET, "fleet")
@declared_option(FleetConfig, "fraction")
@option(LIST_SPECS, "list_specs")
@option(LIST_KINDS, "list_kinds")
@option(LIST_CODES, "list_codes")
@option(JSON, "as_json", help="Print the verdicts as JSON instead of the table.")
@option(QUIET, "quiet", help="No progress lines.")
@option(DRY_RUN, "dry_run", help="Check the spec and list the checks it would run; measure nothing.")
def qualify(inputs, init_path, factor, name, fleet, fraction, list_specs, list_kinds, list_codes, as_json, quiet,
            dry_run, **fields):
    """Check a node against a spec: verdicts with numbers, JUnit, report; specs from runs; fleets.

    \b
    Exit status, by the worst verdict's severity (a fleet: the worst node's):
      0 pass or info (waived)    1 critical (a floor missed: drain)    2 bad input
      3 unknown (a check could not be measured)    4 warning (near miss, cv, latency, flaky)
      5 nothing measured (every check waived: not a pass)
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
    modes = [m for m, on in (("--spec", fields["spec"]), ("--init", init_path), ("--fleet", fleet),
                             ("--list-specs", list_specs), ("--list-kinds", list_kinds),
                             ("--list-codes", list_codes)) if on]
    if len(modes) != 1:
        raise UsageError("give one of --spec FILE, --init SPEC --from RESULTS, --fleet DIR..., --list-specs, "
                         "--list-kinds, --list-codes" + (f" (got {', '.join(modes)})" if modes else
                                                         f" (a first run: --spec {CPU_SPEC} needs no GPU)"))
    if dry_run and not fields["spec"]:
        raise UsageError("--dry-run goes with --spec (it checks a spec and lists its checks)")
    if inputs and not fleet:
        raise UsageError(f"unexpected argument(s) {' '.join(inputs)}; folders to compare go with --fleet")
    if list_specs or list_kinds or list_codes:
        for line in fit_lines(spec_lines() if list_specs else kind_lines() if list_kinds else code_lines()):
            click.echo(line)
        return 0
    if init_path:
        return _init(init_path, fields["records_from"], factor, name)
    if fleet:
        return _fleet(FleetConfig(inputs=inputs, out=fields["out"], fraction=fraction,
                                  prometheus=fields["prometheus"]), as_json)
    config = QualifyConfig(**fields)
    if dry_run:
        return _dry_run(config, as_json)
    echo = None if quiet or as_json else (lambda s: click.echo(s, err=True))
    res = run(config, echo=echo)
    if "RANK" in os.environ and os.environ.get("RANK") != "0":
        return 0  # rank 0 reports for the whole launch
    if as_json:
        click.echo(dumps(res.to_dict(), indent=2))
    else:
        render(res)
    return res.exit_code


def _dry_run(config: QualifyConfig, as_json: bool) -> int:
    """The plan the library returns (fabricbench/qualifying/dryrun.py), printed."""
    plan = qualify_plan(config)
    if as_json:
        click.echo(json.dumps(plan.to_dict(), indent=2))
        return 0
    for line in fit_lines(plan.lines()):
        click.echo(line)
    return 0


def _init(init_path: str, from_path: str | None, factor: float, name: str | None) -> int:
    if not from_path:
        raise UsageError("--init needs --from RESULTS.jsonl (a known-good run's results)")
    refuse_collisions({"--init": init_path}, {"--from": from_path})
    spec = write_init_spec(init_path, from_path, factor=factor, name=name)  # read back before it is written
    click.echo(f"wrote {init_path}: {len(spec.checks)} checks ({', '.join(c.name for c in spec.checks)}), "
               f"{init_summary(spec.text)}")  # the factors as the file says them
    return 0


def _fleet(config: FleetConfig, as_json: bool) -> int:
    res = run_fleet(config, quiet=as_json)
    if as_json:
        click.echo(dumps(res.to_dict(), indent=2))
    else:
        render_fleet(res)
    return res.exit_code
