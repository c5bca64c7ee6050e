"""docs/layout.md's table is the code's layout: one row per first-level package or module of fabricbench/,
none for one that is gone, each row's layer the one tests/house/test_imports.py's LAYERS gives it, and no
"may import" cell that names a higher layer or leaves out a package its row may import.

    python3 -m pytest -q -p no:xdist tests/house/test_layout_doc.py
"""

from __future__ import annotations

import ast
import re

import pytest
from roots import ROOT

DOC = ROOT / "docs" / "layout.md"
HEADER = "| package | what it owns | layer | may import |"
NAME = re.compile(r"`(\w+)(/|\.py)`")
# a top-layer row may say this instead of naming every package below it
EVERY_ROW_BELOW = "every row below"
LEAF_MODULES = "the leaf modules"


def layers_of(source: str) -> list[set[str]]:
    """LAYERS (top first) as test_imports.py's source assigns it; read, not imported, so that this test
    checks the list that file holds and nothing else that importing it would do."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["LAYERS"]:
            return [set(layer) for layer in ast.literal_eval(node.value)]
    raise AssertionError("tests/house/test_imports.py assigns no LAYERS")


def levels(layers: list[set[str]]) -> dict[str, int]:
    """Unit -> its layer, numbered as the doc numbers them: 1 at the top."""
    return {unit: i for i, layer in enumerate(layers, 1) for unit in layer}


def table(text: str) -> dict[str, tuple[int, str]]:
    """The layout table: shown name (`measuring/`, `files.py`) -> (layer, the "may import" cell)."""
    lines = text.splitlines()
    assert HEADER in lines, f"docs/layout.md has no table headed {HEADER!r}"
    rows: dict[str, tuple[int, str]] = {}
    for line in lines[lines.index(HEADER) + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        m = re.fullmatch(r"`(\w+(?:/|\.py))`", cells[0]) if len(cells) == 4 else None
        assert m and cells[2].isdigit(), f"docs/layout.md: {line[:80]!r} is not a `| `name/` | owns | N | may |` row"
        assert m.group(1) not in rows, f"docs/layout.md has a row for {m.group(1)} twice"
        rows[m.group(1)] = (int(cells[2]), cells[3])
    return rows


def shown(unit: str, packages: set[str]) -> str:
    return f"{unit}/" if unit in packages else f"{unit}.py"


def problems(rows: dict[str, tuple[int, str]], units: set[str], layers: list[set[str]]) -> list[str]:
    """What the table says that the code does not; units are shown names (`measuring/`, `files.py`)."""
    level = levels(layers)
    packages = {u.removesuffix("/") for u in units if u.endswith("/")}
    out = [f"{u}: no row" for u in sorted(units - set(rows))]
    out += [f"{u}: a row, but fabricbench/{u} does not exist" for u in sorted(set(rows) - units)]
    for name, (layer, may) in sorted(rows.items()):
        unit = name.removesuffix("/").removesuffix(".py")
        if name not in units or unit not in level:
            continue  # said above, or test_imports.py says it is in no layer
        if layer != level[unit]:
            out.append(f"{name}: layer {layer}, but LAYERS puts it in layer {level[unit]}")
        named = {n + s for n, s in NAME.findall(may)}
        out += [f"{name}: may import {n}, which is no row" for n in sorted(named - units)]
        out += [f"{name}: may import {n}, which is in layer {level[n.removesuffix('/').removesuffix('.py')]}"
                for n in sorted(named & units) if level[n.removesuffix("/").removesuffix(".py")] < level[unit]]
        if EVERY_ROW_BELOW in may or level[unit] == len(layers):
            continue
        # the leaf layer may be named as a whole; every other unit at this layer or below is named
        wanted = {shown(u, packages) for u, lv in level.items() if level[unit] <= lv < len(layers)} - {name}
        out += [f"{name}: may import {n}, which its cell leaves out" for n in sorted(wanted - named)]
        if LEAF_MODULES not in may:
            out.append(f"{name}: its cell leaves out {LEAF_MODULES!r}")
    return out


def fabricbench_units() -> set[str]:
    """The first-level packages and modules of fabricbench/, as test_imports.py counts them."""
    root = ROOT / "fabricbench"
    return {p.name + "/" for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists()} | {
        p.name for p in root.iterdir() if p.suffix == ".py" and p.name != "__init__.py"}


def _layers() -> list[set[str]]:
    return layers_of((ROOT / "tests" / "house" / "test_imports.py").read_text(encoding="utf-8"))


def test_the_table_is_the_code():
    rows, units = table(DOC.read_text(encoding="utf-8")), fabricbench_units()
    assert len(rows) > 30 and {"measuring/", "files.py", "statistics/"} <= units  # the scans see something
    bad = problems(rows, units, _layers())
    assert not bad, "docs/layout.md's table disagrees with the code: " + "; ".join(bad)


LAYERS_PLANTED = [{"cli"}, {"measuring", "jobs"}, {"errors", "statistics"}]
UNITS_PLANTED = {"cli/", "measuring/", "jobs/", "errors.py", "statistics/"}
TABLE_PLANTED = f"""# Layout

{HEADER}
|:--|:--|:--|:--|
| `cli/` | The command. | 1 | its layer (`cli/`) and {EVERY_ROW_BELOW} |
| `measuring/` | Timing. | 2 | its layer (`measuring/`, `jobs/`); {LEAF_MODULES} |
| `jobs/` | Children. | 2 | its layer (`measuring/`, `jobs/`); {LEAF_MODULES} |
| `errors.py` | Errors. | 3 | the other leaf modules |
| `statistics/` | Figures. | 3 | the other leaf modules |

## After the table
"""


def test_the_planted_table_passes_as_written():
    assert problems(table(TABLE_PLANTED), UNITS_PLANTED, LAYERS_PLANTED) == []


@pytest.mark.parametrize("edit, found", [
    (("| `jobs/` | Children. | 2 | its layer (`measuring/`, `jobs/`); the leaf modules |\n", ""), ["jobs/: no row"]),
    (("`errors.py` | Errors. | 3", "`exitcodes.py` | Errors. | 3"),
     ["errors.py: no row", "exitcodes.py: a row, but fabricbench/exitcodes.py does not exist"]),
    (("`statistics/` | Figures. | 3", "`statistics/` | Figures. | 2"),
     ["statistics/: layer 2, but LAYERS puts it in layer 3"]),
    (("`measuring/` | Timing. | 2 | its layer", "`measuring/` | Timing. | 2 | `cli/`; its layer"),
     ["measuring/: may import cli/, which is in layer 1"]),
    (("| 2 | its layer (`measuring/`, `jobs/`); the leaf modules |\n| `errors.py`",
      "| 2 | `jobs/`; the leaf modules |\n| `errors.py`"), ["jobs/: may import measuring/, which its cell leaves out"]),
])
def test_a_planted_drift_fails(edit, found):
    old, new = edit
    assert old in TABLE_PLANTED
    assert problems(table(TABLE_PLANTED.replace(old, new, 1)), UNITS_PLANTED, LAYERS_PLANTED) == found


def test_a_row_the_table_cannot_read_fails():
    with pytest.raises(AssertionError, match="twice"):
        table(TABLE_PLANTED.replace("| `jobs/` | Children.", "| `measuring/` | Children."))
    with pytest.raises(AssertionError, match="is not a"):
        table(TABLE_PLANTED.replace("| 3 | the other leaf modules |", "| three | the other leaf modules |", 1))


def test_layers_are_read_from_the_source():
    assert layers_of('X = 1\nLAYERS = [\n    {"cli"},  # top\n    {"errors"},\n]\n') == [{"cli"}, {"errors"}]
    assert levels(_layers())["cli"] == 1 and levels(_layers())["statistics"] == len(_layers())
