"""Cost of one live verdict (``LogFollower.verdict``) on a 64-node job's logs, as the controller pays it per poll.

Writes the realistic shape's logs (64 nodes x 8 GPUs = 512 rank files, NCCL 2.27 INFO with COLL, ``--steps``
collective lines per rank), follows them with ``nccl.follow.LogFollower`` (one ``poll`` reads everything; ``--form kubectl`` writes one timestamped ``kubectl logs`` file per node instead), then
times ``verdict()`` ``--repeat`` times and prints the median and the minimum, with the scanner state's size.

    .venv/bin/python bench/nccl/bench_follow.py /tmp/nccl-follow-64 --repeat 20
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from fabricguard.nccl.follow import LogFollower
from nccl_logs import IB, Job, host, rank_lines, write_interleaved


def write(out: Path, nodes: int, gpus: int, steps: int, form: str) -> int:
    out.mkdir(parents=True, exist_ok=True)
    job = Job(nodes=nodes, gpus_per_node=gpus, fabric=IB, version="2.27.7+cuda12.9", channels=16, steps=steps)
    total = 0
    if form == "kubectl":
        return sum(write_interleaved(job, out, n, timestamps=True).stat().st_size for n in range(nodes))
    for r in range(nodes * gpus):
        path = out / f"{host(r // gpus)}.{4000 + r}"
        text = "\n".join(rank_lines(job, r)) + "\n"
        path.write_text(text)
        total += len(text)
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--form", choices=("per-rank", "kubectl"), default="per-rank",
                    help="per-rank: NCCL_DEBUG_FILE=%%h.%%p files; kubectl: one `kubectl logs --timestamps` file per node")
    a = ap.parse_args()
    size = write(a.out, a.nodes, a.gpus, a.steps, a.form)
    f = LogFollower(a.out)
    t0 = time.perf_counter()
    f.poll()
    read_s = time.perf_counter() - t0
    times = []
    for _ in range(a.repeat):
        t = time.perf_counter()
        v = f.verdict()
        times.append(time.perf_counter() - t)
        f.poll()  # nothing new: what the controller does between two verdicts of a quiet job
    f.close()
    files = a.nodes * a.gpus if a.form == "per-rank" else a.nodes
    print(f"{a.form}: {a.nodes} nodes, {files} files, {size / 1e6:.1f} MB; first poll {read_s * 1000:.0f} ms; "
          f"transport {v.transport}")
    print(f"verdict(): median {statistics.median(times) * 1000:.2f} ms, min {min(times) * 1000:.2f} ms "
          f"over {a.repeat} calls")


if __name__ == "__main__":
    main()
