"""One nccl-tests table row -> its named cells, and a placement's cells -> a Side.

    fabricbench import all_reduce_perf.log --out imported.jsonl

A row is read by its table's header (Layout) where there is one, else by its shape: size, count, the names
(type, redop), root if the count is odd, then two equal groups of figures (one per placement).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fabricbench.importing.base import number
from fabricbench.importing.collective import Side

NUMERIC = re.compile(r"^-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
TIME_NAMES = ("time", "cputime")
_WRONG_NAMES = ("#wrong", "wrong", "error", "#error", "res", "#wrong?")


@dataclass(kw_only=True)
class Layout:
    """The table's columns: names before the first time column, then one group per placement."""

    preamble: list[str]
    sides: list[list[str]]

    @classmethod
    def of_header(cls, tokens: list[str]) -> Layout | None:
        names = [t for t in tokens if t != "timestamp"]
        starts = [i for i, t in enumerate(names) if t in TIME_NAMES]
        if not starts:
            return None
        sides = [names[a:b] for a, b in zip(starts, starts[1:] + [len(names)])]
        return cls(preamble=names[:starts[0]], sides=sides)


def width(layout: Layout | None) -> str:
    return "?" if layout is None else str(len(layout.preamble) + sum(len(x) for x in layout.sides))


def split_glued(tokens: list[str]) -> list[str]:
    """'-1host' (a row's last figure with NCCL's host name glued on) -> '-1'; other tokens as they are."""
    if tokens:
        m = NUMERIC.match(tokens[-1])
        last = tokens[-1]
        if m and m.end() < len(last) and last != "N/A":
            tokens = tokens[:-1] + [last[:m.end()]]
    return tokens


def is_row(tokens: list[str], layout: Layout | None) -> bool:
    return parse_row(tokens, layout) is not None


def parse_row(tokens: list[str], layout: Layout | None) -> tuple[dict[str, str], list[dict[str, str]]] | None:
    """A row's named cells: the preamble (size, count, type, redop, root) and one dict per placement."""
    if len(tokens) < 6 or not tokens[0].isdigit() or not tokens[1].isdigit():
        return None
    if layout is not None:
        pre = layout.preamble
        widths = [len(s) for s in layout.sides]
        need = len(pre) + sum(widths)
        # a time stamp column (-S 1) adds two tokens after the figures: allowed, ignored
        # -U 1 adds tuning columns whose cells are words: only each placement's time must be a figure
        starts = [len(pre) + sum(widths[:i]) for i in range(len(widths))]
        if len(tokens) in (need, need + 2) and all(_cell_ok(tokens[i]) for i in starts):
            head = dict(zip(pre, tokens))
            out, at = [], len(pre)
            for names, w in zip(layout.sides, widths):
                out.append(dict(zip(names, tokens[at:at + w])))
                at += w
            return head, out
    return _parse_shape(tokens)


def _cell_ok(t: str) -> bool:
    return t == "N/A" or bool(NUMERIC.match(t)) or t.lower() in ("nan", "-nan", "inf", "-inf")


def _parse_shape(tokens: list[str]) -> tuple[dict[str, str], list[dict[str, str]]] | None:
    """A row without a usable header: size, count, names (type, redop), root if odd, then two groups."""
    i = 2
    names = []
    while i < len(tokens) and not NUMERIC.match(tokens[i]) and tokens[i] != "N/A":
        names.append(tokens[i])
        i += 1
    if not names or len(names) > 2:
        return None
    rest = tokens[i:]
    head = {"size": tokens[0], "count": tokens[1], "type": names[0]}
    if len(names) == 2:
        head["redop"] = names[1]
    if len(rest) % 2 == 1:
        head["root"], rest = rest[0], rest[1:]
    if len(rest) not in (8, 16) or not all(_cell_ok(t) for t in rest):
        return None
    half = len(rest) // 2
    # no header to say whether the fourth column counts wrong elements or is the old era's deviation
    cols = ["time", "algbw", "busbw", "#wrong?"] + (["i_min", "i_max", "i_p99", "i_cv%"] if half == 8 else [])
    return head, [dict(zip(cols, rest[:half])), dict(zip(cols, rest[half:]))]


def side_of(cells: dict[str, str]) -> Side:
    time_key = next((k for k in cells if k in TIME_NAMES), None)
    s = Side(time_us=number(cells.get(time_key)), algbw=number(cells.get("algbw")),
             busbw=number(cells.get("busbw")))
    for k, v in cells.items():
        if k in _WRONG_NAMES:
            if v == "N/A":
                continue
            val = number(v)
            if val is None:
                continue
            # the old "error"/"res" column is a largest deviation ("0e+00", "2e-07"); "#wrong" is a count,
            # printed with %g (so "1e+06" for a million); under no header, e-notation below 1e5 is a deviation
            if k in ("error", "res", "#error"):
                s.max_error = val
            elif re.fullmatch(r"-?\d+", v) or (val == int(val) and (k != "#wrong?" or val >= 1e5)):
                s.wrong = int(val)
            else:
                s.max_error = val
        elif k == "i_min":
            s.min_us = number(v)
        elif k == "i_max":
            s.max_us = number(v)
        elif k == "i_p99":
            s.p99_us = number(v)
        elif k == "i_cv%":
            cv = number(v)
            s.cv = None if cv is None else cv / 100
        elif k not in (time_key, "algbw", "busbw"):
            s.extra[k.lstrip("#")] = number(v) if number(v) is not None else v
    return s
