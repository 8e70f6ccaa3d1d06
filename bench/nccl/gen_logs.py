"""Write a realistic large job's NCCL logs: 512 ranks (64 nodes x 8 GPUs), NCCL_DEBUG=INFO with COLL.

One file per rank, named as NCCL_DEBUG_FILE=%h.%p would name them. Each rank prints its init
(bootstrap, plugin, devices, network, ring/tree, connections) and then one ``AllReduce: opCount`` line
per collective call, which is what makes real INFO logs of long jobs reach gigabytes.

    .venv/bin/python bench/nccl/gen_logs.py /tmp/nccl-512 --gib 1.0
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from nccl_logs import IB, Job, host, rank_lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--gib", type=float, default=1.0, help="approximate total size")
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--gpus", type=int, default=8)
    args = ap.parse_args()
    ranks = args.nodes * args.gpus
    # One COLL line is ~200 bytes; size the number of calls so the total reaches the target.
    per_rank = args.gib * 1024**3 / ranks
    steps = max(1, int((per_rank - 12_000) / 200))
    job = Job(nodes=args.nodes, gpus_per_node=args.gpus, fabric=IB, version="2.27.7+cuda12.9", channels=16, steps=steps)
    args.out.mkdir(parents=True, exist_ok=True)
    total = 0
    for r in range(ranks):
        path = args.out / f"{host(r // args.gpus)}.{4000 + r}"
        with path.open("w") as fh:
            for line in rank_lines(job, r):
                fh.write(line)
                fh.write("\n")
        total += path.stat().st_size
    print(f"wrote {ranks} files, {total / 1024**3:.2f} GiB, {steps} collective calls per rank, into {args.out}")


if __name__ == "__main__":
    main()
