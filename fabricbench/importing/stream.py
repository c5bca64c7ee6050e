"""An input file read in bounded pieces: its lines one at a time, a gzip file inflated as it is read.

    fabricbench import all_reduce.log host-pid42.log.gz --out imported.jsonl

What bounds the memory of an import, whatever the file's size (the constants below):
- a line is read up to LINE_CAP bytes; the rest of a longer line is skipped (no format writes such lines:
  a 10 MB line is garbage, and is read as such);
- a gzip file is inflated in OUT_CHUNK pieces; it is refused while inflating, not after, when what it
  gave passes the size cap (--max-input-size), or passes RATIO_FLOOR bytes at more than MAX_RATIO times
  what was read of it: real logs and JSON compress 5-50×, a bomb of zeros ~1000× (a file that truly
  compresses further is imported once gunzipped, under the plain size cap);
- a whole JSON document (the formats that are one object: nccl-tests -J, DCGM diag, RAS, nvbandwidth -j)
  is held only up to DOC_CAP bytes, and nesting deeper than MAX_DEPTH is refused before it is decoded:
  the deepest real format (DCGM diag) nests 7.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import zlib
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from fabricbench.errors import UsageError
from fabricbench.files import check_input, max_input_bytes

LINE_CAP = 1 << 20  # bytes of one line that are read
OUT_CHUNK = 1 << 20  # bytes inflated per step
MAX_RATIO = 200  # inflated / compressed, checked as it inflates
RATIO_FLOOR = 16 << 20  # below this much inflated, any ratio is allowed (a small file of repeated lines)
DOC_CAP = 16 << 20  # bytes of one JSON document held at once
MAX_DEPTH = 64  # JSON nesting allowed (DCGM diag's is 7, Inspector's 4, RAS's 5, nccl-tests -J's 4)
HEAD = 64 << 10  # bytes a format's sniff reads


class _Inflate(io.RawIOBase):
    """A gzip (or zlib) stream, inflated OUT_CHUNK at a time, refused as soon as it passes a bound."""

    def __init__(self, raw: BinaryIO, path: str):
        self.raw, self.path = raw, path
        self.dec = zlib.decompressobj(wbits=47)  # 32 + 15: gzip or zlib header, told by the bytes
        self.pending = b""  # compressed bytes the inflater has not taken yet
        self.read_in, self.given = 0, 0
        self.cap = max_input_bytes()
        self.eof = False

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        while True:
            tail = self.dec.unconsumed_tail or self.pending
            self.pending = b""
            if not tail and not self.dec.eof:
                tail = self.raw.read(1 << 16)
                self.read_in += len(tail)
                if not tail:
                    raise UsageError(f"{self.path}: a gzip file cut short (it ends before gzip's end-of-stream "
                                     f"marker); check it with gzip -t, or gunzip what there is and import that")
            elif self.dec.eof:
                rest = self.dec.unused_data or self.raw.read(1 << 16)
                if not rest:
                    return 0
                self.read_in += 0 if self.dec.unused_data else len(rest)
                self.dec = zlib.decompressobj(wbits=47)  # a further gzip member (cat a.gz b.gz)
                tail = rest
            try:
                out = self.dec.decompress(tail, min(len(buf), OUT_CHUNK))
            except zlib.error as e:
                raise UsageError(f"{self.path}: a gzip file that cannot be read ({e}); check it with gzip -t") from None
            self._bounded(len(out))
            if out:
                buf[:len(out)] = out
                return len(out)

    def _bounded(self, n: int) -> None:
        self.given += n
        if self.given > self.cap:
            raise UsageError(f"{self.path}: decompresses to over the {self.cap:,}-byte cap; raise it with "
                             f"--max-input-size")
        if self.given > RATIO_FLOOR and self.given > MAX_RATIO * max(self.read_in, 1):
            raise UsageError(f"{self.path}: inflates more than {MAX_RATIO}× ({self.given:,} bytes from "
                             f"{self.read_in:,}), as a gzip bomb does; if it is a real file, gunzip it and "
                             f"import the plain file")


def is_gzip(path: str | os.PathLike) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def open_bytes(path: str | os.PathLike) -> BinaryIO:
    """The file's bytes (inflated where it is gzip), buffered; checked as an input first."""
    check_input(path, what="import")
    try:
        raw = open(path, "rb")
    except OSError as e:
        raise UsageError(f"import {path}: cannot read it ({e.strerror})") from None
    if raw.read(2) != b"\x1f\x8b":
        raw.seek(0)
        return raw
    raw.seek(0)
    return io.BufferedReader(_Inflate(raw, str(path)), buffer_size=1 << 16)


def lines(path: str | os.PathLike, longest: int | None = None,
          on_long: Callable[[int, int], None] | None = None) -> Iterator[tuple[int, str]]:
    """(1-based number, text without its end of line) for each line, at most LINE_CAP bytes each; a line
    over `longest` characters is skipped, and on_long(number, length) told (one generator: this loop is
    most of a large import's time)."""
    limit = LINE_CAP if longest is None else min(longest + 2, LINE_CAP)
    with open_bytes(path) as fh:
        n = 0
        readline = fh.readline
        while True:
            b = readline(LINE_CAP)
            if not b:
                return
            n += 1
            if not b.endswith(b"\n") and len(b) == LINE_CAP:
                while True:  # the rest of an overlong line is skipped, in bounded pieces
                    more = readline(LINE_CAP)
                    if not more or more.endswith(b"\n"):
                        break
            if len(b) > limit and longest is not None:
                line = b.decode("utf-8", errors="replace").rstrip("\r\n")
                if len(line) > longest:
                    if on_long is not None:
                        on_long(n, len(line))
                    continue
                yield n, line
                continue
            yield n, b.decode("utf-8", errors="replace").rstrip("\r\n")


def head(path: str | os.PathLike, size: int = HEAD) -> str:
    """The first `size` bytes as text (inflated), for sniffing."""
    with open_bytes(path) as fh:
        return fh.read(size).decode("utf-8", errors="replace")


def chunks(path: str | os.PathLike, size: int = 1 << 20) -> Iterator[str]:
    """The text in pieces of about `size` bytes that end at a line's end (for sniffing past the head)."""
    carry = b""
    with open_bytes(path) as fh:
        while block := fh.read(size):
            block = carry + block
            cut = block.rfind(b"\n") + 1
            if cut == 0 and len(block) < LINE_CAP:
                carry = block  # no line's end yet: wait for more
                continue
            cut = cut or len(block)  # a line longer than LINE_CAP: cut anywhere
            carry = block[cut:]
            yield block[:cut].decode("utf-8", errors="replace")
    if carry:
        yield carry.decode("utf-8", errors="replace")


def digest(path: str | os.PathLike) -> str:
    """A short hash of the (inflated) content: what makes an imported run's id."""
    h = hashlib.sha256()
    with open_bytes(path) as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()[:10]


def document(path: str | os.PathLike) -> str:
    """The whole text of a one-document format, refused over DOC_CAP bytes."""
    with open_bytes(path) as fh:
        data = fh.read(DOC_CAP + 1)
    if len(data) > DOC_CAP:
        raise UsageError(f"{path}: over {DOC_CAP >> 20} MiB, more than any one JSON document of the formats read "
                         f"here holds; import the file that tool wrote, not a concatenation")
    return data.decode("utf-8", errors="replace")


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def depth(text: str) -> int:
    """How deep the JSON in `text` nests (strings skipped), without decoding it."""
    deepest = level = 0
    for c in _NOT_BRACKET.sub("", _STRING.sub("", text)):
        level = level + 1 if c in "[{" else max(level - 1, 0)
        deepest = max(deepest, level)
    return deepest


def loads(text: str, where: str, **kw: Any) -> Any:
    """json.loads after the nesting is checked: deeper than MAX_DEPTH is one line, never a RecursionError."""
    d = depth(text)
    if d > MAX_DEPTH:
        raise UsageError(f"{where}: JSON nested {d} deep; no format read here nests more than {MAX_DEPTH}: "
                         f"not a file that tool wrote")
    return json.loads(text, **kw)
