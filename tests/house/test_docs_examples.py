"""Every example command in README.md and docs/*.md parses with the real CLI, so the
pages cannot drift from the commands again: each `fabricbench ...` line of a code block (indented or
fenced; `$ `, `python -m`, `torchrun ... -m` and `VAR=value` prefixes allowed; `\\` continuations joined;
a pipe, a redirection or `#` comment ends it) is read by click's own parser for its command, so an option
that does not exist, a flag given a value or an option missing its value fails here. No command runs and
no option value is converted (a page may write DIR or FILE); values of a closed set (a choice) are
checked, and no example uses a deprecated alias.

tests/house/test_multinode_docs.py checks docs/multinode.md's recipes further, against the lab's own argv.
"""

from __future__ import annotations

import re
import shlex

import click
import pytest

from fabricbench.cli import COMMANDS, cli
from roots import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ENDS = {"|", "||", "&&", ";", ">", ">>", "<", "2>", "2>&1", "&", "|&"}
ALIAS = re.compile(r"\(([^()]*?): a deprecated alias")


def _blocks(text: str) -> list[tuple[int, str]]:
    """(line number, code line) for every line of a fenced or an indented code block."""
    out, fenced, prev_blank = [], False, True
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or (line.startswith("    ") and (prev_blank or (out and out[-1][0] == n - 1))):
            out.append((n, line.strip()))
        prev_blank = not line.strip()
    return out


def _joined(code: list[tuple[int, str]]) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    cont = False
    for n, line in code:
        if cont and out:
            out[-1] = (out[-1][0], out[-1][1] + " " + line.rstrip("\\").strip())
        else:
            out.append((n, line.rstrip("\\").strip()))
        cont = line.endswith("\\")
    return out


def _argv(line: str) -> list[str] | None:
    """The arguments after `fabricbench` where the line runs it, else None."""
    try:
        lex = shlex.shlex(line, posix=True, punctuation_chars="|&;<>")
        lex.whitespace_split = True
        lex.commenters = "#"
        tokens = list(lex)
    except ValueError:
        return None
    for i, tok in enumerate(tokens):
        if tok != "fabricbench":
            continue
        before = tokens[:i]
        if not before or before[-1] in ("$", "-m") or all("=" in t or t == "$" for t in before):
            args = []
            for t in tokens[i + 1:]:
                if t in ENDS:
                    break
                args.append(t)
            return args
    return None


def examples() -> list[tuple[str, list[str]]]:
    out = []
    for page in PAGES:
        for n, line in _joined(_blocks(page.read_text(encoding="utf-8"))):
            args = _argv(line)
            if args and args[0] in COMMANDS and "--help" not in args and "-h" not in args:
                out.append((f"{page.relative_to(ROOT)}:{n}", args))
    return out


EXAMPLES = examples()


def test_the_pages_have_examples_of_most_commands():
    assert len(EXAMPLES) >= 60
    assert len({a[0] for _, a in EXAMPLES}) >= 12


def _deprecated(cmd: click.Command) -> set[str]:
    return {a.strip() for p in cmd.params for m in ALIAS.finditer(getattr(p, "help", None) or "")
            for a in m.group(1).split(",")}


def test_deprecated_aliases_are_found():
    """The alias check below reads each option's help; if its words change, this says so."""
    ctx = click.Context(cli)
    assert "--strategy" in _deprecated(cli.get_command(ctx, "train"))


@pytest.mark.parametrize("where,args", EXAMPLES, ids=[w for w, _ in EXAMPLES])
def test_example_parses(where, args):
    ctx = click.Context(cli)
    cmd = cli.get_command(ctx, args[0])
    sub = click.Context(cmd, parent=ctx, info_name=args[0])
    parser = cmd.make_parser(sub)
    try:
        opts, _, _ = parser.parse_args(list(args[1:]))
    except click.UsageError as e:
        pytest.fail(f"{where}: `fabricbench {shlex.join(args)}`: {e.format_message()}")
    old = sorted(a for a in args[1:] if a.split("=", 1)[0] in _deprecated(cmd))
    assert not old, f"{where}: deprecated {', '.join(old)} in `fabricbench {shlex.join(args)}`"
    for p in cmd.params:
        value = opts.get(p.name)
        if isinstance(p.type, click.Choice) and isinstance(value, str):
            assert value in p.type.choices, f"{where}: {p.opts[0]} {value!r} is not one of {p.type.choices}"


def test_no_page_describes_the_old_tie():
    """docs/comparisons.md says the "a ≈ b (within noise)" tie is gone: no other page may describe it."""
    said = [str(p.relative_to(ROOT)) for p in PAGES if p.name != "comparisons.md"
            and re.search(r"within noise\)|≈ \w+ \(within", p.read_text(encoding="utf-8"))]
    assert not said


@pytest.mark.parametrize("command", ["train", "study"])
def test_the_pages_give_the_real_max_repeats_default(command):
    """"`--max-repeats` (N)" in a page is the option's default as the command declares it."""
    ctx = click.Context(cli)
    (opt,) = [p for p in cli.get_command(ctx, command).params if "--max-repeats" in p.opts]
    for page in PAGES:
        for n in re.findall(r"`--max-repeats` \((\d+)\)", page.read_text(encoding="utf-8")):
            assert int(n) == opt.default, f"{page.name} says --max-repeats defaults to {n}; it is {opt.default}"
