"""The base of every option type (cli/types.py, cli/path_types.py): OptionType, and the one-line refusal it
raises (OptionError). Its own module, so that the path types and the rest both build on it without
importing each other.
"""

from __future__ import annotations

import re
from typing import Any, Callable

import click

from fabricbench.errors import UsageError

MAX_TEXT = 4096  # characters in one option's value: a path or a list, never a document
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class OptionError(click.BadParameter):
    """A refused value, said as the library says one: "--iters 0 is outside 1 to 10,000,000"."""

    def __init__(self, message: str, ctx=None, param=None, *, library: bool = False) -> None:
        super().__init__(message, ctx=ctx, param=param)
        self.library = library

    def format_message(self) -> str:
        p = self.param
        msg = self.message
        if p is None or not p.opts or not p.opts[0].startswith("-"):
            return msg  # an argument (relate FILES...): the message starts with the value, a path
        flag = p.opts[0]
        if msg.startswith(flag):
            return msg
        return f"{flag}: {msg}" if self.library else f"{flag} {msg}"


def refuse(message: str, param, ctx, library: bool = False) -> "NoReturn":  # noqa: F821
    raise OptionError(message, ctx=ctx, param=param, library=library)


class OptionType(click.ParamType):
    """One kind of value. `describe()` is the range shown in docs/options.md and --help."""

    kind = "value"

    def fail(self, message, param=None, ctx=None) -> "NoReturn":  # noqa: F821
        refuse(message, param, ctx)

    def describe(self) -> str:
        return self.kind

    def text(self, value: Any, param, ctx) -> str:
        """The value as one line of plain text, or a one-line refusal: empty, control characters, huge."""
        s = str(value)
        if len(s) > MAX_TEXT:
            self.fail(f"{len(s):,} characters is too long (at most {MAX_TEXT:,})", param, ctx)
        if CONTROL.search(s):
            self.fail(f"{s[:40]!r} holds a control character", param, ctx)
        s = s.strip()
        if not s:
            self.fail("is empty", param, ctx)
        return s

    def library(self, call: Callable[[], Any], param, ctx) -> Any:
        """Run a library parser; its UsageError becomes this option's one-line refusal."""
        try:
            return call()
        except (UsageError, ValueError) as e:
            refuse(str(e).strip(), param, ctx, library=True)
