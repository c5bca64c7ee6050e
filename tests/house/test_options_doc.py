"""docs/options.md is complete: its table of options and their ranges, and its table of
deprecated aliases, are the real commands' (read through click), row for row. A new option, a changed
range or a new alias fails here until the page says it.

    python3 -m pytest -q tests/house/test_options_doc.py
    python3 tests/house/test_options_doc.py        (prints both tables, to paste into the page)
"""

from __future__ import annotations

import re

import click

from fabricbench.cli import COMMANDS, cli
from fabricbench.cli.declared import DEPRECATED
from fabricbench.cli.hints import command
from clirun import refused, run_cli
from roots import ROOT

PAGE = ROOT / "docs" / "options.md"
EVERY = "(every command)"


def _params():
    for p in cli.params:  # the group's own options, given before any command
        if p.name not in ("help", "version"):
            yield EVERY, p
    for name in COMMANDS:
        for p in command(name).params:
            if p.name != "help":
                yield name, p


def option_rows() -> list[str]:
    """`| flag | commands | accepts |` for every shown option or argument with a described type."""
    rows: dict[tuple[str, str], list[str]] = {}
    for name, p in _params():
        if getattr(p, "hidden", False) or not hasattr(p.type, "describe"):
            continue
        flag = p.opts[0] if isinstance(p, click.Option) else p.name.upper()
        rows.setdefault((flag, p.type.describe()), []).append(name)
    out = []
    for (flag, accepts), cmds in sorted(rows.items()):
        where = ", ".join(cmds)
        out.append(f"| `{flag}` | {where} | {accepts} |")
    return out


def alias_rows() -> list[tuple[str, str, str]]:
    """(old, new, commands) for every deprecated alias (cli/declared.alias's hidden options)."""
    rows: dict[tuple[str, str], list[str]] = {}
    for name, p in _params():
        if isinstance(p, click.Option) and p.hidden and (p.help or "").startswith(DEPRECATED):
            rows.setdefault((p.opts[0], p.help.split()[-1]), []).append(name)
    return [(old, new, ", ".join(cmds)) for (old, new), cmds in sorted(rows.items())]


def _section(title: str) -> str:
    text = PAGE.read_text()
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else len(text)]


def test_every_option_is_on_the_page():
    table = [line for line in _section("Every option and its range").splitlines() if line.startswith("| `")]
    assert table == option_rows(), "docs/options.md is stale: run python3 tests/house/test_options_doc.py, paste"


def test_every_deprecated_alias_is_on_the_page_with_why():
    found = []
    for line in _section("One name per concept").splitlines():
        m = re.match(r"\| `([^`]+)` \| `([^`]+)` \| ([^|]+) \| ([^|]+) \|$", line)
        if m:
            assert len(m[4].strip()) > 20, f"{m[1]}: say why it was renamed"
            found.append((m[1], m[2], m[3].strip()))
    assert sorted(found) == alias_rows(), "docs/options.md is stale: run python3 tests/house/test_options_doc.py, paste"


def test_cpu_mode_has_one_name_in_the_measuring_commands(capsys):
    code, out, err = run_cli(["sweep", "--device", "cpu", "--nprocs", "2", "--dry-run"], capsys)
    assert code == 0 and "engine torch/gloo" in out, err
    for against in (["--engine", "native"], ["--backend", "nccl"]):
        for order in ([*against, "--device", "cpu"], ["--device", "cpu", *against]):
            assert "beside --device cpu" in refused(["sweep", *order, "--dry-run"], capsys), order


if __name__ == "__main__":
    print("\n".join(option_rows()))
    print()
    for old, new, cmds in alias_rows():
        print(f"| `{old}` | `{new}` | {cmds} | WHY |")
