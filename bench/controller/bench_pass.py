"""Time and memory of one controller pass on a 5,000-node cluster with 500 training workloads.

    .venv/bin/python bench/controller/bench_pass.py [--nodes 5000 --workloads 500] [--realistic] [--via-kmock]

The cluster is the doctor benchmark's generator (bench/doctor/gen_snapshot.py: 4,000 GH200 fabric nodes with a
crash-looping device plugin pod each, 1,000 system nodes) with 500 two-node JobSets of training pods, and for
each JobSet a Kueue Workload with quota reserved and the fabric-validated check Pending. A third of the
JobSets have finished with NCCL logs on a temporary "Lustre" directory (verdicts to judge), the
FabricValidation holds a history of ten runs and a canary is running. Every pass reads Lustre at the edge as the
controller's does (``controller.lustre.load``: those jobs' logs, the canary runs; timed apart), then reconciles on
what it read; before issue 31 the benchmark called ``reconcile`` without it, so no log was read. ``--realistic`` dresses nodes and pods as the API
server stores them (realistic.py: managed fields, images, env, volumes; same selection labels, so the same
cluster is judged) and trims them on decode, as the cache does. The pure pass (``reconcile``) is timed
on the listed objects; ``--via-kmock`` also times the whole pass through kmock's emulator over HTTP (list,
reconcile, act).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import math
import resource
import shutil
import sys
import tempfile
import time
import tracemalloc
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("fg_bench_doctor_gen", ROOT / "bench" / "doctor" / "gen_snapshot.py")
assert _spec and _spec.loader
gen_snapshot = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = gen_snapshot
_spec.loader.exec_module(gen_snapshot)
gen = gen_snapshot.gen

PROFILE = gen.INCIDENT_PROFILE.format(name="bench", env="production").replace(
    "spec:\n", "spec:\n  storage:\n    lustre: {claimName: training-lustre}\n", 1)
SOCKET_LOGS = sorted((ROOT / "tests/fixtures/nccl/synthetic/socket-fallback-2x4").iterdir())
ROCE_LOGS = sorted((ROOT / "tests/fixtures/nccl/synthetic/roce-2x2-kubectl").iterdir())


def build(nodes: int, workloads: int, lustre: Path, pods: int | None = None) -> dict[str, dict]:
    """The cluster's LIST bodies by plural; ``pods`` (default: a plugin pod per fabric node and the training
    pods) sets how many pods the doctor benchmark's generator makes."""
    NOW = gen.NOW
    lists = gen_snapshot.build(nodes, int(nodes * 0.8) + 2 * workloads if pods is None else pods)
    jobsets, wls = [], []
    for j in range(workloads):
        name, ns = f"job-{j:05d}", f"team-{j % 40}"
        finished = j % 3 == 0
        jobsets.append({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {
            "name": name, "namespace": ns, "uid": f"js-{j}", "creationTimestamp": gen.ts(NOW - timedelta(hours=2)),
            "labels": {"fabricguard.io/managed": "true", "fabricguard.io/pool": "gh200-roce"}},
            "spec": {"replicatedJobs": []},
            "status": {"conditions": [{"type": "Completed", "status": str(finished), "reason": "x",
                                       "lastTransitionTime": gen.ts(NOW - timedelta(minutes=5))}]}})
        if finished:
            d = lustre / ns / name / ".fabricguard" / "nccl"
            d.mkdir(parents=True)
            for f in SOCKET_LOGS if j % 2 else ROCE_LOGS:
                shutil.copy(f, d / f.name)
        wls.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {
            "name": f"jobset-{name}", "namespace": ns, "uid": f"wl-{j}"},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "True"}],
                       "admission": {"clusterQueue": "gh200", "podSetAssignments": [
                           {"name": "workers", "count": 2, "flavors": {"nvidia.com/gpu": "gh200-roce"}}]},
                       "admissionChecks": [{"name": "fabric-validated", "state": "Pending", "message": "",
                                            "lastTransitionTime": gen.ts(NOW)}]}})
    runs = [{"name": f"fgc-gh200-roce-{i}", "outcome": "passed", "started": gen.ts(NOW - timedelta(minutes=10 * i)),
             "finished": gen.ts(NOW - timedelta(minutes=10 * i - 3)), "message": "ok"} for i in range(1, 11)]
    fv = {"apiVersion": "fabricguard.io/v1alpha1", "kind": "FabricValidation",
          "metadata": {"name": "gh200-roce", "uid": "fv-1"}, "spec": {"pool": "gh200-roce"},
          "status": {"pool": "gh200-roce", "runs": runs, "lastSuccess": runs[0]["finished"]}}
    canary = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {
        "name": "fgc-gh200-roce-run", "namespace": "fabricguard-system", "uid": "c-1",
        "creationTimestamp": gen.ts(NOW - timedelta(minutes=1)), "labels": {"fabricguard.io/canary-pool": "gh200-roce"}},
        "spec": {"replicatedJobs": []}, "status": {}}
    ac = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": "fabric-validated"},
          "spec": {"controllerName": "fabricguard.io/fabric-validated"},
          "status": {"conditions": [{"type": "Active", "status": "True"}]}}
    lists["jobsets"] = gen.klist([*jobsets, canary])
    lists["workloads"] = gen.klist(wls)
    lists["fabricvalidations"] = gen.klist([fv])
    lists["admissionchecks"] = gen.klist([ac])
    return lists


def dress(lists: dict[str, dict]) -> None:
    """Nodes and pods as the API server stores them (realistic.py: managed fields, images, env, volumes)."""
    sys.path.insert(0, str(ROOT / "bench" / "controller"))
    import realistic

    for key in ("nodes", "pods"):
        for i, obj in enumerate(lists[key]["items"]):
            obj.setdefault("kind", "Node" if key == "nodes" else "Pod")
            realistic.dress(obj, i)


def pure_pass(text: str, lustre: Path, trimmed: bool = False, trace: bool = True
              ) -> tuple[float, float, int, object, float]:
    """(decode seconds, reconcile seconds, peak traced bytes, result, Lustre seconds) for one pass over the LIST
    bodies, reading Lustre at the edge as the controller's pass does (``controller.lustre.load``: the finished
    jobs' logs, the canary runs), then the pure reconcile on what was read;
    ``trimmed``: nodes and pods trimmed on decode, as the controller's cache keeps them (controller/trim.py);
    ``trace``: tracemalloc on (it slows decoding several times: off, the peak is 0 and RSS says the memory).
    Every finished job is read (no ``--verdict-budget``: the figure is the cost of reading them all, which the
    controller spreads over passes of at most that budget each)."""
    from fabricguard.controller.canaries import CanaryConfig
    from fabricguard.controller.lustre import VerdictReads, load
    from fabricguard.controller.reconcile import reconcile
    from fabricguard.controller.trim import trim
    from fabricguard.doctor.snapshot import snapshot_from_lists
    from fabricguard.profile import loads_profile

    profile = loads_profile(PROFILE)
    if trace:
        tracemalloc.start()
    t0 = time.perf_counter()
    lists = json.loads(text)  # what decoding the LIST responses gives
    if trimmed:
        for key, kind in (("nodes", "Node"), ("pods", "Pod")):
            lists[key]["items"] = [trim(o, kind) for o in lists[key]["items"]]
    snap = snapshot_from_lists(lists)
    t1 = time.perf_counter()
    cfg = CanaryConfig("fabricguard-system", "img:1", lustre)
    facts = load(snap, profile, cfg.lustre_root, cfg.namespace, cfg.history, VerdictReads(budget_s=math.inf))
    tl = time.perf_counter()
    result = reconcile(snap, profile, gen.NOW, cfg, lustre=facts)
    t2 = time.perf_counter()
    peak = tracemalloc.get_traced_memory()[1] if trace else 0
    tracemalloc.stop()
    return t1 - t0, t2 - tl, peak, result, tl - t1


async def kmock_pass(lists: dict[str, dict], lustre: Path) -> float:
    from kmock import KubernetesEmulator, Server

    from fabricguard.controller.runner import RunConfig, run_pass
    from fabricguard.profile import loads_profile

    res = {"nodes": "v1/nodes", "pods": "v1/pods", "daemonsets": "apps/v1/daemonsets",
           "jobsets": "jobset.x-k8s.io/v1alpha2/jobsets", "workloads": "kueue.x-k8s.io/v1beta2/workloads",
           "fabricvalidations": "fabricguard.io/v1alpha1/fabricvalidations",
           "admissionchecks": "kueue.x-k8s.io/v1beta2/admissionchecks"}
    async with KubernetesEmulator() as k8s, Server(k8s) as server:
        k8s["get /version/"] << {"major": "1", "minor": "31", "gitVersion": "v1.31.6", "platform": "linux/amd64"}
        for key, lst in lists.items():
            for obj in lst["items"]:
                m = obj["metadata"]
                k8s.objects[res[key], m.get("namespace"), m["name"]] = {
                    k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
        cfg_dir = Path(tempfile.mkdtemp())
        kc = cfg_dir / "kubeconfig"
        kc.write_text(json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": "b",
                                  "clusters": [{"name": "b", "cluster": {"server": str(server.url).rstrip("/")}}],
                                  "users": [{"name": "b", "user": {"token": "t"}}],
                                  "contexts": [{"name": "b", "context": {"cluster": "b", "user": "b"}}]}))
        cfg = RunConfig(loads_profile(PROFILE), image="img:1", kubeconfig=str(kc), lustre_root=lustre)
        rep = await run_pass(cfg, gen.NOW)
        assert not rep.errors, rep.errors[:3]
        return rep.seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--workloads", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--via-kmock", action="store_true")
    ap.add_argument("--pods", type=int, default=None, help="pods in all (default: a plugin pod per fabric node and "
                    "two per workload)")
    ap.add_argument("--no-trace", action="store_true", help="tracemalloc off: truer times, memory as max RSS only")
    ap.add_argument("--realistic", action="store_true", help="nodes and pods as the API server stores them "
                    "(realistic.py), trimmed on decode as the controller's cache trims them")
    a = ap.parse_args()
    lustre = Path(tempfile.mkdtemp(prefix="fg-bench-lustre-"))
    try:
        lists = build(a.nodes, a.workloads, lustre, a.pods)
        if a.realistic:
            dress(lists)
        n_objects = sum(len(v["items"]) for v in lists.values())
        text = json.dumps(lists)
        finished = sum(1 for _ in lustre.glob("*/*/.fabricguard/nccl"))
        print(f"cluster: {a.nodes} nodes, {a.workloads} workloads, {n_objects} objects "
              f"({len(text) / 2**20:.0f} MiB JSON{', as stored, trimmed on decode' if a.realistic else ''}); "
              f"the pass reads Lustre: the NCCL logs of {finished} finished jobs")
        if not a.via_kmock:
            lists.clear()  # only the JSON text is kept, as a controller keeps only what it decoded
        runs = [pure_pass(text, lustre, a.realistic, not a.no_trace) for _ in range(a.repeat)]
        decode, best, peak, result, read_s = min(runs, key=lambda r: r[0] + r[1] + r[4])
        kinds: dict[str, int] = {}
        for act in result.actions:  # type: ignore[attr-defined]
            kinds[type(act).__name__] = kinds.get(type(act).__name__, 0) + 1
        print(f"one pass, best of {a.repeat}: decode LIST bodies {decode:.2f} s + read Lustre {read_s:.2f} s + "
              f"reconcile {best:.2f} s = {decode + read_s + best:.2f} s; peak traced memory {peak / 2**20:.0f} MiB")
        print(f"actions: {kinds}; findings: {len(result.findings)}")  # type: ignore[attr-defined]
        print(f"max RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
        if a.via_kmock:
            secs = asyncio.run(kmock_pass(lists, lustre))
            print(f"one pass through kmock over HTTP (list, reconcile, act): {secs:.2f} s")
    finally:
        shutil.rmtree(lustre, ignore_errors=True)


if __name__ == "__main__":
    main()
