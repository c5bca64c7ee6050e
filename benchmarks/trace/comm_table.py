"""Markdown table of the "comm" sections of kind "train" records: bytes per step against the textbook,
the timeline (comm, exposed, compute per step) and the profiling overhead.

    python benchmarks/trace/comm_table.py OUTDIR/trace.jsonl
MB are decimal (1e6 bytes); times are per profiled step, in milliseconds.
"""

import sys

from fabricbench.results import read_results


def main(path: str) -> None:
    f = lambda v, p: f"{v:.{p}f}" if isinstance(v, (int, float)) else "-"  # noqa: E731
    print("| model | strategy | precision | n | status | MB/step by op | textbook MB | ratio | wire ratio "
          "| comm ms | exposed ms | compute ms | step ms | exposed frac | timeline | profiled/timed | note |")
    print("|" + "---|" * 17)
    for r in read_results(path, kind="train"):
        c = r.get("comm") or {}
        tl = c.get("timeline") or {}
        ov = c.get("overhead") or {}
        ops = ", ".join(f"{op} {b / 1e6:.3f}" for op, b in (c.get("bytes_per_step") or {}).items()) or "-"
        ms = lambda k: f(tl[k] * 1e3, 2) if isinstance(tl.get(k), (int, float)) else "-"  # noqa: E731
        book = c.get("textbook_bytes_per_step")
        print(f"| {r['model']} | {r['strategy']} | {r.get('precision')} | {r['nranks']} | {r['status']} | {ops} "
              f"| {f(book / 1e6 if isinstance(book, int) else None, 3)} | {f(c.get('textbook_ratio'), 3)} "
              f"| {f(c.get('wire_ratio'), 3)} | {ms('comm_s')} | {ms('exposed_s')} | {ms('compute_s')} "
              f"| {ms('step_s')} | {f(tl.get('exposed_fraction'), 2)} | {tl.get('source', '-')} "
              f"| {f(ov.get('ratio'), 3)} | {c.get('note') or r.get('message') or ''} |")


if __name__ == "__main__":
    main(sys.argv[1])
