"""Incremental passes (controller/incremental.py) give exactly what a full pass gives over the same snapshot.

Property-style: a small cluster (the 271-day incident's production nodes and plugin pods, training JobSets with
their pods and Kueue Workloads waiting on the fabric check, the pool's FabricValidation with a passed history, a
Warning event) takes random watch events the way the controller's cache takes them: the changed object is
replaced by a new one, never edited in place. Between events the clock moves, and sometimes the gate's writes
land on the Workloads (as the API server would store them). After every step one pass runs full and one runs
incremental (the same ``Incremental`` kept across the whole sequence) on the same snapshot, and every part of
the results must be equal. A second test drops one dependency on purpose (the rules' reads of nodes) and checks
the same harness catches the difference: the check can fail.
"""

from __future__ import annotations

import copy
import random
from datetime import datetime, timedelta
from typing import Any

import pytest
from controller_support import PROFILE

from fabricguard import names
from fabricguard import objects as o
from fabricguard.agent.condition import build_condition, judge
from fabricguard.controller import incremental as inc_mod
from fabricguard.controller.actions import ApplyStatus
from fabricguard.controller.canaries import CanaryConfig
from fabricguard.controller.incremental import Incremental, reads_clock
from fabricguard.controller.reconcile import PassResult, reconcile
from fabricguard.doctor import snapshot as snapshot_mod
from fabricguard.doctor.rules import RULES
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.probes.result import Check, Status
from fabricguard.profile import loads_profile
from kube_support import gen

NOW: datetime = gen.NOW
POOL = "gh200-roce"
CFG = CanaryConfig("fabricguard-system", "img@sha256:" + "ab" * 32, None)


def _workload(i: int, state: str = "Pending", admitted: bool = False) -> dict[str, Any]:
    conds = [{"type": "QuotaReserved", "status": "True", "reason": "x", "message": "",
              "lastTransitionTime": gen.ts(NOW - timedelta(minutes=3))}]
    if admitted:
        conds.append({"type": "Admitted", "status": "True", "reason": "x", "message": "",
                      "lastTransitionTime": gen.ts(NOW - timedelta(minutes=2))})
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {
        "name": f"jobset-job-{i}", "namespace": f"team-{i % 3}", "uid": f"wl-{i}"},
        "status": {"conditions": conds, "admission": {"clusterQueue": "gh200", "podSetAssignments": [
            {"name": "workers", "count": 2, "flavors": {"nvidia.com/gpu": POOL}}]},
            "admissionChecks": [{"name": names.CHECK_NAME, "state": state, "message": "",
                                 "lastTransitionTime": gen.ts(NOW - timedelta(minutes=3))}]}}


def _jobset(i: int, finished: bool = False) -> dict[str, Any]:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {
        "name": f"job-{i}", "namespace": f"team-{i % 3}", "uid": f"js-{i}",
        "creationTimestamp": gen.ts(NOW - timedelta(hours=1)),
        "labels": {names.LABEL_MANAGED: "true", names.LABEL_POOL: POOL}},
        "spec": {"replicatedJobs": []},
        "status": {"conditions": [{"type": "Completed", "status": str(finished), "reason": "x",
                                   "lastTransitionTime": gen.ts(NOW - timedelta(minutes=5))}]}}


def _cluster() -> dict[tuple[str, str, str], dict[str, Any]]:
    lists = gen.incident("production")
    objs = [item for lst in lists.values() for item in lst["items"]]
    gpu_nodes = [o.name_of(n) for n in objs if n["kind"] == "Node" and "gh200" in o.name_of(n)]
    for i in range(6):
        objs.append(_jobset(i))
        objs.append(_workload(i, admitted=i == 5))
        for idx in range(2):
            objs.append(gen.training_pod(f"team-{i % 3}", f"job-{i}", idx, gpu_nodes[(2 * i + idx) % len(gpu_nodes)],
                                         NOW - timedelta(hours=1), resources={"nvidia.com/gpu": "1"},
                                         image="registry.corp.example.com/ml/trainer:2025.09"))
    for k, n in enumerate(x for x in objs if x["kind"] == "Node" and "gh200" in o.name_of(x)):
        _fabric_ready(n, "True", NOW - timedelta(days=1) + timedelta(minutes=3 * k))  # leave the 24 h window in turn
    runs = [{"name": f"fgc-{POOL}-{i}", "outcome": "passed", "started": gen.ts(NOW - timedelta(minutes=10 * i)),
             "finished": gen.ts(NOW - timedelta(minutes=10 * i - 3)), "message": "ok"} for i in range(1, 4)]
    objs.append({"apiVersion": "fabricguard.io/v1alpha1", "kind": "FabricValidation",
                 "metadata": {"name": POOL, "uid": "fv-1"}, "spec": {"pool": POOL},
                 "status": {"pool": POOL, "runs": runs, "lastSuccess": runs[0]["finished"]}})
    objs.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
                 "metadata": {"name": names.CHECK_NAME},
                 "spec": {"controllerName": names.CHECK_CONTROLLER},
                 "status": {"conditions": [{"type": "Active", "status": "True"}]}})
    return {(x["kind"], o.namespace_of(x) or "", o.name_of(x)): x for x in objs}


def _fabric_ready(node: dict[str, Any], status: str | None, at: datetime) -> None:
    conds = [c for c in node["status"].get("conditions") or () if c.get("type") != names.FABRIC_READY]
    if status is not None:
        conds.append({"type": names.FABRIC_READY, "status": status, "reason": "Checked",
                      "message": "1 check(s) failed: rdma.netdevs" if status == "False" else "6 check(s) passed",
                      "lastHeartbeatTime": gen.ts(at), "lastTransitionTime": gen.ts(at)})
    node["status"]["conditions"] = conds


def _event(rng: random.Random, cluster: dict[tuple[str, str, str], dict[str, Any]], now: datetime) -> str:
    """One random watch event, applied as the cache applies it (a new object replaces the old). Returns what."""
    def pick(kind: str) -> tuple[tuple[str, str, str], dict[str, Any]] | None:
        keys = sorted(k for k in cluster if k[0] == kind)
        if not keys:
            return None
        k = rng.choice(keys)
        return k, copy.deepcopy(cluster[k])

    what = rng.choice(["node-ready", "node-alloc", "node-cordon", "node-label", "node-add", "node-delete",
                       "node-lustre", "node-taint", "node-resend", "pod-phase", "pod-move", "pod-delete", "pod-add",
                       "pod-rdma", "pod-exec", "pod-ready", "pod-resend", "rollout-fixed", "wl-add", "wl-admit", "wl-delete", "wl-flavor",
                       "wl-resend", "js-finish", "fv-fail", "event-add", "event-exec", "ds-ready", "nothing"])
    if what == "rollout-fixed":  # a fixed image rolled out: no pod or Event says 'exec format error' any more
        for k in sorted(cluster):
            if "exec format error" in repr(cluster[k]):
                fixed = copy.deepcopy(cluster[k])
                for part in ("initContainerStatuses", "containerStatuses"):
                    for cs in (fixed.get("status") or {}).get(part) or ():
                        cs["lastState"], cs["state"] = {}, {"running": {"startedAt": gen.ts(now)}}
                if k[0] == "Event":
                    fixed["message"] = "Started container"
                cluster[k] = fixed
        return what
    kind = {"node": "Node", "pod": "Pod", "wl": "Workload", "js": "JobSet", "fv": "FabricValidation",
            "event": "Event", "ds": "DaemonSet", "nothing": ""}[what.split("-")[0]]
    got = pick(kind) if kind else None
    if got is None:
        return "nothing"
    key, obj = got
    if what == "pod-ready":  # a DaemonSet's pod (the incident's plugin): what the DaemonSet rules read
        plugin = sorted(k for k, p in cluster.items() if k[0] == "Pod" and any(
            r.get("kind") == "DaemonSet" for r in p["metadata"].get("ownerReferences") or ()))
        key = rng.choice(plugin) if plugin else key
        obj = copy.deepcopy(cluster[key])
    if what == "node-ready":
        _fabric_ready(obj, rng.choice(["True", "False", None]), now)
    elif what == "node-alloc":
        alloc = obj["status"].setdefault("allocatable", {})
        if gen.RDMA in alloc:
            del alloc[gen.RDMA]
        else:
            alloc[gen.RDMA] = "63"
    elif what == "node-lustre":  # the agent's own writer: a Lustre check failing, or all passing again
        checks = [Check("rdma.devices", Status.passed, "2 HCAs"), Check("lustre.health", Status.passed, "healthy")]
        checks.append(rng.choice([Check("lustre.imports", Status.passed, "9 imports connected"),
                                  Check("lustre.imports", Status.failed, "1 of 9 imports not connected: OST0001"),
                                  Check("lustre.lnet", Status.failed, "peer 10.1.0.5@tcp: health value 900")]))
        cond = build_condition(judge(checks), None, now)
        obj["status"]["conditions"] = [c for c in obj["status"].get("conditions") or ()
                                       if c.get("type") != names.FABRIC_READY] + [cond]
    elif what == "node-taint":
        taints = obj.setdefault("spec", {}).setdefault("taints", [])
        if any(t.get("key") == names.TAINT_UNVERIFIED for t in taints):
            obj["spec"]["taints"] = [t for t in taints if t.get("key") != names.TAINT_UNVERIFIED]
        else:
            taints.append({"key": names.TAINT_UNVERIFIED, "effect": "NoSchedule"})
    elif what == "pod-exec":  # a container that stopped saying 'exec format error', or that started to
        for cs in obj["status"].get("containerStatuses") or ():
            said = "exec /usr/bin/trainer: exec format error"
            cs["lastState"] = {} if cs.get("lastState") else {"terminated": {"exitCode": 255, "message": said}}
    elif what == "pod-ready":  # Ready flips: a DaemonSet pod that was ready once makes it regressed, not never-ready
        conds = [c for c in obj["status"].get("conditions") or () if c.get("type") != names.POD_READY]
        conds.append({"type": names.POD_READY, "status": rng.choice(["True", "False"]),
                      "lastTransitionTime": gen.ts(now)})
        obj["status"]["conditions"] = conds
    elif what == "event-exec":
        pod = rng.choice(sorted(k for k in cluster if k[0] == "Pod"))
        obj["metadata"]["name"] = f"{o.name_of(obj)}-x{rng.randrange(1000)}"
        obj["involvedObject"] = {"kind": "Pod", "namespace": pod[1], "name": pod[2]}
        obj["message"] = "Error: failed to start container: exec /bin/sh: exec format error"
        key = ("Event", o.namespace_of(obj) or "", o.name_of(obj))
    elif what == "node-cordon":
        obj.setdefault("spec", {})["unschedulable"] = not obj.get("spec", {}).get("unschedulable")
    elif what == "node-label":
        labels = obj["metadata"].setdefault("labels", {})
        labels["network.example.com/block"] = rng.choice(["block-a", "block-b", "block-z"])
    elif what == "node-add":
        obj["metadata"]["name"] = f"{o.name_of(obj)}-x{rng.randrange(1000)}"
        key = ("Node", "", o.name_of(obj))
    elif what in ("node-delete", "pod-delete", "wl-delete"):
        del cluster[key]
        return what
    elif what == "pod-phase":
        obj["status"]["phase"] = rng.choice(["Running", "Pending", "Failed"])
    elif what == "pod-move":
        nodes = sorted(k[2] for k in cluster if k[0] == "Node")
        obj["spec"]["nodeName"] = rng.choice(nodes)
    elif what == "pod-add":
        obj["metadata"]["name"] = f"{o.name_of(obj)}-x{rng.randrange(1000)}"
        key = ("Pod", o.namespace_of(obj) or "", o.name_of(obj))
    elif what == "pod-rdma":
        for c in obj["spec"].get("containers") or ():
            limits = c.setdefault("resources", {}).setdefault("limits", {})
            if gen.RDMA in limits:
                del limits[gen.RDMA]
            else:
                limits[gen.RDMA] = "1"
    elif what == "wl-add":
        obj = _workload(100 + rng.randrange(1000))
        key = ("Workload", o.namespace_of(obj) or "", o.name_of(obj))
    elif what == "wl-admit":
        obj["status"]["conditions"].append({"type": "Admitted", "status": "True", "reason": "x", "message": "",
                                            "lastTransitionTime": gen.ts(now)})
    elif what == "wl-flavor":
        psa = obj["status"]["admission"]["podSetAssignments"][0]
        psa["flavors"] = {"nvidia.com/gpu": rng.choice([POOL, "other-flavor"])}
    elif what in ("wl-resend", "node-resend", "pod-resend"):
        pass  # an equal object, newly decoded (a relist, a resent event): not a change
    elif what == "js-finish":
        obj["status"]["conditions"][0]["status"] = "True"
    elif what == "fv-fail":
        runs = obj["status"]["runs"]
        runs.insert(0, {"name": f"fgc-{POOL}-f{rng.randrange(1000)}", "outcome": rng.choice(["failed", "passed"]),
                        "started": gen.ts(now - timedelta(minutes=4)), "finished": gen.ts(now), "message": "x"})
    elif what == "event-add":
        obj["metadata"]["name"] = f"{o.name_of(obj)}-x{rng.randrange(1000)}"
        obj["lastTimestamp"] = gen.ts(now)
        key = ("Event", o.namespace_of(obj) or "", o.name_of(obj))
    elif what == "ds-ready":
        obj["status"]["numberReady"] = rng.choice([0, 1, 6])
    cluster[key] = obj
    return what


def _land_gate_writes(cluster: dict[tuple[str, str, str], dict[str, Any]], result: PassResult) -> None:
    """The gate's check writes, stored as the API server stores a server-side apply of that one list entry."""
    for a in result.actions:
        if isinstance(a, ApplyStatus) and a.plural == "workloads":
            key = ("Workload", a.namespace or "", a.name)
            if key not in cluster:
                continue
            wl = copy.deepcopy(cluster[key])
            want = a.body()["status"]["admissionChecks"][0]
            entries = wl["status"]["admissionChecks"]
            wl["status"]["admissionChecks"] = [want if e.get("name") == want["name"] else e for e in entries]
            cluster[key] = wl


def outcome(r: PassResult) -> dict[str, Any]:
    """Every part of a pass's results, in a form that compares by value."""
    return {
        "actions": [repr(a) for a in r.actions],
        "pools": repr(sorted(r.pools.items())),
        "findings": [f.to_dict() | {"pools": f.pools} for f in r.findings],
        "pending": r.pending, "held": r.held, "would_hold": r.would_hold,
        "counters": repr(r.counters), "running": repr(r.running), "breakers": repr(sorted(r.breakers.items())),
        "workloads": [o.name_of(w) for w in r.workloads], "pods": [o.name_of(p) for p in r.pods],
        "drift": r.drift, "stale": r.stale, "observing": r.observing, "exit": r.exit_code,
    }


def _run(seed: int, steps: int) -> tuple[list[str], list[str], Incremental]:
    """(the event sequence, the first step whose results differ (empty: none), the incremental memory)."""
    rng = random.Random(seed)
    profile = loads_profile(PROFILE)
    cluster = _cluster()
    inc = Incremental(full_every_s=1e9)
    now = NOW
    seen: list[str] = []
    for step in range(steps):
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            seen.append(_event(rng, cluster, now))
        now += timedelta(seconds=rng.choice([0, 1, 5, 30, 200]))
        # Each pass its own snapshot of the same objects, as each pass of the loop takes one: the incremental
        # pass must not find what the full one computed in a snapshot's own indexes.
        full = reconcile(Snapshot(objects=list(cluster.values()), source="test"), profile, now, CFG)
        part = reconcile(Snapshot(objects=list(cluster.values()), source="test"), profile, now, CFG, incremental=inc)
        if outcome(full) != outcome(part):
            a, b = outcome(full), outcome(part)
            where = [k for k in a if a[k] != b[k]]
            return seen, [f"step {step} ({seen[-1]}): {', '.join(where)} differ"], inc
        if rng.random() < 0.7:
            _land_gate_writes(cluster, full)
    return seen, [], inc


@pytest.mark.parametrize("seed", range(3))
def test_incremental_passes_equal_full_passes_over_random_event_sequences(seed: int) -> None:
    seen, diff, inc = _run(seed, 30)
    assert diff == [], f"events {seen}: {diff}"
    assert inc.stats.kind == "incremental"  # the sequence really ran incremental passes


@pytest.mark.parametrize("dropped", ["nodes", "clock", "bounds", "select", "fold"])
def test_the_property_catches_a_dropped_dependency(monkeypatch: pytest.MonkeyPatch, dropped: str) -> None:
    """Throwaway breaks: the rules' reads of nodes are not noted (`snapshot.nodes`, each node's pool, nodes by name:
    a node change keeps stale findings), or their
    reads of the clock are not (a DaemonSet's age stays what it was), or the bounds its comparisons with the clock
    set are ignored (a node's FabricReady leaves the observe rule's 24 h window unseen), or the per-object answers
    (``Snapshot.select``) of an object replaced in place are not computed again (a node's new FabricReady or
    allocatable is judged as the old one was), or a group's answer (``Snapshot.fold``: a DaemonSet's pods' nodes,
    the pods by owner) is kept while its objects were replaced. The same harness must say where the results
    differ."""
    if dropped == "nodes":
        for name, kinds in list(inc_mod.ATTRIBUTE_READS.items()):
            monkeypatch.setitem(inc_mod.ATTRIBUTE_READS, name, kinds - {"Node"})
    elif dropped == "clock":
        monkeypatch.setattr(inc_mod, "reading_clock", lambda now: (now, inc_mod.ClockUse()))
    elif dropped == "bounds":
        monkeypatch.setattr(inc_mod.ClockUse, "holds_at", lambda self, now: not self.exact)
    elif dropped == "select":
        monkeypatch.setattr(snapshot_mod, "replaced_places", lambda before, objs: [])
    else:
        monkeypatch.setattr(snapshot_mod, "same_objects", lambda before, objs, *_: len(before) == len(objs))
    caught = next(([diff] for seed in range(3) for diff in [_run(seed, 30)[1]] if diff), [])  # the first is enough
    assert caught, f"dropping the rules' {dropped} dependency went unnoticed"
    assert dropped in ("select", "fold") or "findings" in caught[0][0]


def test_a_pass_after_one_event_re_judges_only_what_it_touches() -> None:
    profile = loads_profile(PROFILE)
    cluster = _cluster()
    inc = Incremental(full_every_s=1e9)
    snap = Snapshot(objects=list(cluster.values()), source="test")
    first = reconcile(snap, profile, NOW, CFG, incremental=inc)
    assert first.stats is not None and first.stats.kind == "full" and first.stats.why == "first pass"
    _land_gate_writes(cluster, first)
    reconcile(Snapshot(objects=list(cluster.values()), source="test"), profile, NOW, CFG, incremental=inc)
    # One Workload changes: only it is decided again, and no rule that reads no Workload runs again.
    key = ("Workload", "team-0", "jobset-job-0")
    wl = copy.deepcopy(cluster[key])
    wl["status"]["admission"]["podSetAssignments"][0]["flavors"] = {"nvidia.com/gpu": "other-flavor"}
    cluster[key] = wl
    r = reconcile(Snapshot(objects=list(cluster.values()), source="test"), profile, NOW + timedelta(seconds=5), CFG,
                  incremental=inc)
    s = r.stats
    assert s is not None and s.kind == "incremental" and s.changed == {"Workload": 1}
    assert s.workloads_decided == 1 and s.workloads_kept == 5
    assert "pod index" in s.kept and s.built == []
    clock = sum(1 for rule in RULES if reads_clock(rule.fn))
    assert s.rules_kept >= len(RULES) - clock - 2, s  # the few that read Workloads, and those that read the clock
    # Its write lands (one more Workload event); then nothing changed: no rule but the clock's runs, nothing
    # is written.
    _land_gate_writes(cluster, r)
    reconcile(Snapshot(objects=list(cluster.values()), source="test"), profile, NOW + timedelta(seconds=6), CFG,
              incremental=inc)
    r = reconcile(Snapshot(objects=list(cluster.values()), source="test"), profile, NOW + timedelta(seconds=10),
                  CFG, incremental=inc)
    # Only the rules whose last run's use of the clock does not hold now run again (the incident's plugin
    # DaemonSet is reported with its age): fewer than those that may read it.
    assert r.stats is not None and r.stats.changed == {} and 0 < r.stats.rules_run < clock, r.stats
    assert not [a for a in r.actions if isinstance(a, ApplyStatus) and a.plural == "workloads"]


def test_full_pass_when_the_context_changes_or_a_pass_did_not_finish() -> None:
    profile = loads_profile(PROFILE)
    snap = Snapshot(objects=list(_cluster().values()), source="test")
    inc = Incremental(full_every_s=1e9)
    reconcile(snap, profile, NOW, CFG, incremental=inc)
    assert reconcile(snap, profile, NOW, CFG, incremental=inc).stats.kind == "incremental"  # type: ignore[union-attr]
    r = reconcile(snap, profile, NOW, CFG, stale="the controller's view is stale", incremental=inc)
    assert r.stats is not None and r.stats.kind == "full" and "stale" in r.stats.why
    other = loads_profile(PROFILE.replace("allReduceBusBwGBps: 45", "allReduceBusBwGBps: 40"))
    r = reconcile(snap, other, NOW, CFG, stale="the controller's view is stale", incremental=inc)
    assert r.stats is not None and r.stats.kind == "full" and "profile" in r.stats.why
    r = reconcile(snap, loads_profile(PROFILE.replace("allReduceBusBwGBps: 45", "allReduceBusBwGBps: 40")), NOW, CFG, stale="the controller's view is stale",
                  incremental=inc)
    assert r.stats is not None and r.stats.kind == "incremental"  # an equal profile, loaded again: the same input
    r = reconcile(snap, profile, NOW - timedelta(seconds=1), CFG, incremental=inc)
    assert r.stats is not None and r.stats.kind == "full"
    inc.begin(snap, (profile, CFG, ""), NOW)  # a pass that raised before it finished
    r = reconcile(snap, profile, NOW, CFG, incremental=inc)
    assert r.stats is not None and r.stats.why == "the previous pass did not finish"
    inc.force_full("a read was listed again")
    r = reconcile(snap, profile, NOW, CFG, incremental=inc)
    assert r.stats is not None and r.stats.why == "a read was listed again"
    assert Incremental(full_every_s=0).begin(snap, (profile, CFG, ""), NOW).kind == "full"


def test_the_reading_clock_notes_every_use_and_bounds_comparisons() -> None:
    at = NOW
    exact = [lambda c: c - (at - timedelta(days=1)), lambda c: c == at, lambda c: c.timestamp(), lambda c: f"{c}",
             lambda c: str(c), lambda c: hash(c), lambda c: c.tzinfo, lambda c: gen.ts(c),
             lambda c: (c + timedelta(1)).year, lambda c: at - c, lambda c: str(max([at - timedelta(1), c]))]
    for use in exact:
        clock, how = inc_mod.reading_clock(at)
        use(clock)
        assert how.exact and not how.holds_at(at), use
    # A comparison with a time bounds the times at which it comes out the same (open interval, both sides).
    day = timedelta(days=1)
    clock, how = inc_mod.reading_clock(at)
    assert (at - day + timedelta(hours=1)) >= clock - day  # inside the window: until an hour from now
    assert not how.exact and how.before == at + timedelta(hours=1) and how.after is None
    assert how.holds_at(at + timedelta(minutes=59)) and not how.holds_at(at + timedelta(hours=1))
    clock, how = inc_mod.reading_clock(at)
    assert not (at - 2 * day) >= clock - day and how.after == at - day and how.holds_at(at + day)
    assert not how.holds_at(at - day)
    clock, how = inc_mod.reading_clock(at)
    assert sorted([clock, at - day])[0] == at - day and how.after == at - day and not how.exact
    clock, how = inc_mod.reading_clock(at)
    later = clock - timedelta(hours=1)
    assert type(later) is type(clock) and not how.used and later < clock and not how.used  # same clock: no bound
    clock, how = inc_mod.reading_clock(at)
    assert isinstance(clock, datetime) and [clock][0] is clock and not how.used


def test_reads_clock_is_true_unless_the_rule_deletes_now_first() -> None:
    def uses(snapshot: Any, profile: Any, now: datetime) -> list[Any]:
        return [now]

    def ignores(snapshot: Any, profile: Any, now: datetime) -> list[Any]:
        """Doc."""
        del profile, now
        return []

    assert reads_clock(uses) and not reads_clock(ignores)
    assert reads_clock(len)  # no source to read: counts as reading the clock


async def test_the_loop_runs_a_full_pass_after_a_relist() -> None:
    """runner.run_pass with the cache: a read listed again (watch events were missed) makes the next pass full."""
    from types import SimpleNamespace

    from fabricguard.controller.runner import RunConfig, run_pass

    snap = Snapshot(objects=list(_cluster().values()), source="cache")
    informer = SimpleNamespace(lists=1)
    cache = SimpleNamespace(informers=[informer], snapshot=lambda: snap, stale=lambda bound: "")
    cfg = RunConfig(loads_profile(PROFILE), image="img@sha256:" + "ab" * 32)
    inc = Incremental(full_every_s=1e9)

    async def kind() -> tuple[str, str]:
        rep = await run_pass(cfg, NOW, act=False, kube=object(), cache=cache, incremental=inc)  # type: ignore[arg-type]
        assert rep.result.stats is not None
        return rep.result.stats.kind, rep.result.stats.why

    assert await kind() == ("full", "first pass")
    assert (await kind())[0] == "incremental"
    informer.lists += 1
    assert await kind() == ("full", "a read was listed again")
    assert (await kind())[0] == "incremental"
