"""Every command line a message suggests parses with the real command.

    python3 -m pytest -q tests/cli/test_cli_hints.py

Two sources: (1) the library's texts, read from its source (every string and f-string outside docstrings
that holds a backticked `fabricbench ...`), and (2) the hints that library errors carry in argument names
(errors.UsageError.hint), rendered as each command's flags by fabricbench/cli/hints.py. Each suggested line
is parsed by its click command (make_context, resilient parsing off): an unknown flag, a flag without its
value or a value its type refuses fails. Placeholders ({out}, FILE, N) are replaced by valid values of the
option's type before parsing.
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import click
import pytest

import fabricbench
import fabricbench.gpus
from fabricbench.cli import COMMANDS
from fabricbench.cli import types as T
from fabricbench.cli.hints import command, to_flags
from fabricbench.errors import UsageError

LIB = Path(fabricbench.__file__).parent
SUGGESTED = re.compile(r"`(fabricbench [a-z][^`]*)`")
PLACEHOLDER = re.compile(r"^(\{[^}]*\}|[A-Z][A-Z0-9_.]*|\.\.\.|<[^>]*>)$")


def _texts(tree: ast.AST):
    """Each string constant and f-string of a module, f-string fields shown as {name}; no docstrings."""
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    for n in ast.walk(tree):
        if isinstance(n, ast.JoinedStr):
            yield n.lineno, "".join(v.value if isinstance(v, ast.Constant) else "{X}" for v in n.values)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
            yield n.lineno, n.value


def library_suggestions() -> list[tuple[str, str]]:
    out = []
    for path in sorted(LIB.rglob("*.py")):
        if "cli" in path.relative_to(LIB).parts:
            continue
        for line, text in _texts(ast.parse(path.read_text())):
            for m in SUGGESTED.finditer(text):
                out.append((f"{path.relative_to(LIB)}:{line}", m.group(1)))
    return out


def sample(t: click.ParamType, tmp: Path) -> str:
    if isinstance(t, T.Count):
        return str(max(t.lo, 2) if t.hi >= 2 else t.lo)
    if isinstance(t, T.Real):
        return "0.5" if t.hi <= 1 else "60"
    if isinstance(t, (T.Size, T.SizeList)):
        return "1M"
    if isinstance(t, T.GpuList):
        return "0"
    if isinstance(t, T.CountList):
        return "2"
    if isinstance(t, T.NameList):
        return {T.STRATEGY_REGISTRY: "ddp", T.OP_REGISTRY: "all_reduce"}.get(t.registry, "x")
    if isinstance(t, T.FabricSpec):
        return "default"
    if isinstance(t, T.InputPath):
        f = tmp / "input.jsonl"
        f.write_text("{}\n")
        return str(tmp) if t.folder_only else str(f)
    if isinstance(t, (T.OutputFile,)):
        return str(tmp / "new.out")
    if isinstance(t, T.OutputFolder):
        return str(tmp / "new-folder")
    if isinstance(t, T.Choice):
        return t.choices[0]
    return "x"


def parses(line: str, tmp: Path) -> None:
    """Parse `fabricbench CMD ARGS...` with the real command; placeholders become valid values."""
    words = shlex.split(line)
    assert words[0] == "fabricbench" and words[1] in COMMANDS, line
    cmd = command(words[1])
    args, rest, pending = [], words[2:], None
    opts = {o: p for p in cmd.params if isinstance(p, click.Option) for o in p.opts}
    positional = [p for p in cmd.params if isinstance(p, click.Argument)]
    for w in rest:
        if pending is not None:
            args.append(sample(pending.type, tmp) if PLACEHOLDER.match(w) or "{X}" in w else w)
            pending = None
        elif w in opts:
            args.append(w)
            pending = None if opts[w].is_flag else opts[w]
        elif w.startswith("-"):
            args.append(w)  # an unknown flag: the parse below must fail on it
        else:
            args.append(sample(positional[0].type, tmp) if positional and (PLACEHOLDER.match(w) or "{X}" in w)
                        else w)
    cmd.make_context(words[1], args, resilient_parsing=False)


SUGGESTIONS = library_suggestions()


def test_the_library_suggests_command_lines():
    assert len(SUGGESTIONS) >= 8, SUGGESTIONS  # the walk finds them (relate, study, qualify...)


@pytest.mark.parametrize("where, line", SUGGESTIONS, ids=[w for w, _ in SUGGESTIONS])
def test_each_library_suggestion_parses(where, line, tmp_path):
    try:
        parses(line, tmp_path)
    except click.ClickException as e:
        pytest.fail(f"{where}: `{line}` does not parse: {e.format_message()}")


HINTS = [fabricbench.gpus.CPU_RANKS, {"device": "cpu", "nprocs": 2}, {"topo_file": "FILE"},
         {"engine": "torch", "backend": "gloo"}]


def _hint_sites() -> list[dict]:
    """The hint= of every UsageError raised in the library (literal dicts, lists of them, or names)."""
    found = []
    for path in sorted(LIB.rglob("*.py")):
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "UsageError":
                for kw in n.keywords:
                    if kw.arg == "hint":
                        found.append((path.name, ast.unparse(kw.value)))
    return found


def test_every_hint_in_the_library_is_listed_here():
    """A new hint is added to HINTS so that the parse test below covers it."""
    sites = _hint_sites()
    assert sites, "no hint found: the walk is broken"
    for name, text in sites:
        if text in ("CPU_RANKS", "fabricbench.gpus.CPU_RANKS") or name == "errors.py":  # the class itself
            continue
        value = ast.literal_eval(text)
        for h in value if isinstance(value, list) else [value]:
            assert h in HINTS, (name, h)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_rendered_hints_name_only_real_flags(name, tmp_path):
    for h in HINTS:
        text = to_flags(UsageError("something is missing", hint=[h], hint_text="try"), name)
        cmd = command(name)
        # a hint is what to add to the command line given, which holds the command's required options
        required = [w for p in cmd.params if isinstance(p, click.Option) and p.required for w in (p.opts[0], "{X}")]
        for line in SUGGESTED.findall(text):
            parses(" ".join([line, *required]), tmp_path)
        names = {p.name for p in cmd.params}
        assert ("`fabricbench" in text) == (set(h) <= names), (name, h, text)


def test_hints_that_matter():
    assert to_flags(UsageError("no GPU", hint=fabricbench.gpus.CPU_RANKS, hint_text="on CPU, run with"), "p2p") \
        == "no GPU"  # p2p has no --engine: no hint rather than a wrong one
    assert to_flags(UsageError("no GPU", hint=fabricbench.gpus.CPU_RANKS, hint_text="on CPU, run with"),
                    "sweep") == "no GPU; on CPU, run with `fabricbench sweep --engine torch --backend gloo --nprocs 2`"
    assert to_flags(UsageError("no GPU", hint={"device": "cpu", "nprocs": 2}, hint_text="train on CPU with"),
                    "train") == "no GPU; train on CPU with `fabricbench train --device cpu --nprocs 2`"
    assert str(UsageError("no GPU", hint={"device": "cpu", "nprocs": 2})) == "no GPU; run with device='cpu', nprocs=2"
