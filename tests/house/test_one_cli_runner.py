"""Tests run the CLI one way: through tests/clirun.py, never through a copy of their own.

    python3 -m pytest -q -p no:xdist tests/house/test_one_cli_runner.py

A test file that calls fabricbench.cli.main itself (and catches its SystemExit), drives click's group past
fabricbench's entry (`cli.main(...)`), wraps click's CliRunner, or runs `python -m fabricbench` to its end
with subprocess.run grows its own idea of the exit status and of what stderr holds; when the entry changes
(how it maps an error to a status, what it prints) such a copy goes on passing on the old behaviour. Every
test file under tests/ is read with ast; tests/clirun.py alone may do these. A process the test must hold
while it runs (subprocess.Popen: a signal sent, a pipe closed, a terminal) and a command inside a fresh
interpreter's code string (what `--help` imports, a torchrun launch) are not this process's runner.
"""

from __future__ import annotations

import ast

from roots import TESTS

RUNNER = TESTS / "clirun.py"


def _bound_names(tree: ast.AST) -> tuple[set[str], set[str], set[str]]:
    """The local names of fabricbench.cli.main, of the fabricbench.cli module, and of its click group."""
    mains, modules, groups = set(), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "fabricbench.cli":
            mains |= {a.asname or a.name for a in node.names if a.name == "main"}
            groups |= {a.asname or a.name for a in node.names if a.name == "cli"}
        elif isinstance(node, ast.ImportFrom) and node.module == "fabricbench":
            modules |= {a.asname or a.name for a in node.names if a.name == "cli"}
        elif isinstance(node, ast.Import):
            modules |= {a.asname for a in node.names if a.name == "fabricbench.cli" and a.asname}
    return mains, modules, groups


def _runs_fabricbench(call: ast.Call) -> bool:
    """subprocess.run (or check_output, check_call, call) of a list literal holding `-m fabricbench`."""
    f = call.func
    if not (isinstance(f, ast.Attribute) and f.attr in ("run", "check_output", "check_call", "call")
            and ast.unparse(f.value) == "subprocess" and call.args and isinstance(call.args[0], ast.List)):
        return False
    words = [e.value if isinstance(e, ast.Constant) else None for e in call.args[0].elts]
    return any(words[i:i + 2] == ["-m", "fabricbench"] for i in range(len(words)))


def offences(source: str) -> list[str]:
    """'line N: what' for each way `source` runs the CLI other than through tests/clirun.py."""
    tree = ast.parse(source)
    mains, modules, groups = _bound_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "click.testing":
            found.append((node.lineno, "imports click.testing"))
        elif isinstance(node, (ast.Name, ast.Attribute)) and "CliRunner" in (getattr(node, "id", None),
                                                                             getattr(node, "attr", None)):
            found.append((node.lineno, "uses click's CliRunner"))
        elif isinstance(node, ast.Call):
            f = node.func
            if _runs_fabricbench(node):
                found.append((node.lineno, "runs python -m fabricbench with subprocess.run"))
            elif isinstance(f, ast.Name) and f.id in mains:
                found.append((node.lineno, "calls fabricbench.cli.main"))
            elif isinstance(f, ast.Attribute) and f.attr == "main":
                owner = ast.unparse(f.value)
                if owner in modules or owner == "fabricbench.cli":
                    found.append((node.lineno, "calls fabricbench.cli.main"))
                elif owner in groups:
                    found.append((node.lineno, "calls click's group main past fabricbench's entry"))
    return [f"line {n}: {what}" for n, what in sorted(set(found))]


def test_the_scan_finds_each_way_of_running_the_cli_by_hand():
    planted = {
        "from fabricbench.cli import main\ntry:\n    main(['sweep'])\nexcept SystemExit:\n    pass\n":
            "calls fabricbench.cli.main",
        "def f():\n    from fabricbench.cli import main as fb\n    fb(['topo'])\n": "calls fabricbench.cli.main",
        "import fabricbench.cli as c\nc.main(['x'])\n": "calls fabricbench.cli.main",
        "import fabricbench.cli\nfabricbench.cli.main(['x'])\n": "calls fabricbench.cli.main",
        "from fabricbench import cli\ncli.main(['x'])\n": "calls fabricbench.cli.main",
        "from fabricbench.cli import cli\ncli.main(['study'])\n": "calls click's group main",
        "from click.testing import CliRunner\ndef run(a):\n    return CliRunner().invoke(a)\n": "CliRunner",
        "import click.testing\nr = click.testing.CliRunner()\n": "CliRunner",
        "import subprocess, sys\ndef _fb(*a):\n    return subprocess.run([sys.executable, '-m', 'fabricbench', *a])\n":
            "runs python -m fabricbench",
    }
    for source, what in planted.items():
        said = offences(source)
        assert said and any(what in s for s in said), (source, said)
    clean = ("from clirun import refused, run_cli\nfrom fabricbench.cli import COMMANDS, cli\n"
             "def test(capsys):\n    assert cli.get_command(None, 'sweep') and refused(['x'], capsys)\n"
             "code = \"from fabricbench.cli import main\\nmain(['--help'])\"\n"
             "import subprocess, sys\np = subprocess.Popen([sys.executable, '-m', 'fabricbench', 'hang'])\n"
             "subprocess.run([sys.executable, '-m', 'torch.distributed.run', 'x.py'])\n")
    assert offences(clean) == []


def test_no_test_file_runs_the_cli_but_through_clirun():
    found = [f"{path.relative_to(TESTS)} {said}" for path in sorted(TESTS.rglob("*.py"))
             if path != RUNNER and "__pycache__" not in path.parts
             for said in offences(path.read_text())]
    assert not found, "run the CLI through tests/clirun.py (run_cli, run_cli_captured, run_cli_subprocess, " \
                      "refused):\n" + "\n".join(found)


def test_clirun_is_where_the_cli_is_run():
    # the scan sees the one runner it exempts: a scan that found nothing anywhere would pass the test above
    said = " ".join(offences(RUNNER.read_text()))
    assert "calls fabricbench.cli.main" in said and "runs python -m fabricbench" in said, said
