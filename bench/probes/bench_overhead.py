"""Overhead of the collective probe: its busbw at 64 MiB vs a minimal hand-written timing loop, same run.

Two gloo ranks on this machine. In the same processes and the same process group, alternating rounds time
all_reduce of 64 MiB with the probe's own ``measure`` and with a bare loop (zeros, barrier, perf_counter, N
calls); busbw uses nccl-tests' formula for both. Prints a JSON line and the ratio; the goal is within 5%.

Usage: .venv/bin/python bench/probes/bench_overhead.py [--rounds 5] [--iters 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings

SIZE = 64 * 1024 * 1024


def rank(r: int, port: int, rounds: int, iters: int) -> None:
    warnings.filterwarnings("ignore")
    import torch
    import torch.distributed as dist

    from fabricguard.probes.collective import CollectiveConfig, measure

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=r, world_size=2)
    n = dist.get_world_size()
    cfg = CollectiveConfig(collectives=["all_reduce"], sizes=[SIZE], warmup=2, iters=iters, backend="gloo", check=False)
    probe, bare = [], []
    for _ in range(rounds):
        probe.append(measure(torch, dist, cfg, "gloo", torch.device("cpu"))[0].busbw_gbps)
        t = torch.zeros(SIZE // 4)
        for _ in range(2):
            dist.all_reduce(t)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        dt = (time.perf_counter() - t0) / iters
        bare.append(SIZE / dt / 1e9 * 2 * (n - 1) / n)
    dist.destroy_process_group()
    if r == 0:
        p, b = statistics.median(probe), statistics.median(bare)
        print(
            json.dumps(
                {
                    "size": SIZE,
                    "ranks": n,
                    "iters": iters,
                    "rounds": rounds,
                    "probe_busbw_gbps": p,
                    "bare_busbw_gbps": b,
                    "ratio": p / b,
                    "probe_all": probe,
                    "bare_all": bare,
                }
            )
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--rank", type=int, default=None)
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args()
    if a.rank is not None:
        rank(a.rank, a.port, a.rounds, a.iters)
        return
    from fabricguard.probes.collective import free_port

    port = free_port()
    args = ["--rounds", str(a.rounds), "--iters", str(a.iters), "--port", str(port)]
    procs = [
        subprocess.Popen([sys.executable, __file__, "--rank", str(r), *args], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"})
        for r in (0, 1)
    ]  # fmt: skip
    out = procs[0].communicate()[0]
    procs[1].wait()
    res = json.loads(out.strip().splitlines()[-1])
    print(json.dumps(res))
    print(
        f"probe {res['probe_busbw_gbps']:.3f} GB/s vs bare loop {res['bare_busbw_gbps']:.3f} GB/s: ratio {res['ratio']:.3f}"
    )


if __name__ == "__main__":
    main()
