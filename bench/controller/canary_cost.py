"""Canary cost per pool per day for the example profiles, from each pool's effective canary block.

    .venv/bin/python bench/controller/canary_cost.py --run-seconds 120 [--pool-nodes 32] [profiles...]

A canary holds ``nodes x gpusPerPod`` GPUs for ``--run-seconds`` (pod start to exit), once per ``interval``.
Two figures per pool: the GPUs the canary requests, and the whole nodes it holds, because its pods also request
every fabric resource a training pod gets (all NICs of the node), which keeps other fabric jobs off those
nodes while it runs. The break-even pool size is the smallest pool for which the canary stays within the target
share (0.5%) of the pool's GPU-hours.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fabricguard.profile import load_profile

ROOT = Path(__file__).resolve().parents[2]
TARGET = 0.005


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("profiles", nargs="*", type=Path)
    ap.add_argument("--run-seconds", type=float, default=120.0)
    ap.add_argument("--pool-nodes", type=int, default=32, help="Pool size for the share column.")
    a = ap.parse_args()
    paths = a.profiles or sorted((ROOT / "examples" / "profiles").glob("*.yaml"))
    print(f"run time per canary {a.run_seconds:g} s; share for a pool of {a.pool_nodes} nodes; target <= 0.5%")
    print(f"{'profile/pool':34} {'interval':>8} {'runs/d':>6} {'GPU-h/d':>8} {'node-GPU-h/d':>12} "
          f"{'share':>7} {'share(nodes)':>12} {'break-even GPUs':>15}")
    for path in paths:
        prof = load_profile(path)
        for pool in prof.spec.pools:
            c = prof.canary(pool)
            if c is None:
                print(f"{path.stem + '/' + pool.name:34} {'no canary (no fabric or no Lustre)':>40}")
                continue
            runs = 86400 / c.interval_s
            gpu_h = runs * c.nodes * c.gpusPerPod * a.run_seconds / 3600
            node_h = runs * c.nodes * pool.gpusPerNode * a.run_seconds / 3600
            pool_gpu_h = a.pool_nodes * pool.gpusPerNode * 24
            print(f"{path.stem + '/' + pool.name:34} {c.interval:>8} {runs:>6.0f} {gpu_h:>8.2f} {node_h:>12.2f} "
                  f"{gpu_h / pool_gpu_h:>7.2%} {node_h / pool_gpu_h:>12.2%} {gpu_h / (TARGET * 24):>15.0f}")


if __name__ == "__main__":
    main()
