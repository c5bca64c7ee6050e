"""The commands a study report prints: the one that reruns the study, and each unit's (section "Reproduce")."""

from __future__ import annotations

import shlex

from fabricbench.reporting.document import Document
from fabricbench.studying.config import StudyConfig


def study_command(c: StudyConfig) -> str:
    """The one command that reruns this study (every setting spelled out; a custom fabric's values as ***)."""
    argv = ["fabricbench", "study"]
    argv += ["--device", "cpu", "--nprocs", str(c.nprocs)] if c.device == "cpu" else ["--gpus", ",".join(map(str, c.gpus))]
    argv += ["--fabrics", ",".join(c.fabrics_shown), "--strategies", ",".join(c.strategies)]
    argv += ["--model", c.model] if c.model else ["--model-config", str(c.model_config)]
    argv += ["--steps", str(c.steps), "--warmup-steps", str(c.warmup_steps)]
    if c.batch_size is not None:  # None: the study picks it again
        argv += ["--batch-size", str(c.batch_size)]
    if c.repeats is not None:
        argv += ["--repeats", str(c.repeats)]
    argv += c.shape_args
    if c.precision:
        argv += ["--precision", c.precision]
    if c.sizes:
        argv += ["--sizes", c.sizes]
    argv += ["--iters", str(c.iters), "--warmup", str(c.warmup), "--out", c.out]
    return shlex.join(argv)


def wrap(cmd: str, width: int = 100) -> str:
    """A long shell command over several lines (backslash continuations), options kept with their values."""
    words = cmd.split(" ")
    lines, cur = [], ""
    for i, w in enumerate(words):
        joined = f"{cur} {w}" if cur else w
        # break before an option, never between an option and its value
        if cur and len(joined) > width and w.startswith("-"):
            lines.append(cur + " \\")
            cur = "    " + w
        else:
            cur = joined
    lines.append(cur)
    return "\n".join(lines)



def reproduce_section(doc: Document, sr, c: StudyConfig, command: str) -> None:
    s = doc.section("Reproduce", intro="The command that ran this study, the one that rebuilds this report, and "
                                       "every unit's own command (each ran in its own process, under its fabric).")
    s.code(wrap(command) + "\n" + f"fabricbench study --out {shlex.quote(c.out)} --resume   "
           f"# reruns only units not recorded ok\nfabricbench report {shlex.quote(c.out)}   # this report, measuring nothing")
    rows, cmds = [], []
    plan_units = [u["name"] for u in sr.plan["study"]["units"]]
    for name in plan_units:
        u = sr.units.get(name)
        if u is None:
            rows.append([name, "not run", None, "-"])
            continue
        rows.append([name, u["status"], u.get("duration_s"), (u.get("message") or "-")[:160]])
        for cmd in u.get("commands") or []:
            prefix = f"ip netns exec <ns shaped {u['fabric_facts'].get('shaped_rate_bps') / 1e9:g} Gbit/s> " \
                if (u.get("fabric_facts") or {}).get("netns") else ""
            cmds.append(f"# {name}\n" + wrap(prefix + cmd))
    s.table(["unit", "status", "seconds", "message"], rows, status_col=1)
    if cmds:
        s.code("\n".join(cmds))
