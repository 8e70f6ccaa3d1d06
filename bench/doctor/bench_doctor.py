"""Time the doctor against plain ``json.load`` of the same files, in the same process.

    python bench/doctor/gen_snapshot.py bench/out/doctor-5k
    python bench/doctor/bench_doctor.py bench/out/doctor-5k

The target: the full doctor run (load the snapshot, run every rule, build the JSON report) takes no
more than 3x the time ``json.load`` needs for the same files. Each figure is the best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from datetime import UTC, datetime
from pathlib import Path

from fabricguard.doctor.engine import run_doctor
from fabricguard.doctor.report import to_json
from fabricguard.doctor.snapshot import load_snapshot
from fabricguard.profile import load_profile

NOW = datetime(2025, 9, 30, 12, tzinfo=UTC)


def load_only(d: Path) -> int:
    n = 0
    for p in sorted(d.glob("*.json")):
        with p.open(encoding="utf-8") as fh:
            n += len(json.load(fh).get("items", ()))
    return n


def doctor(d: Path) -> int:
    snap = load_snapshot(d)
    report = run_doctor(snap, load_profile(d / "profile.yaml"), NOW)
    to_json(report)
    return len(report.findings)


def best(fn, arg, repeat: int) -> tuple[float, int]:
    times, out = [], 0
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        out = fn(arg)
        times.append(time.perf_counter() - t)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("snapshot", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    t_load, items = best(load_only, a.snapshot, a.repeat)
    t_doc, findings = best(doctor, a.snapshot, a.repeat)
    size = sum(p.stat().st_size for p in a.snapshot.glob("*.json")) / 2**20
    print(f"snapshot: {a.snapshot} ({items} objects, {size:.0f} MiB JSON)")
    print(f"json.load only : {t_load:.2f} s")
    print(f"doctor (full)  : {t_doc:.2f} s  ({findings} findings)")
    print(f"ratio          : {t_doc / t_load:.2f}x (target <= 3x)")


if __name__ == "__main__":
    main()
