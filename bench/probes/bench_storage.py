"""The storage probe's two engines, measured the same way, at several checkpoint sizes.

For each size per rank: the built-in engine and fio (when installed) run the sequential write (final fsync
included) and the verified read-back, N rounds alternating, into a fresh directory below --path. Printed per
engine and size: the median write and read MB/s as the probe reports them (each engine's own clock around
its I/O only), the phase duration, and for fio the rate its whole process gives (start-up included: the
figure the probe used to report for writes).

    python bench/probes/bench_storage.py --path /tmp --sizes 1M,4M,16M,64M,256M --rounds 3
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

from fabricguard.probes.bw import parse_size
from fabricguard.probes.storage import StorageConfig, run_builtin, run_fio


def one(engine: str, base: Path, size: int, ranks: int, block: int) -> dict[str, Any]:
    cfg = StorageConfig(path=str(base), ranks=ranks, file_size=size, block_size=min(block, size), small_files=0)
    work = Path(tempfile.mkdtemp(prefix="fabricguard-storage-bench-", dir=base))
    try:
        metrics, _created = run_fio(work, cfg) if engine == "fio" else run_builtin(work, cfg)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert metrics["checksum_ok"], metrics
    return metrics


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", default=tempfile.gettempdir())
    ap.add_argument("--sizes", default="1M,4M,16M,64M,256M")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--block", default="4M")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    engines = ["builtin"] + (["fio"] if shutil.which("fio") else [])
    print(f"# {a.ranks} ranks, block {a.block}, {a.rounds} rounds, medians; path {a.path}")
    print(f"{'size/rank':>10} {'engine':>8} {'write MB/s':>11} {'write s':>8} {'read MB/s':>10} {'read s':>8} "
          f"{'fio process write MB/s':>23}")
    for size in [parse_size(x) for x in a.sizes.split(",")]:
        runs: dict[str, list[dict[str, Any]]] = {e: [] for e in engines}
        for _ in range(a.rounds):
            for e in engines:  # alternate engines round by round: shared-machine drift hits both alike
                runs[e].append(one(e, Path(a.path), size, a.ranks, parse_size(a.block)))
        for e in engines:
            med = {
                k: statistics.median(r[ph][f] for r in runs[e])
                for k, ph, f in (("w", "write", "MBps"), ("ws", "write", "seconds"), ("r", "read", "MBps"),
                                 ("rs", "read", "seconds"))
            }
            proc = (
                f"{statistics.median(a.ranks * size / r['write']['process_s'] / 1e6 for r in runs[e]):>23.0f}"
                if e == "fio" else f"{'-':>23}"
            )
            print(f"{size // 1024**2:>8}Mi {e:>8} {med['w']:>11.0f} {med['ws']:>8.3f} {med['r']:>10.0f} "
                  f"{med['rs']:>8.3f} {proc}")


if __name__ == "__main__":
    main()
