"""Benchmark ``nccl inspect`` against a plain Python loop that only reads the same lines.

Each side runs in its own child process, so that its peak RSS and its CPU time can be read from
getrusage. The machine this runs on is shared, so every figure is the median of ``--repeat`` runs, and
the ratio is given on CPU time (what the scan costs) as well as wall time (what a user waits).

Targets: memory flat (< 300 MiB RSS); the realistic mix (``gen_logs.py``, default shape) no slower
than ~1.7x the binary read loop; the worst case (``gen_logs.py --shape init-only``, every line an init
or connection line) no more than 6x.

    .venv/bin/python bench/nccl/gen_logs.py /tmp/nccl-512 --gib 1.0
    .venv/bin/python bench/nccl/bench_inspect.py /tmp/nccl-512 --repeat 5
"""

from __future__ import annotations

import argparse
import json
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


def run(code: str, *args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True)
    return out.stdout.split()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("logs", type=Path)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    size = sum(p.stat().st_size for p in args.logs.iterdir() if p.is_file())
    runs: dict[str, list[list[str]]] = {"read-bytes": [], "read-text": [], "inspect": []}
    for _ in range(args.repeat):
        # Interleaved, so that a burst of load on the shared machine hits both sides alike.
        for name, code, extra in (
            ("read-bytes", READ_LOOP, ["rb"]),
            ("read-text", READ_LOOP, ["r"]),
            ("inspect", INSPECT, []),
        ):
            runs[name].append(run(code, str(args.logs), *extra))

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
        "when": time.strftime("%Y-%m-%d %H:%M"),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
