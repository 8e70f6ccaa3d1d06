"""What reading the controller's watch-fed cache costs a pass: ``Cache.snapshot()`` on 5,000 nodes + 20,000 pods.

    PYTHONPATH=src .venv/bin/python bench/controller/bench_cache.py [--nodes 5000 --pods 20000 --repeat 5]

The cluster is bench_pass.py's (the doctor benchmark's nodes and pods, 500 training JobSets with their Workloads,
a FabricValidation, a canary). The informers are filled as their lists and watches would fill them (no server:
only the read of the cache is timed), then ``snapshot()`` is taken ``--repeat`` times; the time is the best
run, the memory the peak traced allocation a snapshot adds on top of the cache (tracemalloc), next to what
the cached objects themselves hold. A snapshot that copies every object costs about one list's worth again,
on every pass; one that shares the cached objects costs the snapshot's lists.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("fg_bench_pass", ROOT / "controller" / "bench_pass.py")
assert _spec and _spec.loader
bench_pass = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bench_pass
_spec.loader.exec_module(bench_pass)


def filled_cache(lists: dict[str, dict]) -> Any:
    """A Cache whose informers hold what their lists would return (selectors applied), marked synced."""
    from fabricguard import names
    from fabricguard.controller.kube import Cache, _key, _selected
    from fabricguard.profile import loads_profile

    cache = Cache(None, loads_profile(bench_pass.PROFILE), "fabricguard-system")  # type: ignore[arg-type]
    for inf in cache.informers:
        r = inf.read
        items = json.loads(json.dumps((lists.get(r.plural) or {}).get("items") or []))  # fresh, as decoded
        if r.namespace is not None:
            items = [i for i in items if (i.get("metadata") or {}).get("namespace") == r.namespace]
        if r.label_selector == names.LABEL_CANARY_POOL:
            items = [i for i in items if names.LABEL_CANARY_POOL in ((i.get("metadata") or {}).get("labels") or {})]
        for i in items:
            i["kind"] = r.kind
            i.setdefault("apiVersion", r.api_version)
        inf.items = {_key(i): i for i in items if _selected(r, i)}
        inf.synced = True
    return cache


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=20000)
    ap.add_argument("--workloads", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    lustre = Path(tempfile.mkdtemp(prefix="fg-bench-lustre-"))
    try:
        lists = bench_pass.build(a.nodes, a.workloads, lustre, pods=a.pods)
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        cache = filled_cache(lists)
        held = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        n = sum(len(i.items) for i in cache.informers)
        text = json.dumps([list(i.items.values()) for i in cache.informers])
        print(f"cache: {n} objects ({len(text) / 2**20:.0f} MiB JSON, {held / 2**20:.0f} MiB of Python objects)")
        times = []
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            snap = cache.snapshot()
            times.append(time.perf_counter() - t0)
            del snap
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        snap = cache.snapshot()
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
        print(f"snapshot(), best of {a.repeat}: {min(times):.3f} s (worst {max(times):.3f} s); "
              f"peak traced memory it adds: {peak / 2**20:.1f} MiB ({peak / held:.2f}x the cached objects); "
              f"{len(snap.objects)} objects")
        asyncio.run(cache.close())
    finally:
        shutil.rmtree(lustre, ignore_errors=True)


if __name__ == "__main__":
    main()
