"""What an nccl-tests table implies when it does not say it: the collective (and the rank count), and only
where the columns leave one answer.

    fabricbench import redops_table_only.txt --out imported.jsonl      (op all_reduce, extra.inferred ["op"])

Each collective leaves a signature in the table: whether it reduces (a `redop` other than none), whether it
has a root (`root` >= 0; -1 when none), and busbw / algbw = its bus factor for n ranks (fabricbench/
collectives, nccl-tests' PERFORMANCE.md): all-reduce 2(n-1)/n, reduce-scatter, all-gather, all-to-all
(n-1)/n, broadcast and reduce 1. A row is consistent with (op, n) when the printed algbw and busbw (two
decimals, so ±0.005 each) admit busbw = algbw x factor(op, n). The op is inferred when exactly one op fits
every informative row (algbw >= 0.05) for the file's rank count, or, where the file gives none, for some
n in 2..MAX_N; the rank count too when exactly one n fits. Anything else (all-gather against all-to-all,
sizes too small to print a bandwidth, one rank) stays null, as before.
"""

from __future__ import annotations

from fabricbench.collectives import COLLECTIVES

MAX_N = 1024
HALF_UNIT = 0.005  # nccl-tests prints bandwidths with two decimals
MIN_ALGBW = 0.05
REDUCING = {"all_reduce": True, "reduce_scatter": True, "all_gather": False, "all_to_all": False,
            "broadcast": False, "reduce": True}
ROOTED = {"broadcast": True, "reduce": True}


def _fits(op: str, n: int, rows: list[tuple[float, float]]) -> bool:
    f = COLLECTIVES.get(op).busbw_factor(n) if op in COLLECTIVES.names() else (1.0 if op == "reduce" else None)
    if f is None:
        return False
    return all((a - HALF_UNIT) * f <= b + HALF_UNIT and b - HALF_UNIT <= (a + HALF_UNIT) * f for a, b in rows)


def collective(rows: list[tuple[str | None, int | None, float | None, float | None]],
               nranks: int | None) -> tuple[str | None, int | None]:
    """(op, n) from rows of (redop, root, algbw, busbw); n only when the file gave none and one n fits."""
    info = [(a, b) for _, _, a, b in rows if a is not None and b is not None and a >= MIN_ALGBW]
    if not info or nranks == 1:
        return None, None
    redops = {r for r, _, _, _ in rows}
    roots = {x for _, x, _, _ in rows}
    if len(redops) > 1 and None in redops or len(roots) > 1:
        return None, None
    reduces = None if redops == {None} else not redops <= {"none"}
    rooted = None if roots == {None} else any(x is not None and x >= 0 for x in roots)
    ops = [op for op in REDUCING if (reduces is None or REDUCING[op] == reduces)
           and (rooted is None or ROOTED.get(op, False) == rooted)]
    ns = [nranks] if nranks else range(2, MAX_N + 1)
    fits = {op: [n for n in ns if _fits(op, n, info)] for op in ops}
    fits = {op: found for op, found in fits.items() if found}
    if len(fits) != 1:
        return None, None
    (op, found), = fits.items()
    return op, (found[0] if nranks is None and len(found) == 1 else None)
