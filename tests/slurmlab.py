"""What the Slurm lab tests share (tests/test_slurm_*.py): the docs' srun and sbatch recipes read from the
pages, a user's environment on the login node, and running a recipe there as written.

A recipe runs as the page writes it, in a folder of its own (the cluster's shared filesystem: every node
sees the same cwd), with the lab's few stand-ins for what it lacks, each named in LAB_HARDWARE.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from fabricbench.cluster import slurm
from proctree import alive, wait_for  # noqa: F401 - the lab tests take them from here too
from roots import DATA, ROOT

MULTINODE = ROOT / "docs" / "multinode.md"
QUALIFY = ROOT / "docs" / "qualify.md"
GLOO_SPEC = DATA / "qualify" / "gloo_e2e.toml"

# The lab's nodes have CPUs, not 8 GPUs: what a GPU recipe asks for, and what the lab runs instead.
LAB_HARDWARE = [
    (r" --gpus-per-node=8", ""),
    (r"#SBATCH --nodes=4", "#SBATCH --nodes=2"),
    (r"--nproc-per-node 8", "--nproc-per-node 1"),
    (r"builtin:h200-sxm-8", "my-node.toml"),  # a per-node spec the lab's CPUs can pass: gloo_e2e.toml
]


def blocks(page: Path) -> list[tuple[str, str]]:
    """(section, text) of each code block of `page` (indented or ```-fenced) whose first line is an srun or
    sbatch command or an #SBATCH script, in page order; `section` is the block's `## ` heading."""
    out, section, lines, i = [], "", page.read_text().splitlines(), 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section = line[3:].strip()
        if line.startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            body = lines[i + 1:j]
            i = j + 1
        elif line.startswith("    ") and (i == 0 or not lines[i - 1].strip()):
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or not lines[j].strip()):
                j += 1
            body = [ln[4:] for ln in lines[i:j]]
            while body and not body[-1].strip():
                body.pop()
            i = j
        else:
            i += 1
            continue
        first = body[0].strip() if body else ""
        if first.startswith(("srun ", "sbatch ", "#SBATCH")) or (first.startswith("#!") and
                                                                 any(b.startswith("#SBATCH") for b in body)):
            out.append((section, "\n".join(body) + "\n"))
    return out


def recipe(page: Path, section: str) -> str:
    """The one srun/sbatch recipe of `section` on `page`."""
    (text,) = [t for s, t in blocks(page) if s == section]
    return text


def on_the_lab(text: str) -> str:
    for old, new in LAB_HARDWARE:
        text = text.replace(old, new)
    return text


def per_node(text: str, k: int) -> str:
    """The recipe with k tasks per node (its --ntasks-per-node N, whatever N the page gives)."""
    new, n = re.subn(r"--ntasks-per-node[ =]\d+", f"--ntasks-per-node {k}", text)
    assert n == 1, text
    return new


def user_env(tmp: Path) -> dict[str, str]:
    """A user's shell on the login node: `python`, `fabricbench` and `torchrun` this interpreter's, gloo on
    the lab's interface (docs/multinode.md), temporary folders under the test's (leftovers are found)."""
    bindir = str(Path(sys.executable).parent)
    return dict(os.environ, PATH=f"{bindir}:{os.environ.get('PATH', '')}", GLOO_SOCKET_IFNAME="eth0",
                OMP_NUM_THREADS="1", TMPDIR=str(tmp))


def shell(s: slurm.Slurm, text: str, cwd: Path, name: str) -> subprocess.Popen:
    """`text` typed into bash on the login node, in `cwd`; its output in cwd/<name>.out."""
    out = open(cwd / f"{name}.out", "w")
    with out:
        return s.popen(["bash", "-c", text], env=user_env(cwd), cwd=cwd, stdout=out, stderr=subprocess.STDOUT)


def run(s: slurm.Slurm, text: str, cwd: Path, name: str, timeout: float) -> str:
    """Run `text` to its end (bounded); its output. Fails the test, with the output, on a non-zero exit."""
    p = shell(s, text, cwd, name)
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{name} still running after {timeout} s: {output(cwd, name)[-1500:]}")
    assert p.returncode == 0, f"{name} exited {p.returncode}: {output(cwd, name)[-2500:]}"
    return output(cwd, name)


def output(cwd: Path, name: str) -> str:
    return (cwd / f"{name}.out").read_text(errors="replace")


def records(f: Path) -> list[dict]:
    return [json.loads(ln) for ln in f.read_text().splitlines() if ln.strip()] if f.exists() else []


def spec(cwd: Path, name: str) -> Path:
    """A qualify spec the lab's CPUs pass, where a recipe names one (my-cluster.toml, my-node.toml)."""
    return Path(shutil.copy(GLOO_SPEC, cwd / name))


def running_job(s: slurm.Slurm, timeout: float = 60) -> str:
    """The id of the one running job (srun started it)."""
    def one():
        ids = [j for j, st in s.jobs().items() if st == "RUNNING"]
        return ids[0] if len(ids) == 1 else None
    return wait_for(one, timeout, "a running job")


def steps_under(folder: Path) -> int:
    """The most steps any train rank file under `folder` holds (the ranks' workspaces, under TMPDIR)."""
    most = 0
    for f in folder.glob("**/rank-*.json"):
        try:
            most = max(most, len(json.loads(f.read_text()).get("step_times_s") or []))
        except (OSError, ValueError):
            pass
    return most
