"""Files from users and files for users: the one place that opens an input or writes an output.

    fabricbench relate results.jsonl          (every reader opens its file through `open_input`)

Inputs come from many machines, half-written runs and hand edits. Before anything is opened, a path that
is missing, not a regular file (a FIFO would block open() forever, /dev/zero would never end) or larger
than a cap is refused with one line that says what to do. Outputs are written so that a full disk or a
read-only file gives one line (OutputError, exit 1), and JSON outputs never hold NaN or Infinity.
"""

from __future__ import annotations

import json
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, TextIO

from fabricbench.errors import UsageError
from fabricbench.outputs import OutputError, open_output, refuse_link, write_atomic  # noqa: F401 (the writers' names)
from fabricbench.sizes import parse_size

# A results file of a 12,500-host fleet (12 records each) is ~150 MB; a spec or a log is far smaller.
MAX_INPUT_BYTES = 4 * 1024**3
ENV_MAX = "FABRICBENCH_MAX_INPUT_BYTES"  # raises the cap for every reader without a flag per command


def max_input_bytes() -> int:
    raw = os.environ.get(ENV_MAX)
    if raw is None:
        return MAX_INPUT_BYTES
    try:
        value = int(raw)
    except ValueError:
        raise UsageError(f"{ENV_MAX}={raw!r} is not a whole number of bytes") from None
    if value <= 0:
        raise UsageError(f"{ENV_MAX}={raw!r} must be positive")
    return value


def set_max_input_bytes(size: str | int) -> int:
    """Raise (or lower) the input cap for this process and its children (`fabricbench --max-input-size`).
    It travels in the environment because readers also run in child processes (study units, qualify)."""
    value = size if isinstance(size, int) else parse_size(str(size))
    if value <= 0:
        raise UsageError(f"max input size {size!r} must be positive")
    os.environ[ENV_MAX] = str(value)
    return value


def missing(path: str | os.PathLike) -> str:
    """What an input that is not there is called. "-", where no file has that name, is the shell's spelling
    of standard input: a stream, refused as a FIFO is, and said so rather than "no such file"."""
    if str(path) == "-":
        return "-: standard input is not read; give a regular file (copy the stream to a file first)"
    return f"{path}: no such file"


def check_input(path: str | os.PathLike, *, what: str = "input", max_bytes: int | None = None) -> Path:
    """The path, if it names a readable regular file under the size cap; else UsageError (one line).

    stat() never blocks, unlike open() on a FIFO, so special files are refused before they are opened.
    """
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise UsageError(f"{what} {missing(path)}") from None
    except OSError as e:
        raise UsageError(f"{what} {p}: cannot read it ({e.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{what} {p}: is a directory; give a file")
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode)
                or stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise UsageError(f"{what} {p}: is {kind}; give a regular file (copy the stream to a file first)")
    cap = max_input_bytes() if max_bytes is None else max_bytes
    if st.st_size > cap:
        raise UsageError(f"{what} {p}: {st.st_size:,} bytes is over the {cap:,}-byte cap; "
                         f"if the file is right, raise the cap (fabricbench --max-input-size SIZE, or {ENV_MAX})")
    if not os.access(p, os.R_OK):
        raise UsageError(f"{what} {p}: not readable (permissions)")
    return p


def check_output(path: str | os.PathLike, *, what: str = "output") -> Path:
    """The path, unless it names something an output cannot be written to without harm: a folder, a FIFO
    (open() would block until a reader comes), a socket. /dev/null and /dev/full are allowed: writing
    there is the user's choice, and a full disk gives OutputError like any other."""
    p = Path(path)
    refuse_link(p, what=what)  # a link is never written through (outputs.py), dangling or not
    try:
        st = p.stat()
    except OSError:
        return p  # not there yet: the writer creates it or says why not
    if stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{what} {p}: is a directory; give a file name")
    if stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode):
        raise UsageError(f"{what} {p}: is a FIFO or socket; give a regular file")
    return p


def unwritable(path: str | os.PathLike, *, folder: bool = False) -> str | None:
    """Why an output cannot be written at `path`, found before anything runs (None: it can, as far as can
    be known before writing): a part of the path that is a file, a folder that refuses a new file (read-only,
    /proc, /sys), a file that refuses writing. The folder is tried with a file created and removed at once:
    permissions alone say nothing for root, and /proc's mode would say yes."""
    p = Path(path)
    if str(path) == "-" and not p.exists():  # a shell's standard output: never a file named "-" made unasked
        return "'-' is standard output to a shell, which fabricbench does not write its results to"
    if p.is_symlink():
        return f"{p} is a symbolic link, which fabricbench does not write through (only through paths it made)"
    if p.exists() and p.is_dir() != folder:  # the library's callers have no click type to say it first
        return f"{p} is a {'folder' if p.is_dir() else 'file'}; give a {'folder' if folder else 'file name'}"
    if not folder and p.is_file() and not os.access(p, os.W_OK):
        return f"{p} is not writable (permissions or a read-only file system)"
    where = p if folder and p.is_dir() else p.parent
    while not where.exists():  # the nearest folder that is there: the writer creates the rest
        if where == where.parent:
            break
        where = where.parent
    if where.exists() and not where.is_dir():
        return f"{where} is a file, not a folder"
    try:
        fd, probe = tempfile.mkstemp(prefix=".fabricbench-probe-", dir=where)
    except OSError as e:
        return f"cannot write there ({where}: {e.strerror})"
    os.close(fd)
    try:
        os.unlink(probe)
    except OSError:
        pass
    return None


def check_writable(path: str | os.PathLike, *, what: str = "output", folder: bool = False) -> Path:
    """The path, or UsageError (one line, exit 2) when an output cannot be written there (see unwritable)."""
    why = unwritable(path, folder=folder)
    if why is not None:
        raise UsageError(f"{what} {path}: {why}; choose a writable path")
    return Path(path)


def open_input(path: str | os.PathLike, *, what: str = "input", max_bytes: int | None = None) -> TextIO:
    """A text handle on a checked input; bytes that are not UTF-8 become U+FFFD, never an exception."""
    p = check_input(path, what=what, max_bytes=max_bytes)
    try:
        return open(p, encoding="utf-8", errors="replace", newline=None)
    except OSError as e:
        raise UsageError(f"{what} {p}: cannot read it ({e.strerror})") from None


def read_input(path: str | os.PathLike, *, what: str = "input", max_bytes: int | None = None) -> str:
    with open_input(path, what=what, max_bytes=max_bytes) as fh:
        return fh.read()


def json_safe(value: Any) -> Any:
    """The value with every non-finite float replaced by None (JSON has no NaN or Infinity)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def nonfinite_paths(value: Any, where: str = "") -> list[str]:
    """Where json_safe would write null for a non-finite float ("rows[2].residual"), for the note beside it."""
    if isinstance(value, float):
        return [] if math.isfinite(value) else [where or "value"]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in nonfinite_paths(v, f"{where}.{k}" if where else str(k))]
    if isinstance(value, (list, tuple)):
        return [p for i, v in enumerate(value) for p in nonfinite_paths(v, f"{where}[{i}]")]
    return []


def dumps(value: Any, **kw: Any) -> str:
    """json.dumps that cannot write NaN/Infinity (they become null) and never fails on a stray type."""
    return json.dumps(json_safe(value), allow_nan=False, default=str, **kw)


def write_text_atomic(path: str | os.PathLike, text: str, *, what: str = "output",
                      under: str | os.PathLike | None = None) -> Path:
    """Write through a temp file in the same folder and rename it into place (outputs.write_atomic: no
    link followed). A reader (a Prometheus textfile collector, a CI job) sees the old file or the new one,
    never half. A write error leaves the old file as it was and raises OutputError with one line."""
    return write_atomic(path, text, what=what, under=under)


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether two paths name one file (existing or not): for refusing `--out X --csv X` and the like."""
    pa, pb = Path(a), Path(b)
    try:
        if pa.exists() and pb.exists():
            return os.path.samefile(pa, pb)
    except OSError:
        pass
    return pa.resolve() == pb.resolve()


def refuse_collisions(outputs: dict[str, str | os.PathLike | None],
                      inputs: dict[str, str | os.PathLike | None] | None = None) -> None:
    """UsageError when two outputs, or an output and an input, name the same file.

    Keys are what the user calls them (e.g. "--out", "--csv"), so the message names both.
    """
    named = [(k, v) for k, v in outputs.items() if v is not None]
    for i, (ka, va) in enumerate(named):
        for kb, vb in named[i + 1:]:
            if same_file(va, vb):
                raise UsageError(f"{ka} and {kb} both name {va}; give each output its own file")
        for kb, vb in (inputs or {}).items():
            if vb is not None and same_file(va, vb):
                raise UsageError(f"{ka} {va} is also the input {kb}; write the output elsewhere")
