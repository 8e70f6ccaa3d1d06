"""Benchmark ``nccl inspect`` against a plain Python loop that only reads the same lines.

Each side runs in its own child process so that its peak RSS can be read from getrusage. Target
(issue 2): inspect streams with flat memory (< 300 MiB RSS) and takes no more than 3x the read loop.

    .venv/bin/python bench/nccl/gen_logs.py /tmp/nccl-512 --gib 1.0
    .venv/bin/python bench/nccl/bench_inspect.py /tmp/nccl-512
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

READ_LOOP = """
import sys, time, resource
from pathlib import Path
files = sorted(p for p in Path(sys.argv[1]).iterdir() if p.is_file())
t = time.perf_counter(); n = 0
for f in files:
    with f.open(sys.argv[2]) as fh:
        for line in fh:
            n += 1
dt = time.perf_counter() - t
print(dt, n, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""

INSPECT = """
import sys, time, resource
from pathlib import Path
from fabricguard.nccl import inspect_paths
t = time.perf_counter()
r = inspect_paths([Path(sys.argv[1])])
dt = time.perf_counter() - t
print(dt, r.bytes_read, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, r.inter_node_transport.value, r.nodes, r.ranks)
"""


def run(code: str, *args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True)
    return out.stdout.split()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("logs", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    size = sum(p.stat().st_size for p in args.logs.iterdir() if p.is_file())
    best: dict[str, list[str]] = {}
    for _ in range(args.repeat):
        for name, code, extra in (
            ("read-bytes", READ_LOOP, ["rb"]),
            ("read-text", READ_LOOP, ["r"]),
            ("inspect", INSPECT, []),
        ):
            res = run(code, str(args.logs), *extra)
            if name not in best or float(res[0]) < float(best[name][0]):
                best[name] = res
    rb, rt, ins = (float(best[k][0]) for k in ("read-bytes", "read-text", "inspect"))
    result = {
        "size_gib": round(size / 1024**3, 3),
        "bytes": int(best["inspect"][1]),
        "read_bytes_s": round(rb, 2),
        "read_text_s": round(rt, 2),
        "inspect_s": round(ins, 2),
        "ratio_vs_bytes_loop": round(ins / rb, 2),
        "ratio_vs_text_loop": round(ins / rt, 2),
        "inspect_max_rss_mib": round(int(best["inspect"][2]) / 1024, 1),
        "read_loop_max_rss_mib": round(int(best["read-bytes"][2]) / 1024, 1),
        "verdict": best["inspect"][3:],
        "when": time.strftime("%Y-%m-%d"),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
