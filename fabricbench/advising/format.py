"""What `fabricbench advise` prints: the recommendation with its reasons and runner-up, the GPU sets ranked
by busbw, and each strategy's memory and time on the chosen set (library code; the CLI only maps flags).

    fabricbench advise --model mistral-7b --num-gpus 4 --topo-file box-topo.txt --gpu-memory 80GB
"""

from __future__ import annotations

from fabricbench.reporting import table as tables
from fabricbench.reporting.analysis import fmt, fmt_count
from fabricbench.sizes import format_gib


def _ms(s) -> str:
    return "-" if s is None else f"{s * 1e3:.1f}"


PLACEMENT_COLS = (tables.Col("GPUs", justify="left", key=True), tables.Col("placement", justify="left"),
                  tables.Col("slowest", justify="left"), tables.Col("busbw GB/s", "GB/s"),
                  tables.Col("source", justify="left", prose=True), tables.Col("alike"))
STRATEGY_COLS = (tables.Col("strategy", justify="left", key=True), tables.Col("memory", justify="left"),
                 tables.Col("need GiB", "need"), tables.Col("headroom GiB", "headroom"), tables.Col("comm ms"),
                 tables.Col("step ms"), tables.Col("note", justify="left", prose=True))


def render(a) -> None:
    """An advice (advising/api.py Advice) on the console; prose wraps at words on a terminal, stays one line in
    a pipe."""
    con = tables.console()
    say = lambda text="": con.print(text, markup=False, highlight=False)  # noqa: E731
    say(f"{a.model} ({fmt_count(a.params)} parameters) on {a.num_gpus} GPU(s); {a.topology}")
    say()
    say(f"Recommended: {a.strategy} on GPUs {','.join(map(str, a.placement))}" if a.strategy else
        "No strategy fits.")
    for r in a.reasons:
        say(f"  - {r}")
    if a.runner_up:
        say(f"Runner-up: {a.runner_up['strategy']} on GPUs {','.join(map(str, a.runner_up['placement']))}")
    con.print()
    tables.render(con, f"GPU sets of {a.num_gpus}, best busbw first ({a.placement_source})", PLACEMENT_COLS,
                  [[",".join(map(str, p.gpus)), p.label, p.slowest_link or "-",
                    "-" if p.busbw_gbps is None else fmt(p.busbw_gbps), p.source,
                    f"+{len(p.equivalent)}" if p.equivalent else ""] for p in a.placements[:6]])
    con.print()
    tables.render(con, f"Strategies on {','.join(map(str, a.placement))} ({a.time_source})", STRATEGY_COLS,
                  [[s.strategy, s.memory.verdict, format_gib(s.memory.need_bytes), format_gib(s.memory.headroom_bytes),
                    _ms(s.time.comm_time_s), _ms(s.time.step_time_s), s.note] for s in a.strategies])
    for n in a.notes:
        say(f"note: {n}")
