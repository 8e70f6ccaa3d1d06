"""Memory the controller's cache keeps per object, and at a cluster's size: pods and nodes as the API server
stores them (``realistic.py``: managed fields, status, real labels), decoded from JSON page by page, as the
informers decode them, with and without ``controller.trim``.

    PYTHONPATH=src .venv/bin/python bench/controller/bench_memory.py --per-object
    PYTHONPATH=src .venv/bin/python bench/controller/bench_memory.py --nodes 20000 --pods 200000

``--per-object``: bytes per decoded pod and node (tracemalloc, 200 of each), JSON bytes on the wire.
With ``--nodes/--pods``: a child process fills a cache of that size from 500-item pages (each page's JSON
built, decoded, trimmed, kept), then ``gc.freeze`` as after a list; prints peak RSS and the fill time.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import realistic

from fabricguard.controller.trim import trim


def per_object() -> dict[str, float]:
    out: dict[str, float] = {}
    for kind, make in (("Pod", lambda i: realistic.pod(i, f"n{i}")), ("Node", realistic.node)):
        wire = [json.dumps(make(i)).encode() for i in range(200)]
        out[f"{kind} wire KiB"] = sum(map(len, wire)) / len(wire) / 1024
        for label, slim in (("cache KiB, as stored", False), ("cache KiB, trimmed", True)):
            gc.collect()
            tracemalloc.start()
            kept = []
            for w in wire:
                obj = json.loads(w)
                kept.append(trim(obj, kind) if slim else obj)
            size, _ = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            out[f"{kind} {label}"] = size / len(kept) / 1024
            del kept
    return out


def _wire(make: Callable[[int], dict[str, Any]], count: int, distinct: int) -> Callable[[int], str]:
    """Object ``i`` as JSON. Past ``distinct`` objects, object ``i`` is object ``i % distinct`` under a name of its
    own: building and encoding 220,000 realistic objects in Python cost the benchmark ~20 times what the informer's
    work it measures (decode, trim, keep) costs, and the bytes decoded and kept per object are the same."""
    made = [make(i) for i in range(min(count, distinct))]
    texts = [json.dumps(o) for o in made]
    names = [o["metadata"]["name"] for o in made]
    del made  # only the text is kept (at 500 distinct: ~8 MiB of pods, ~11 MiB of nodes, in the peak RSS)

    def wire(i: int) -> str:
        j, copy = i % distinct, i // distinct
        if not copy:
            return texts[j]
        own = f'"name": "{names[j]}"'
        if own not in texts[j]:  # a copy under the same name would overwrite its original in the cache, unseen
            raise SystemExit(f"bench_memory: object {j}'s name is not written as {own}; cannot rename its copies")
        return texts[j].replace(own, f'"name": "{names[j]}-c{copy}"', 1)

    return wire


def fill(nodes: int, pods: int, slim: bool, distinct: int = 500) -> dict[str, float]:
    t0 = time.perf_counter()
    cache: dict[tuple[str, str], dict] = {}
    for kind, count, make in (("Node", nodes, realistic.node),
                              ("Pod", pods, lambda i: realistic.pod(i, f"gke-h200-h200-rdma-{i % max(nodes, 1):05d}"))):
        wire = _wire(make, count, distinct)
        for start in range(0, count, 500):
            page = (f'{{"kind": "{kind}List", "items": ['
                    + ", ".join(wire(i) for i in range(start, min(count, start + 500))) + "]}")
            for obj in json.loads(page)["items"]:
                if slim:
                    trim(obj, kind)
                m = obj["metadata"]
                cache[(kind, m.get("namespace", "") + "/" + m["name"])] = obj
            del page
    gc.collect()
    gc.freeze()
    if len(cache) != nodes + pods:  # every object under a key of its own, or the memory read is too low
        raise SystemExit(f"bench_memory: {nodes + pods} objects made, {len(cache)} kept: names collided")
    return {"objects": len(cache), "fill_s": time.perf_counter() - t0,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-object", action="store_true")
    ap.add_argument("--nodes", type=int, default=0)
    ap.add_argument("--pods", type=int, default=0)
    ap.add_argument("--untrimmed", action="store_true")
    ap.add_argument("--distinct", type=lambda v: max(1, int(v)), default=500,
                    help="objects built one by one; the rest are copies renamed")
    a = ap.parse_args()
    if a.per_object:
        print(json.dumps({k: round(v, 2) for k, v in per_object().items()}, indent=1))
    if a.nodes or a.pods:
        print(json.dumps(fill(a.nodes, a.pods, not a.untrimmed, a.distinct)))


if __name__ == "__main__":
    main()
