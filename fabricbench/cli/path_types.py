"""The path option types: inputs that must exist and be of the right kind, outputs that must be absent
or of the kind wanted (fabricbench/cli/types.py names them with the other option types).

    fabricbench sweep --out run.jsonl          (OutputFile: absent, or a regular file)
    fabricbench study --out run/               (OutputFolder: absent, or a folder)
    fabricbench relate a.jsonl b.jsonl         (InputPath: existing regular files, under the input cap)

A path is looked at with stat(), never open(), which blocks on a FIFO; a folder, FIFO, device or socket
where a file is wanted (or the reverse) is refused by name before anything runs, as is an output that
cannot be written (a path under a file, /proc, a read-only folder: files.unwritable).
"""

from __future__ import annotations

import os
import stat

from fabricbench.cli.option_type import OptionType
from fabricbench.files import check_input, missing, unwritable


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


class PathType(OptionType):
    """What every path shares: one line of text, and stat() (never open(), which blocks on a FIFO)."""

    def stat(self, path: str, param, ctx) -> os.stat_result | None:
        try:
            return os.stat(path)
        except FileNotFoundError:
            return None
        except NotADirectoryError:
            self.fail(f"{path}: a part of the path is a file, not a folder", param, ctx)
        except OSError as e:
            self.fail(f"{path}: cannot use it ({e.strerror})", param, ctx)

    def writable(self, path: str, param, ctx, *, folder: bool) -> None:
        """An output that cannot be written is refused now, not after the run it would have kept."""
        why = unwritable(path, folder=folder)
        if why is not None:
            self.fail(f"{path}: {why}; choose a writable path", param, ctx)


class InputPath(PathType):
    """An existing regular file (`folder`: or a folder; `folder_only`: a folder), readable, under the
    input size cap (files.check_input)."""

    name = "input"
    kind = "input file"

    def __init__(self, *, folder: bool = False, folder_only: bool = False) -> None:
        self.folder, self.folder_only = folder or folder_only, folder_only
        self.kind = "input folder" if folder_only else "input file or folder" if folder else "input file"

    def describe(self) -> str:
        return {"input folder": "an existing folder",
                "input file or folder": "an existing regular file or folder (not a FIFO or device)",
                "input file": "an existing regular file (not a folder, FIFO or device), under the input cap"}[
            self.kind]

    def convert(self, value, param, ctx):
        path = self.text(value, param, ctx)
        st = self.stat(path, param, ctx)
        if st is None:
            self.fail(f"{path}: no such folder" if self.folder_only else missing(path), param, ctx)
        if stat.S_ISDIR(st.st_mode):
            if not self.folder:
                self.fail(f"{path}: is a folder; give a file", param, ctx)
            return path
        if self.folder_only:
            self.fail(f"{path}: is {'a file' if stat.S_ISREG(st.st_mode) else _kind_of(st.st_mode)}; "
                      f"give a folder", param, ctx)
        self.library(lambda: check_input(path, what=""), param, ctx)
        return path


class OutputFile(PathType):
    """A file to write: absent (it is created) or a regular file; a folder, FIFO, device or socket is
    refused before anything runs, as is a path under a file."""

    name = "file"
    kind = "output file"

    def describe(self) -> str:
        return "a file to write: new, or a regular file (not a folder, FIFO or device)"

    def convert(self, value, param, ctx):
        path = self.text(value, param, ctx)
        st = self.stat(path, param, ctx)
        if st is not None and not stat.S_ISREG(st.st_mode):
            self.fail(f"{path}: is {_kind_of(st.st_mode)}; give a file name", param, ctx)
        self.writable(path, param, ctx, folder=False)
        return path


class OutputFolder(PathType):
    """A folder to write into: absent (it is created) or a folder; a file, FIFO or device is refused."""

    name = "folder"
    kind = "output folder"

    def describe(self) -> str:
        return "a folder to write into: new, or an existing folder (not a file, FIFO or device)"

    def convert(self, value, param, ctx):
        path = self.text(value, param, ctx)
        st = self.stat(path, param, ctx)
        if st is not None and not stat.S_ISDIR(st.st_mode):
            what = "a file" if stat.S_ISREG(st.st_mode) else _kind_of(st.st_mode)
            self.fail(f"{path}: is {what}; give a folder", param, ctx)
        self.writable(path, param, ctx, folder=True)
        return path
