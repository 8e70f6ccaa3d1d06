"""Benchmark ``nccl inspect`` against a plain Python loop that only reads the same lines.

Each side runs in its own child process, so that its peak RSS and its CPU time can be read from
getrusage. The machine this runs on is shared, so every figure is the median of ``--repeat`` runs, and
the ratio is given on CPU time (what the scan costs) as well as wall time (what a user waits).

Targets: memory flat (< 300 MiB RSS); the realistic mix (``gen_logs.py``, default shape) no slower
than ~1.7x the binary read loop; the worst case (``gen_logs.py --shape init-only``, every line an init
or connection line) no more than 6x.

    .venv/bin/python bench/nccl/gen_logs.py /tmp/nccl-512 --gib 1.0
    .venv/bin/python bench/nccl/bench_inspect.py /tmp/nccl-512 --repeat 5

``--against SRC`` (a ``src`` folder of another checkout, e.g. ``git archive <commit> src | tar -x -C /tmp/old``)
also runs that code's ``inspect_paths`` in every round, interleaved with this one, for an A/B of two versions.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

READ_LOOP = """
import sys, time, resource
from pathlib import Path
files = sorted(p for p in Path(sys.argv[1]).iterdir() if p.is_file())
ru0 = resource.getrusage(resource.RUSAGE_SELF)
t = time.perf_counter(); n = 0
for f in files:
    with f.open(sys.argv[2]) as fh:
        for line in fh:
            n += 1
dt = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_SELF)
print(dt, ru.ru_utime + ru.ru_stime - ru0.ru_utime - ru0.ru_stime, n, ru.ru_maxrss)
"""

INSPECT = """
import sys, time, resource
from pathlib import Path
from fabricguard.nccl import inspect_paths
ru0 = resource.getrusage(resource.RUSAGE_SELF)
t = time.perf_counter()
r = inspect_paths([Path(sys.argv[1])])
dt = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_SELF)
cpu = ru.ru_utime + ru.ru_stime - ru0.ru_utime - ru0.ru_stime
print(dt, cpu, r.bytes_read, ru.ru_maxrss, r.inter_node_transport.value, r.nodes, r.ranks)
"""


def run(code: str, *args: str, src: Path | None = None) -> list[str]:
    env = None if src is None else {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True, env=env)
    return out.stdout.split()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("logs", type=Path)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--against", type=Path, help="another version's src folder, run interleaved as a baseline")
    args = ap.parse_args()
    size = sum(p.stat().st_size for p in args.logs.iterdir() if p.is_file())
    runs: dict[str, list[list[str]]] = {"read-bytes": [], "read-text": [], "inspect": [], "against": []}
    sides: list[tuple[str, str, list[str], Path | None]] = [
        ("read-bytes", READ_LOOP, ["rb"], None),
        ("read-text", READ_LOOP, ["r"], None),
        ("inspect", INSPECT, [], None),
    ]
    if args.against:
        sides.append(("against", INSPECT, [], args.against.resolve()))
    for i in range(args.repeat):
        # Interleaved, so that a burst of load on the shared machine hits both sides alike; A/B order alternates.
        order = sides if i % 2 == 0 or not args.against else [*sides[:2], sides[3], sides[2]]
        for name, code, extra, src in order:
            runs[name].append(run(code, str(args.logs), *extra, src=src))

    def med(name: str, col: int) -> float:
        return statistics.median(float(r[col]) for r in runs[name])

    rb, rt, ins = med("read-bytes", 0), med("read-text", 0), med("inspect", 0)
    rb_cpu, ins_cpu = med("read-bytes", 1), med("inspect", 1)
    result = {
        "size_gib": round(size / 1024**3, 3),
        "lines": int(runs["read-bytes"][0][2]),
        "repeat": args.repeat,
        "median_wall_s": {"read_bytes": round(rb, 2), "read_text": round(rt, 2), "inspect": round(ins, 2)},
        "median_cpu_s": {"read_bytes": round(rb_cpu, 2), "inspect": round(ins_cpu, 2)},
        "ratio_wall_vs_bytes_loop": round(ins / rb, 2),
        "ratio_cpu_vs_bytes_loop": round(ins_cpu / rb_cpu, 2),
        "ratio_wall_vs_text_loop": round(ins / rt, 2),
        "inspect_max_rss_mib": round(max(int(r[3]) for r in runs["inspect"]) / 1024, 1),
        "read_loop_max_rss_mib": round(max(int(r[3]) for r in runs["read-bytes"]) / 1024, 1),
        "verdict": runs["inspect"][0][4:],
        **({"against": {"src": str(args.against), "median_cpu_s": round(med("against", 1), 2),
                        "median_wall_s": round(med("against", 0), 2),
                        "ratio_cpu_vs_bytes_loop": round(med("against", 1) / rb_cpu, 2),
                        "ratio_wall_vs_bytes_loop": round(med("against", 0) / rb, 2),
                        "cpu_s": [round(float(r[1]), 2) for r in runs["against"]],
                        "verdict": runs["against"][0][4:]},
            "inspect_cpu_s": [round(float(r[1]), 2) for r in runs["inspect"]],
            "read_bytes_cpu_s": [round(float(r[1]), 2) for r in runs["read-bytes"]]} if args.against else {}),
        "load_average": [round(x, 1) for x in os.getloadavg()],
        "when": time.strftime("%Y-%m-%d %H:%M"),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
