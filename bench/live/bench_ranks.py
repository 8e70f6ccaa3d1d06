"""Cost of the per-rank and per-node analysis (``nccl.ranks.Attribution``) for one large job, per dump round.

A 16-node x 8-GPU 3D-parallel job (``tests/inspector_jobs.megatron``: TP inside the node, CP pairs, DP groups; 128
processes, 80 communicators across nodes) writes ``--per-dump`` collectives per communicator per 60 s dump. The
records are parsed once (as the follower does) and the analysis is timed alone: ``add`` of one round's records and
the ``judge`` after it. Run: ``PYTHONPATH=src:tests .venv/bin/python bench/live/bench_ranks.py``.
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc

from fabricguard.nccl.inspector import parse_record
from fabricguard.nccl.ranks import Attribution
from inspector_jobs import megatron


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--per-dump", type=int, default=8)
    args = ap.parse_args()
    job = megatron(nodes=args.nodes, gpus=args.gpus, slow={(5, 3): 1 / 3}, per_dump=args.per_dump)
    rounds = []
    for r in range(args.rounds):
        recs = [x for text in job.dump(r).values() for line in text.splitlines() if (x := parse_record(line))]
        rounds.append(recs)
    a = Attribution()
    add_s, judge_s = [], []
    for recs in rounds:  # timed without tracemalloc (it slows allocation-heavy code several times)
        t = time.process_time()
        a.add(recs)
        add_s.append(time.process_time() - t)
        t = time.process_time()
        v = a.judge()
        judge_s.append(time.process_time() - t)
    tracemalloc.start()
    b = Attribution()
    for recs in rounds:
        b.add(recs)
        b.judge()
    cur, peak = tracemalloc.get_traced_memory()
    n = statistics.median(len(r) for r in rounds)
    print(f"{args.nodes}x{args.gpus} job, {n:.0f} records a round: add median {statistics.median(add_s) * 1e3:.1f} ms "
          f"({statistics.median(add_s) / n * 1e6:.1f} us a record), judge median {statistics.median(judge_s) * 1e3:.1f} "
          f"ms; memory now {cur / 1e6:.2f} MB (peak {peak / 1e6:.2f}); slow nodes named: "
          f"{[s.hostname for s in v.confirmed_slow()]}")


if __name__ == "__main__":
    main()
