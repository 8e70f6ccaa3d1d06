"""Write a large job's NCCL logs for the ``nccl inspect`` benchmark, in one of two shapes.

``--shape realistic`` (default): 512 ranks (64 nodes x 8 GPUs), NCCL_DEBUG=INFO with COLL. One file per
rank, named as NCCL_DEBUG_FILE=%h.%p would name them. Each rank prints its init (bootstrap, plugin,
devices, network, ring/tree, connections) and then one ``AllReduce: opCount`` line per collective call,
which is what makes real INFO logs of long jobs reach gigabytes.

``--shape init-only`` (the worst case for the scanner): every line is an init or connection line, as
when a very large job (tens of thousands of ranks, 16 channels) only initialises. Ranks are written one
file per 32 nodes (as a log collector concatenates them), so the size is reached by the number of
nodes, not by repetition.

    .venv/bin/python bench/nccl/gen_logs.py /tmp/nccl-512 --gib 1.0
    .venv/bin/python bench/nccl/gen_logs.py /tmp/nccl-init --gib 1.0 --shape init-only
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from nccl_logs import IB, Job, host, rank_lines


def _realistic(out: Path, gib: float, nodes: int, gpus: int) -> None:
    ranks = nodes * gpus
    # One COLL line is ~200 bytes; size the number of calls so the total reaches the target.
    per_rank = gib * 1024**3 / ranks
    steps = max(1, int((per_rank - 12_000) / 200))
    job = Job(nodes=nodes, gpus_per_node=gpus, fabric=IB, version="2.27.7+cuda12.9", channels=16, steps=steps)
    total = 0
    for r in range(ranks):
        path = out / f"{host(r // gpus)}.{4000 + r}"
        with path.open("w") as fh:
            for line in rank_lines(job, r):
                fh.write(line)
                fh.write("\n")
        total += path.stat().st_size
    print(f"wrote {ranks} files, {total / 1024**3:.2f} GiB, {steps} collective calls per rank, into {out}")


NODES_PER_FILE = 32


def _init_only(out: Path, gib: float, gpus: int) -> None:
    # Size one node's init (rank 0 also prints the ring layout, which grows with the job) to pick the
    # number of nodes; rank 0 is written separately below.
    # Rank numbers grow with the job, so size a node of a job of about the final size.
    probe = Job(nodes=int(gib * 40_000), gpus_per_node=gpus, fabric=IB, version="2.27.7+cuda12.9", channels=16)
    mid = probe.nodes // 2 * gpus
    per_node = sum(len(line) + 1 for r in range(mid, mid + gpus) for line in rank_lines(probe, r))
    nodes = max(2, int(gib * 1024**3 / per_node))
    job = Job(nodes=nodes, gpus_per_node=gpus, fabric=IB, version="2.27.7+cuda12.9", channels=16)
    total = 0
    lines = 0
    for first in range(0, nodes, NODES_PER_FILE):
        path = out / f"{host(first)}.log"
        with path.open("w") as fh:
            for r in range(first * gpus, min(nodes, first + NODES_PER_FILE) * gpus):
                for line in rank_lines(job, r):
                    if r == 0 and " : " in line and line.count(" ") > 1000:
                        continue  # the 16 ring-layout lines of rank 0 would be one 100 MB line each
                    fh.write(line)
                    fh.write("\n")
                    lines += 1
        total += path.stat().st_size
    print(
        f"wrote {len(list(out.iterdir()))} files ({nodes} nodes, {nodes * gpus} ranks), {total / 1024**3:.2f} GiB, {lines} lines, into {out}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--gib", type=float, default=1.0, help="approximate total size")
    ap.add_argument("--shape", choices=("realistic", "init-only"), default="realistic")
    ap.add_argument("--nodes", type=int, default=64, help="realistic shape only")
    ap.add_argument("--gpus", type=int, default=8)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.shape == "realistic":
        _realistic(args.out, args.gib, args.nodes, args.gpus)
    else:
        _init_only(args.out, args.gib, args.gpus)


if __name__ == "__main__":
    main()
