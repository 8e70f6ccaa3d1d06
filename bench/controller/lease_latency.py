"""Leadership under a slow API server: one controller (run_forever) against the incident cluster in the test
emulator, every request answered after DELAY seconds, for SECONDS seconds.

Usage: PYTHONPATH=src python bench/controller/lease_latency.py --delay 3 --lease 10 --seconds 120
Prints: time to first lead, the share of 0.1 s samples in which the replica could act, the writes it made
(POST/PATCH/DELETE other than the Lease), the lease duration it wrote, and the Lease requests it sent. Run it with
PYTHONPATH pointing at an older src/ to measure that version (the script uses only RunConfig, Metrics and
run_forever, which both have).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "controller"))


async def main(delay: float, lease: int, seconds: float) -> None:
    from controller_support import CANARY_IMAGE, PROFILE, apply_aware_emulator, kubeconfig, load_incident
    from kmock import Server

    from fabricguard.controller.metrics import Metrics
    from fabricguard.controller.runner import RunConfig, run_forever
    from fabricguard.profile import loads_profile

    with tempfile.TemporaryDirectory() as tmp:
        lustre = Path(tmp) / "lustre"
        lustre.mkdir()
        k8s = apply_aware_emulator(rbac=False)
        async with k8s, Server(k8s) as server:
            k8s["get /version/"] << {"major": "1", "minor": "31", "gitVersion": "v1.31.6", "platform": "linux/amd64"}
            load_incident(k8s)
            kc = kubeconfig(Path(tmp), str(server.url).rstrip("/"))
            k8s.delay_s = delay
            cfg = RunConfig(loads_profile(PROFILE), image=CANARY_IMAGE, kubeconfig=kc, lustre_root=lustre,
                            identity="bench", resync_s=30, lease_s=lease, min_gap_s=5)
            metrics, stop = Metrics(), asyncio.Event()
            task = asyncio.create_task(run_forever(cfg, metrics, stop))
            t0 = time.monotonic()
            first, samples, acting = None, 0, 0
            while time.monotonic() - t0 < seconds:
                await asyncio.sleep(0.1)
                samples += 1
                if metrics.leader._value.get() == 1:
                    acting += 1
                    first = first if first is not None else time.monotonic() - t0
            stop.set()
            await asyncio.wait_for(task, 60)
            reqs = list(k8s)
            writes = [r for r in reqs if r.method.value.upper() in ("POST", "PATCH", "DELETE")
                      and "/leases" not in r.url.path]
            lease_reqs = [r for r in reqs if "/leases" in r.url.path]
            dur = getattr(getattr(metrics, "lease_duration", None), "_value", None)
            print(f"delay {delay} s, lease {lease} s, {seconds:.0f} s: first lead "
                  f"{'never' if first is None else f'{first:.1f} s'}, leader in {100 * acting / samples:.0f}% of "
                  f"samples, {len(writes)} writes, lease written {dur.get() if dur else lease} s, "
                  f"{len(lease_reqs)} Lease requests", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--delay", type=float, default=3.0)
    ap.add_argument("--lease", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=120.0)
    a = ap.parse_args()
    asyncio.run(main(a.delay, a.lease, a.seconds))
