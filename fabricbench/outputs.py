"""The one way fabricbench opens an output: never through a symbolic link it did not make.

    fabricbench study --out st/      (results, unit logs, reports, .unreadable, JUnit, exports: all open here)

A results folder may hold links that someone else planted (`st/units/x.log` pointing at /etc/shadow, a
dangling `results.jsonl` pointing outside the folder), and a run as root would write through them. So every
output is opened here: its folder once (O_DIRECTORY), then each name below it relative to that descriptor
(openat) with O_NOFOLLOW, so that neither a link at the final name nor one swapped in for a folder mid-run
can redirect a write. Folders of the user's own path above the output (or above `under=`, the output folder
a command writes into) are the user's words and are followed; everything fabricbench writes below them is
not. A link where an output goes is a UsageError (one line, exit 2), as is an output that cannot be opened
(read-only folder); a write that fails after opening is the caller's OutputError (exit 1).
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import stat
from pathlib import Path
from typing import IO, Any

from fabricbench.errors import FabricbenchError, UsageError

_MODES = {
    "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "wb": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND, "ab": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
    "r+b": os.O_RDWR, "rb": os.O_RDONLY,
}
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
_DIR = os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW


class OutputError(FabricbenchError):
    """An output could not be written (full disk, read-only file). What was written before is kept."""


class OutputRefused(UsageError):
    """An output cannot be opened where it goes: a link there, a read-only folder, a FIFO. Exit 2 like any
    bad input; a command that runs many parts (a study's units) stops on it rather than recording each
    part as failed."""


def _link_error(what: str, path: Path) -> UsageError:
    return OutputRefused(f"{what} {path}: is a symbolic link, and fabricbench writes only through paths it "
                      f"made; remove the link or give the real path")


def _open_error(what: str, path: Path, e: OSError) -> UsageError:
    return OutputRefused(f"{what} {path}: cannot write there ({e.strerror}); choose a writable path")


class Folder:
    """An output folder held open by its descriptor; every name below it is opened through that descriptor
    without following a link. Use as a context manager (the descriptor is closed on exit)."""

    def __init__(self, fd: int, path: Path, what: str) -> None:
        self.fd, self.path, self.what = fd, path, what

    def __enter__(self) -> "Folder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)

    def lstat(self, name: str) -> os.stat_result | None:
        """The entry `name` itself (a link is not followed); None when there is none."""
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def folder(self, rel: str | os.PathLike, *, create: bool = True) -> "Folder":
        """The folder `rel` below this one (each part created if absent and `create`), opened part by part
        without following a link."""
        fd, here = os.dup(self.fd), self.path
        try:
            for part in Path(rel).parts:
                here = here / part
                if create:
                    try:
                        os.mkdir(part, 0o777, dir_fd=fd)
                    except FileExistsError:
                        pass
                nxt = self._openat(part, _DIR, 0, fd, here)
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return Folder(fd, here, self.what)

    def open(self, name: str, mode: str = "w", *, perm: int = 0o644, encoding: str = "utf-8",
             newline: str | None = None) -> IO[Any]:
        """A file object on `name` in this folder (mode w, a, wb, ab, r+b or rb). A FIFO or socket there is
        refused (open would block); a device such as /dev/null is the user's choice and allowed."""
        if mode not in _MODES and mode.rstrip("t") not in _MODES:
            raise AssertionError(f"outputs: mode {mode!r} is not one of {sorted(_MODES)}")
        flags = _MODES[mode.rstrip("t")]
        fd = self._openat(name, flags | _NOFOLLOW | os.O_NONBLOCK, perm, self.fd, self.path / name)
        try:
            st = os.fstat(fd)
            if stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode):
                raise OutputRefused(f"{self.what} {self.path / name}: is a FIFO or socket; give a regular file")
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
            if "b" in mode:
                return os.fdopen(fd, mode)
            return os.fdopen(fd, mode.rstrip("t"), encoding=encoding, newline=newline)
        except BaseException:
            os.close(fd)
            raise

    def write_atomic(self, name: str, data: str | bytes, *, perm: int | None = None) -> Path:
        """`data` written to a temporary file here and renamed over `name`: a reader sees the old file or
        the new one, never half. `perm` None keeps the mode of the file replaced (0o644 for a new one). A
        failed write leaves the old file as it was and raises OutputError."""
        path = self.path / name
        old = self.lstat(name)
        if old is not None and stat.S_ISLNK(old.st_mode):
            raise _link_error(self.what, path)
        if old is not None and not stat.S_ISREG(old.st_mode):  # a rename would replace a device or FIFO
            raise OutputError(f"{self.what} {path}: exists and is not a regular file (a device, FIFO or "
                              f"folder); give a file path")
        mode = perm if perm is not None else stat.S_IMODE(old.st_mode) if old is not None else 0o644
        tmp = f".{name}.{secrets.token_hex(4)}.tmp"
        fd = self._openat(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600, self.fd, path)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data.encode("utf-8") if isinstance(data, str) else data)
                fh.flush()
                os.fsync(fh.fileno())
                os.fchmod(fh.fileno(), mode)
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except OSError as e:
            try:
                os.unlink(tmp, dir_fd=self.fd)
            except OSError:
                pass
            raise OutputError(f"{self.what} {path}: write failed ({e.strerror}); {path} was left as it "
                              f"was") from None
        return path

    def unlink(self, name: str) -> None:
        """Remove `name` (a link itself, never its target); nothing when it is not there."""
        try:
            os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise OutputRefused(f"{self.what} {self.path / name}: cannot remove it ({e.strerror}); make "
                                f"{self.path} writable or remove it by hand") from None

    def _openat(self, name: str, flags: int, perm: int, dir_fd: int | None, path: Path) -> int:
        try:
            return os.open(name, flags, perm, dir_fd=dir_fd)
        except OSError as e:
            try:
                link = stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
            except OSError:
                link = False
            if link or e.errno == errno.ELOOP:
                raise _link_error(self.what, path) from None
            if e.errno == errno.ENXIO:  # O_NONBLOCK on a FIFO that has no reader
                raise OutputRefused(f"{self.what} {path}: is a FIFO or socket; give a regular file") from None
            raise _open_error(self.what, path, e) from None


def folder(path: str | os.PathLike, *, what: str = "output", create: bool = True, follow: bool = False,
           shown: Path | None = None) -> Folder:
    """The folder `path` opened once (created with its parents if absent and `create`). Its own last
    part is refused if it is a link unless `follow`: a folder the user named as an output (study --out)
    must not be a link; the folder above an output file (`follow=True`) is the user's path, followed.
    `shown` is the output a message names when the folder cannot be made (the file to be written in it)."""
    p = Path(path)
    if create:
        try:
            p.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            pass  # a file or a link there: the open below says which
        except OSError as e:
            raise _open_error(what, shown or p, e) from None
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    return Folder(Folder(-1, p, what)._openat(str(p), flags, 0, None, p), p, what)


def _split(path: str | os.PathLike, under: str | os.PathLike | None, what: str) -> tuple[Folder, str]:
    """The folder that holds `path`, opened (below `under` part by part, no link followed), and the last
    part's name."""
    p = Path(path)
    if under is None:
        return folder(p.parent, what=what, follow=True, shown=p), p.name
    base = Path(under)
    rel = Path(os.path.relpath(p, base))
    assert rel.parts and ".." not in rel.parts and not rel.is_absolute(), f"{p} is not below {base}"
    top = folder(base, what=what)
    if not rel.parent.parts:
        return top, rel.name
    with top:
        return top.folder(rel.parent), rel.name


ENV_ROOT = "FABRICBENCH_OUTPUT_ROOT"  # an output folder a parent writes into (a study's): its children's too


def inherited_root(path: str | os.PathLike) -> str | None:
    """The output folder a parent named in the environment (ENV_ROOT), where `path` lies below it: a child
    that writes into a study's units/ then opens every part below the study's folder without following a
    link, as the study itself does. None where no root is named or `path` is elsewhere."""
    root = os.environ.get(ENV_ROOT)
    if not root:
        return None
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    return root if rel != "." and not rel.startswith("..") else None


def open_output(path: str | os.PathLike, mode: str = "w", *, what: str = "output",
                under: str | os.PathLike | None = None, perm: int = 0o644, encoding: str = "utf-8",
                newline: str | None = None) -> IO[Any]:
    """A file object on the output `path` (mode w, a, wb, ab, r+b or rb), its folders created, never
    opened through a link: not at its last part, nor at any part below `under` (the output folder a
    command writes into)."""
    d, name = _split(path, under, what)
    with d:
        return d.open(name, mode, perm=perm, encoding=encoding, newline=newline)


def write_atomic(path: str | os.PathLike, data: str | bytes, *, what: str = "output",
                 under: str | os.PathLike | None = None, perm: int | None = None) -> Path:
    """`data` written to `path` through a temporary file renamed into place (Folder.write_atomic), no
    link followed as in open_output."""
    d, name = _split(path, under, what)
    with d:
        d.write_atomic(name, data, perm=perm)
    return Path(path)


def refuse_link(path: str | os.PathLike, *, what: str = "output") -> None:
    """UsageError when `path` itself is a symbolic link: for outputs checked before anything runs."""
    if os.path.islink(path):
        raise _link_error(what, Path(path))
