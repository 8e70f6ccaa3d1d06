"""A full pass against the pass after one watch event (controller/incremental.py), on bench_pass.py's cluster.

    .venv/bin/python bench/controller/bench_incremental.py [--nodes 5000 --workloads 1000] [--repeat 5]

The cluster is bench_pass.py's (the doctor benchmark's generator: 80% GH200 fabric nodes with a crash-looping
plugin pod each, two-node training JobSets with Kueue Workloads waiting on the fabric check, a third finished
with NCCL logs on a temporary Lustre directory). Lustre is read once, before the passes (the edge's read is the
same for both kinds of pass and is timed in bench_pass.py). The objects are decoded once, as the cache holds
them; each event replaces one object by a changed copy, as a watch event does:

* **Node**: a fabric node's FabricReady turns False (the agent's report);
* **Pod**: a training pod's container restarts (its status changes);
* **Workload**: a waiting Workload's check entry is rewritten (the gate's own write coming back);
* **nothing**: a pass with no event in between (a resync).

Every fabric node reports FabricReady=True (the agent is deployed), so one node turning False changes its
pool's findings but not the pool's standing. After each event the incremental pass and a full pass
(``reconcile`` without an ``Incremental``, what every pass cost before) run on the same snapshot, in turn, and
an untimed pass then settles the writes the event caused; the medians of ``--repeat`` events of each kind are
reported with what the incremental pass judged again. The cache's objects are frozen out of the collector as
the controller freezes them after a list, and a collection runs before each timed pass. Times are CPU seconds of
this process (``time.process_time``): the machine is shared, and CPU time is the steadier figure.
"""

from __future__ import annotations

import argparse
import copy
import gc
import importlib.util
import shutil
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("fg_bench_pass", ROOT / "bench" / "controller" / "bench_pass.py")
assert _spec and _spec.loader
bench_pass = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bench_pass
_spec.loader.exec_module(bench_pass)


def main() -> None:
    from fabricguard import names
    from fabricguard.controller.actions import Annotate, ApplyStatus
    from fabricguard.controller.canaries import CanaryConfig
    from fabricguard.controller.incremental import Incremental
    from fabricguard.controller.lustre import load
    from fabricguard.controller.reconcile import reconcile
    from fabricguard.doctor.snapshot import Snapshot, snapshot_from_lists
    from fabricguard.profile import loads_profile

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--workloads", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--memory", action="store_true", help="only measure what the Incremental keeps between passes "
                    "(tracemalloc: the previous index, findings, per-object facts, each node's pool)")
    a = ap.parse_args()
    gen = bench_pass.gen
    lustre = Path(tempfile.mkdtemp(prefix="fg-bench-inc-"))
    try:
        lists = bench_pass.build(a.nodes, a.workloads, lustre)
        base = snapshot_from_lists(lists)
        objs: dict[tuple[str, str, str], dict[str, Any]] = {
            (x["kind"], (x["metadata"].get("namespace") or ""), x["metadata"]["name"]): x for x in base.objects}
        for k, x in objs.items():
            if k[0] == "Node" and "gh200" in k[2]:
                x["status"].setdefault("conditions", []).append({
                    "type": names.FABRIC_READY, "status": "True", "reason": "ChecksPassed",
                    "message": "6 check(s) passed", "lastTransitionTime": gen.ts(gen.NOW - timedelta(days=1))})
        profile = loads_profile(bench_pass.PROFILE)
        cfg = CanaryConfig("fabricguard-system", "img:1", lustre)
        facts = load(base, profile, cfg.lustre_root, cfg.namespace, cfg.history)
        now = gen.NOW
        gc.collect()
        gc.freeze()  # as the controller's cache does after a list (controller/kube.py settle_after_list)
        print(f"cluster: {a.nodes} nodes, {a.workloads} workloads, {len(objs)} objects; Lustre read once "
              f"({len(facts.jobs)} jobs)")

        def snap() -> Snapshot:
            return Snapshot(objects=list(objs.values()), source="bench")

        def land(result: Any) -> None:  # the gate's writes and the jobs' verdicts come back as watch events
            for act in result.actions:
                if isinstance(act, Annotate):
                    key = ({"jobsets": "JobSet", "jobs": "Job"}.get(act.plural, ""), act.namespace or "", act.name)
                    if key in objs:
                        job = copy.deepcopy(objs[key])
                        job["metadata"].setdefault("annotations", {}).update(act.annotations)
                        objs[key] = job
                if isinstance(act, ApplyStatus) and act.plural == "workloads":
                    key = ("Workload", act.namespace or "", act.name)
                    wl = copy.deepcopy(objs[key])
                    want = act.body()["status"]["admissionChecks"][0]
                    wl["status"]["admissionChecks"] = [want if e.get("name") == want["name"] else e
                                                       for e in wl["status"]["admissionChecks"]]
                    objs[key] = wl

        if a.memory:
            import tracemalloc

            tracemalloc.start()
            gc.collect()
            before = tracemalloc.get_traced_memory()[0]
            kept = Incremental(full_every_s=1e9)
            for _ in range(2):
                reconcile(snap(), profile, now, cfg, lustre=facts, incremental=kept)
            gc.collect()
            grown = tracemalloc.get_traced_memory()[0] - before
            print(f"the Incremental keeps {grown / 2**20:.1f} MiB between passes ({grown / len(objs):.0f} B per object)")
            return
        inc = Incremental(full_every_s=1e9)
        t = time.process_time()
        land(reconcile(snap(), profile, now, cfg, lustre=facts, incremental=inc))
        first = time.process_time() - t
        land(reconcile(snap(), profile, now, cfg, lustre=facts, incremental=inc))
        fabric = sorted(k for k in objs if k[0] == "Node" and "gh200" in k[2])
        training = sorted(k for k in objs if k[0] == "Pod" and k[1].startswith("team-"))
        waiting = sorted(k for k in objs if k[0] == "Workload")

        def node_event(i: int) -> None:
            k = fabric[(37 * i) % len(fabric)]
            n = copy.deepcopy(objs[k])
            conds = [c for c in n["status"].get("conditions") or () if c.get("type") != names.FABRIC_READY]
            conds.append({"type": names.FABRIC_READY, "status": "False", "reason": "ChecksFailed",
                          "message": "1 check(s) failed: rdma.netdevs", "lastTransitionTime": gen.ts(now)})
            n["status"]["conditions"] = conds
            objs[k] = n

        def pod_event(i: int) -> None:
            k = training[(37 * i) % len(training)]
            p = copy.deepcopy(objs[k])
            for cs in p["status"].get("containerStatuses") or ():
                cs["restartCount"] = int(cs.get("restartCount") or 0) + 1
            objs[k] = p

        def workload_event(i: int) -> None:
            k = waiting[(37 * i) % len(waiting)]
            w = copy.deepcopy(objs[k])
            for e in w["status"]["admissionChecks"]:
                e["message"] = f"rewritten {i}"
            objs[k] = w

        def nothing(i: int) -> None:
            del i

        rows = []
        for label, fn in (("Node", node_event), ("Pod", pod_event), ("Workload", workload_event),
                          ("nothing", nothing)):
            secs, fulls, stats = [], [], []
            for i in range(a.repeat):
                now += timedelta(seconds=5)
                fn(i)
                for turn in ((0, 1) if i % 2 else (1, 0)):
                    view = snap()  # a snapshot of its own, as each pass takes one: none inherits the other's indexes
                    gc.collect()  # neither kind pays for the other's garbage
                    t = time.process_time()
                    if turn:
                        r = reconcile(view, profile, now, cfg, lustre=facts, incremental=inc)
                        secs.append(time.process_time() - t)
                    else:
                        reconcile(view, profile, now, cfg, lustre=facts)
                        fulls.append(time.process_time() - t)
                stats.append(r.stats)
                land(r)
                now += timedelta(seconds=5)
                land(reconcile(snap(), profile, now, cfg, lustre=facts, incremental=inc))  # settle its writes
            s = stats[len(stats) // 2]
            rows.append((label, statistics.median(secs), statistics.median(fulls), s, min(secs), min(fulls)))
        print(f"first pass (full, with the incremental bookkeeping): {first:.3f} CPU s")
        print("| event | full pass (CPU, median / min) | incremental pass (CPU, median / min) | ratio of medians / "
              "mins | rules re-run / kept | Workloads decided / kept | built again | objects the re-run rules read "
              "| per-object answers computed / objects of groups folded again |")
        print("|---|---|---|---|---|---|---|---|---|")
        for label, sec, full, s, sec_min, full_min in rows:
            assert s is not None and s.kind == "incremental"
            print(f"| {label} | {full:.3f} / {full_min:.3f} s | {sec:.3f} / {sec_min:.3f} s | {sec / full:.0%} / "
                  f"{sec_min / full_min:.0%} | {s.rules_run} / {s.rules_kept} | {s.workloads_decided} / "
                  f"{s.workloads_kept} | {', '.join(s.built) or '-'} | {s.reevaluated:,} | {s.computed:,} / {s.folded:,} |")
    finally:
        shutil.rmtree(lustre, ignore_errors=True)


if __name__ == "__main__":
    main()
