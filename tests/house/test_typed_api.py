"""A user's editor sees fabricbench's real types. `fabricbench/__init__.py` serves every public name lazily
(its module `__getattr__`, so that `import fabricbench` stays light), which a type checker reads as `Any`;
the `if TYPE_CHECKING:` imports there name each of them for it instead, and this file checks the two lists
agree. Then a typed user's scripts (tests/typed_user/, one per group of verbs, never run) pass
`mypy --strict` against the installed package, no public name is Any to mypy (reveal_type of each), and
docs/library.md's examples type-check but for the config fields listed in DOC_MISMATCHES.

    python3 -m pytest -q -p no:xdist tests/house/test_typed_api.py            # the lists agree (fast)
    python3 -m pytest -q -p no:xdist -m slow tests/house/test_typed_api.py    # mypy --strict (a minute)
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import site
import subprocess
import sys
from pathlib import Path

import pytest
from roots import ROOT, TESTS

INIT = ROOT / "fabricbench" / "__init__.py"
TYPED_USER = TESTS / "typed_user"


def lazy_names(source: str) -> dict[str, str]:
    """_LAZY's name -> module, read from the file's text (its `**{...}` groups included)."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_LAZY" for t in node.targets):
            return eval(compile(ast.Expression(node.value), str(INIT), "eval"), {})  # noqa: S307 - our own file
    raise AssertionError("fabricbench/__init__.py has no _LAZY")


def checked_names(source: str) -> dict[str, str]:
    """name -> module of every `from MODULE import NAME as NAME` under the file's `if TYPE_CHECKING:`; a name
    imported without its `as NAME` is listed as 'NAME (no "as NAME": mypy --strict does not export it)'."""
    found: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in ast.walk(node):
                if isinstance(imp, ast.ImportFrom) and imp.module:
                    for a in imp.names:
                        key = a.name if a.asname == a.name else f'{a.name} (no "as {a.name}": not exported)'
                        found[key] = imp.module
    return found


def differences(source: str) -> list[str]:
    lazy, checked = lazy_names(source), checked_names(source)
    out = [f"add under `if TYPE_CHECKING:`  from {mod} import {name} as {name}"
           for name, mod in sorted(lazy.items()) if checked.get(name) != mod]
    out += [f"not in _LAZY (or from another module there): from {mod} import {name}"
            for name, mod in sorted(checked.items()) if lazy.get(name) != mod]
    return out


def test_the_type_checking_imports_name_every_lazy_name_from_its_module():
    assert differences(INIT.read_text()) == []


def test_the_check_sees_a_difference():
    source = INIT.read_text()
    assert differences(source + '\nif TYPE_CHECKING:\n    from fabricbench.errors import Stray as Stray\n') == [
        "not in _LAZY (or from another module there): from fabricbench.errors import Stray"]
    moved = source.replace('"measure": "fabricbench.measuring.api"', '"measure": "fabricbench.measuring.other"')
    assert moved != source and differences(moved) == [
        "add under `if TYPE_CHECKING:`  from fabricbench.measuring.other import measure as measure",
        "not in _LAZY (or from another module there): from fabricbench.measuring.api import measure"]
    bare = re.sub(r"\bUsageError as UsageError\b", "UsageError", source)
    assert bare != source and differences(bare)[0].startswith("add under `if TYPE_CHECKING:`  from fabricbench.errors")


MYPY = importlib.util.find_spec("mypy") is not None
needs_mypy = pytest.mark.skipif(not MYPY, reason="mypy is not installed (pip install -e '.[test]' brings it)")


# fabricbench's own findings stay out (silent), as mypy keeps an installed package's out; the training
# libraries are not read at all: no public type names them, and reading torch takes mypy minutes
MYPY_INI = """[mypy]
follow_imports = silent

[mypy-torch.*,transformers.*,accelerate.*,deepspeed.*,matplotlib.*]
follow_imports = skip
"""


def _mypy(files: list[Path], cache: Path) -> subprocess.CompletedProcess:
    """`mypy --strict` over a user's files, as it checks them against the fabricbench this Python imports.
    An editable install is an import hook mypy cannot follow: its folder goes on MYPYPATH instead."""
    package = Path(importlib.util.find_spec("fabricbench").origin).parent.parent
    env = dict(os.environ)
    if str(package) not in site.getsitepackages():
        env["MYPYPATH"] = str(package)
    config = cache.parent / "mypy.ini"
    config.write_text(MYPY_INI)
    cmd = [sys.executable, "-m", "mypy", "--strict", "--config-file", str(config), "--no-error-summary",
           "--show-error-codes", "--cache-dir", str(cache), *map(str, files)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cache.parent, timeout=900)


def _probe(path: Path) -> Path:
    """reveal_type of every public name: mypy notes the type it sees for each, line by line."""
    names = sorted(lazy_names(INIT.read_text()))
    path.write_text("import fabricbench\n" + "".join(f"reveal_type(fabricbench.{name})\n" for name in names))
    return path


def seen_as_any(output: str, probe: Path) -> list[str]:
    """The probe's lines whose revealed type is Any; every line must have been revealed once."""
    seen = re.findall(rf"^(?:.*/)?{re.escape(probe.name)}:(\d+): note: Revealed type is \"(.*)\"$", output, re.M)
    lines = probe.read_text().splitlines()
    assert len(seen) == len(lines) - 1, output
    return [lines[int(n) - 1] for n, shown in seen if shown == "Any"]


def user_scripts() -> list[Path]:
    return sorted(TYPED_USER.glob("*.py"))


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """One mypy cache for this file's runs: the first reads fabricbench (half a minute), the next reuse it."""
    return tmp_path_factory.mktemp("mypy") / "cache"


@needs_mypy
@pytest.mark.slow
def test_a_typed_users_scripts_pass_mypy_strict_and_see_no_any(tmp_path, cache):
    probe = _probe(tmp_path / "probe.py")
    r = _mypy([*user_scripts(), probe], cache)
    errors = [ln for ln in r.stdout.splitlines() if ": note: Revealed type is" not in ln]
    assert r.returncode == 0 and errors == [], r.stdout + r.stderr
    assert seen_as_any(r.stdout, probe) == []

    # the same check fails where the package's types are wrong for a user, and sees an Any where there is one
    wrong = tmp_path / "wrong" / "measure_user.py"
    wrong.parent.mkdir()
    wrong.write_text((TYPED_USER / "measure_user.py").read_text().replace("r.algbw_gbps", "r.algbw_gbs"))
    anyprobe = tmp_path / "wrong" / "anyprobe.py"
    anyprobe.write_text("import json\nreveal_type(json.loads('1'))\nreveal_type(json.dumps)\n")
    r = _mypy([wrong, anyprobe], cache)
    assert r.returncode == 1
    assert re.search(r"measure_user\.py:\d+: error: \"CollectiveResult\" has no attribute \"algbw_gbs\"", r.stdout)
    assert seen_as_any(r.stdout, anyprobe) == ["reveal_type(json.loads('1'))"]


# docs/library.md writes what a config accepts (sizes="1M-1G:x4", ops=[...], gpus="0-7": __post_init__ converts
# it) where the field declares what it holds afterwards (SizeSweep, tuple[str, ...]), and mypy refuses the call.
# Listed until each field declares what it accepts: a mismatch not listed fails, and a fixed one asks to go.
DOC_MISMATCHES = {
    'Argument "gpus" to "SweepConfig" has incompatible type "list[int]"; expected "tuple[int, ...] | None"',
    'Argument "gpus" to "SweepConfig" has incompatible type "str"; expected "tuple[int, ...] | None"',
    'Argument "ops" to "SweepConfig" has incompatible type "list[str]"; expected "tuple[str, ...]"',
    'Argument "ops" to "SweepConfig" has incompatible type "str"; expected "tuple[str, ...]"',
    'Argument "sizes" to "SweepConfig" has incompatible type "str"; expected "SizeSweep"',
    'Argument "counts" to "ScalingConfig" has incompatible type "str"; expected "tuple[int, ...] | None"',
    'Argument "size" to "P2PConfig" has incompatible type "str"; expected "int"',
    'Argument "fabrics" to "StudyConfig" has incompatible type "str"; expected "tuple[str, ...]"',
    'Argument "strategies" to "StudyConfig" has incompatible type "str"; expected "tuple[str, ...]"',
    'Argument "inputs" to "RelateConfig" has incompatible type "list[str]"; expected "tuple[Any, ...]"',
    'Argument "files" to "ImportConfig" has incompatible type "list[str]"; expected "tuple[str, ...]"',
}


@needs_mypy
@pytest.mark.slow
def test_the_library_page_type_checks_but_for_the_listed_config_fields(tmp_path, cache):
    from test_docs_library import PAGE, blocks

    files = []
    for block in blocks(PAGE.read_text()):  # every tier: a type checker needs no GPU
        files.append(tmp_path / f"library_L{block.line}.py")
        files[-1].write_text(block.code)
    r = _mypy(files, cache)
    found = {m.group(1) for m in re.finditer(r"^\S+:\d+: error: (.*?)  \[[a-z-]+\]$", r.stdout, re.M)}
    assert r.returncode in (0, 1) and r.stderr == "", r.stderr
    assert found - DOC_MISMATCHES == set(), r.stdout  # a new one: the page, or the config, is wrong for a typed user
    assert DOC_MISMATCHES - found == set()  # fixed: take it off the list


def test_the_scripts_are_not_tests():
    # pytest collects test_*.py and *_test.py: these are a user's scripts, checked by mypy and never run
    assert user_scripts() and not [p.name for p in user_scripts() if p.name.startswith("test_")
                                   or p.stem.endswith("_test")]


def test_the_scripts_call_every_verb():
    # a verb (a public function) added to _LAZY gets a typed use in tests/typed_user/ (its README says how)
    called = set(re.findall(r"\bfabricbench\.(\w+)\(", "".join(p.read_text() for p in user_scripts())))
    verbs = {n for n in lazy_names(INIT.read_text()) if n[:1].islower()}
    assert verbs - called == set()
