"""Issue 26's replay: every node proven, the bad one found, over real HTTP against the emulator, pass by pass.

A 32-node pool in 4 blocks; one node (``prd-gh200-13``) has a rail down, so every pair test it is in runs at a
fraction of the floor; a node joins mid-way carrying the readiness taint. The controller runs unmodified
(``fabricguard controller --once --now``) every 10 minutes; between passes this file plays the scheduler, the
JobSet controller, the pods (their files on Lustre) and the Node Readiness Controller (it lifts the bootstrap
taint only when the rendered NodeReadinessRule's conditions all hold).
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from controller_support import (
    FVS,
    JOBSETS,
    PROFILE,
    ROCE_LOGS,
    WORKLOADS,
    admission_check,
    apply_aware_emulator,
    gate_check,
    jobset_created,
    jobset_finishes,
    kubeconfig,
    live,
    load_incident,
    plugin_fixed,
    pods_run,
    rail_figures,
    ranks_wrote,
    run_once,
    workload,
)
from kmock import Server

from fabricguard import times
from kube_support import RESOURCE, gen

pytestmark = pytest.mark.slow

POOL = "gh200-roce"
BAD = "prd-gh200-13"
NEW = "prd-gh200-32"
RACK = "network.example.com/rack"
UNVERIFIED = "readiness.k8s.io/fabric-unverified"
QUARANTINED = "fabricguard.io/fabric-quarantined"
GOOD_BW, BAD_BW = 44.0, 14.0  # floor 36 GB/s (45 x 0.8): a rail down leaves a fraction of it
STEP = timedelta(minutes=10)

# The incident's profile, its blocks as the pool's coarsest topology level, and the proof goal.
PROOF_PROFILE = PROFILE.replace(
    "    baseline: {allReduceBusBwGBps: 45}\n",
    "    baseline: {allReduceBusBwGBps: 45}\n"
    f"    topologyLevels: [{RACK}, kubernetes.io/hostname]\n",
) + ("    proof: {every: 24h, pairs: topology, pairDuration: 3m, maxConcurrent: 16,\n"
     "            quarantine: {maxPercent: 10, retestAfter: 6h}}\n")


def _node(i: int, created: Any, *, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    n = gen.node(f"prd-gh200-{i:02d}", arch="arm64",
                 labels={**gen.GH200, "network.example.com/block": "block-a" if i % 2 == 0 else "block-b",
                         RACK: f"rack-{i // 8}"},
                 created=created, allocatable={gen.RDMA: "63"}, fabric_ready=True, taints=taints)
    return {k: v for k, v in n.items() if k not in ("kind", "apiVersion")}


def _pool_of_32(k8s: Any) -> None:
    """The fixed incident cluster, its six GPU nodes replaced by 32 in four racks (each with its plugin pod)."""
    load_incident(k8s)
    plugin_fixed(k8s)
    for key in [k for k in k8s.objects if k[0] == "v1/nodes" and "gh200" in k[2]]:
        del k8s.objects[key]
    for key in [k for k in k8s.objects if k[0] == "v1/pods"]:
        del k8s.objects[key]
    ds = next(k8s.objects[k].raw for k in k8s.objects if k[0] == "apps/v1/daemonsets")
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", **json.loads(json.dumps(ds))}
    for i in range(32):
        _add_node(k8s, ds, _node(i, gen.NOW - timedelta(days=20)))
    _ds_counts(k8s, 32)
    # An admitted 4-node job on the pool (the largest gang) and one waiting on our check.
    big = workload("jobset-pretrain-4n")
    big["spec"]["podSets"][0]["count"] = 4
    big["status"]["conditions"].append({"type": "Admitted", "status": "True", "reason": "Admitted", "message": "",
                                        "lastTransitionTime": gen.ts(gen.NOW)})
    k8s.objects[WORKLOADS, "ml-training", "jobset-pretrain-4n"] = big


def _add_node(k8s: Any, ds: dict[str, Any], node: dict[str, Any]) -> None:
    k8s.objects[RESOURCE["Node"], None, node["metadata"]["name"]] = node
    pod = gen.ds_pod(ds, node["metadata"]["name"], gen.NOW - timedelta(days=1), crashing=False,
                     image_id=f"{gen.MIRROR}@{gen.ARM64_DIGEST}")
    k8s.objects[RESOURCE["Pod"], pod["metadata"]["namespace"], pod["metadata"]["name"]] = {
        k: v for k, v in pod.items() if k not in ("kind", "apiVersion")}


def _ds_counts(k8s: Any, n: int) -> None:
    key = next(k for k in k8s.objects if k[0] == "apps/v1/daemonsets")
    k8s.objects[key].patch({"status": {"desiredNumberScheduled": n, "currentNumberScheduled": n, "numberReady": n,
                                       "numberAvailable": n, "updatedNumberScheduled": n}})


def _pinned(js: dict[str, Any]) -> list[str] | None:
    pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    for term in (((pod.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or ():
        for e in term.get("matchExpressions") or ():
            if e["operator"] == "In":
                return list(e["values"])
    return None


def _schedulable(node: dict[str, Any], tolerations: list[dict[str, Any]]) -> bool:
    tolerated = {t.get("key") for t in tolerations}
    return all(t["key"] in tolerated or t["effect"] != "NoSchedule" for t in node["spec"].get("taints") or ())


class World:
    """The cluster's other actors between two passes."""

    def __init__(self, k8s: Any, lustre: Path) -> None:
        self.k8s, self.lustre = k8s, lustre
        self.played: set[str] = set()
        self.fault = False  # a platform fault: every pair fails
        self.pairs: list[tuple[str, tuple[str, ...], float, str]] = []  # (name, nodes, busbw, purpose) played
        self.lifted: dict[str, Any] = {}

    def nodes(self) -> dict[str, dict[str, Any]]:
        return {n["metadata"]["name"]: n for n in live(self.k8s, "v1/nodes")}

    def play(self, at: Any) -> None:
        nodes = self.nodes()
        for js in live(self.k8s, JOBSETS):
            name = js["metadata"]["name"]
            if name in self.played:
                continue
            self.played.add(name)
            js = jobset_created(self.k8s, js, at)
            pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
            pinned = _pinned(js)
            if pinned is not None:  # a pair test: the scheduler honours its pinning and tolerations
                assert all(_schedulable(nodes[n], pod.get("tolerations") or []) for n in pinned), (name, pinned)
                on = pinned
            else:  # the pool canary: two schedulable nodes outside its NotIn list
                avoid = {v for t in (((pod.get("affinity") or {}).get("nodeAffinity") or {}).get(
                    "requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or ()
                    for e in t["matchExpressions"] if e["operator"] == "NotIn" for v in e["values"]}
                on = [n for n in sorted(nodes) if "gh200" in n and n not in avoid
                      and _schedulable(nodes[n], pod.get("tolerations") or [])][-2:]
            bad = BAD in on or self.fault
            bw = BAD_BW if bad else GOOD_BW
            if pinned is not None:
                self.pairs.append((name, tuple(on), bw, js["metadata"]["labels"]["fabricguard.io/proof-purpose"]))
            pods_run(self.k8s, js, on, phase="Succeeded")
            # A pair times each rail alone: the bad node's rail 2 is slow; a platform fault slows every rail alike.
            rails = None if pinned is None else rail_figures(
                on, BAD_BW if self.fault else GOOD_BW, slow={BAD: 2} if BAD in on and not self.fault else None)
            ranks_wrote(self.lustre, js, ROCE_LOGS, busbw=bw, rails=rails)
            jobset_finishes(self.k8s, js, at + timedelta(minutes=2))

    def node_readiness_controller(self, at: Any) -> None:
        """Lift the bootstrap taint once every condition of the rendered bootstrap NodeReadinessRule holds."""
        from fabricguard.agent.render import readiness_rules
        from fabricguard.profile import loads_profile

        (rule,) = [r for r in readiness_rules(loads_profile(PROOF_PROFILE))
                   if r["spec"]["taint"]["key"] == UNVERIFIED]
        for name, n in self.nodes().items():
            taints = n["spec"].get("taints") or []
            if not any(t["key"] == UNVERIFIED for t in taints):
                continue
            conds = {c["type"]: c["status"] for c in n["status"]["conditions"]}
            if all(conds.get(c["type"]) == c["requiredStatus"] for c in rule["spec"]["conditions"]):
                self.k8s.objects[RESOURCE["Node"], None, name].patch(
                    {"spec": {"taints": [t for t in taints if t["key"] != UNVERIFIED]}})
                self.lifted[name] = at


def _fv(k8s: Any) -> dict[str, Any]:
    (fv,) = live(k8s, FVS)
    return fv




@pytest.fixture()
async def pool32(tmp_path: Path):
    async with apply_aware_emulator() as k8s, Server(k8s) as server:
        k8s["get /version/"] << {"major": "1", "minor": "31", "gitVersion": "v1.31.6", "platform": "linux/amd64"}
        _pool_of_32(k8s)
        k8s.objects["kueue.x-k8s.io/v1beta2/admissionchecks", None, "fabric-validated"] = admission_check()
        profile = tmp_path / "profile.yaml"
        profile.write_text(PROOF_PROFILE)
        lustre = tmp_path / "lustre"
        lustre.mkdir()
        yield k8s, kubeconfig(tmp_path, str(server.url).rstrip("/")), profile, lustre


async def test_every_node_proven_the_bad_one_quarantined_the_new_one_proven_first_then_the_breaker(
        pool32, tmp_path: Path) -> None:
    k8s, kc, profile, lustre = pool32
    world = World(k8s, lustre)
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet",
          **next(k8s.objects[k].raw for k in k8s.objects if k[0] == "apps/v1/daemonsets")}
    t = gen.NOW
    docs = []
    for k in range(5):
        if k == 1:  # a node joins mid-way, with the readiness taint its node pool registers it with
            _add_node(k8s, ds, _node(32, t - timedelta(minutes=5),
                                     taints=[{"key": UNVERIFIED, "value": POOL, "effect": "NoSchedule"}]))
            _ds_counts(k8s, 33)
        rc, doc = await run_once(kc, str(profile), t, lustre)
        docs.append(doc)
        world.node_readiness_controller(t)
        world.play(t)
        t += STEP
    proof = _fv(k8s)["status"]["proof"]
    rows = {r["node"]: r for r in proof["nodes"]}
    nodes = world.nodes()
    # Every node proven or named within the window.
    assert set(rows) == {f"prd-gh200-{i:02d}" for i in range(33)}
    assert {n for n, r in rows.items() if r["state"] != "proven"} == {BAD}, {
        n: r["state"] for n, r in rows.items() if r["state"] != "proven"}
    # The bad node convicted by bisection and no good node: only it carries our taint, with Event and condition.
    tainted = {n for n, node in nodes.items() if any(t["key"] == QUARANTINED for t in node["spec"].get("taints") or ())}
    assert tainted == {BAD}
    assert rows[BAD]["state"] == "quarantined" and len(rows[BAD]["failures"]) >= 2
    assert rows[BAD]["rails"] == ["rail 2 mlx5_2"]  # the bad rail, by its NIC on that node
    assert not [n for n, r in rows.items() if r.get("rails") and n != BAD]
    cond = next(c for c in nodes[BAD]["status"]["conditions"] if c["type"] == "FabricProven")
    assert cond["status"] == "False" and cond["reason"] == "Convicted" and "rail 2 mlx5_2" in cond["message"]
    events = [e for e in live(k8s, "v1/events") if e["involvedObject"].get("name") == BAD]
    assert any(e["reason"] == "FabricQuarantined" and e["type"] == "Warning" for e in events)
    # Each good node carries its evidence: the annotation, the condition, the table's busbw.
    good = nodes["prd-gh200-00"]
    assert good["metadata"]["annotations"]["fabricguard.io/last-proven"].startswith(rows["prd-gh200-00"]["lastProven"])
    assert rows["prd-gh200-00"]["busbwGBps"] == pytest.approx(GOOD_BW, rel=0.01)
    # Intra- and cross-block links both proven.
    assert {r.get("link") for r in rows.values()} >= {"intra", "cross"}
    # Within budget: 0.5% of 33 x 1 GPU x 24 h.
    assert proof["spentGpuHours"] <= proof["budgetGpuHours"] <= 0.005 * 33 * 24 + 1e-6
    # The pool stays admitted: the check said Ready on every pass once the first canary passed.
    assert gate_check(k8s, "jobset-llama-ft-3b1c2")["state"] == "Ready"
    assert all(d["pools"][POOL]["ready"] for d in docs[1:]), [d["pools"][POOL]["message"] for d in docs]
    # The new node was proven (a lifecycle pair with a known-good node) before its readiness taint lifted.
    assert NEW in world.lifted
    new_row = rows[NEW]
    assert new_row["state"] == "proven"
    lifecycle = [p for p in world.pairs if NEW in p[1]]
    assert lifecycle and lifecycle[0][3] == "lifecycle"
    partner = next(n for n in lifecycle[0][1] if n != NEW)
    assert partner != BAD
    assert times.parse_time(new_row["lastProven"]) <= world.lifted[NEW]
    assert next(c for c in nodes[NEW]["status"]["conditions"] if c["type"] == "FabricProven")["status"] == "True"
    # Only pairs with the bad node ran below the floor (the simulated world), and only it was blamed.
    for name, on, bw, _purpose in world.pairs:
        if bw == BAD_BW:
            assert BAD in on, name

    # The table: every node, the bad one named; exit 1 (a node named), verdict first.
    rc, out = await _coverage(kc, profile, t)
    assert rc == 1, out
    flat = " ".join(out.split())
    assert flat.startswith("DEGRADED pool gh200-roce: 32 of 32 node(s) proven within 24h; 1 named (quarantined)"), out
    assert any(BAD in line and "quarantined" in line for line in out.splitlines())

    # --- The breaker: a platform fault fails every pair from now on. A day later every node is due again.
    world.fault = True
    t = gen.NOW + timedelta(hours=21)
    prom = tmp_path / "fabricguard.prom"
    for _k in range(3):
        rc, doc = await run_once(kc, str(profile), t, lustre, "--metrics-textfile", str(prom))
        world.play(t)
        t += STEP
    proof = _fv(k8s)["status"]["proof"]
    assert proof["breaker"]["open"] is True, proof["breaker"]
    nodes = world.nodes()
    tainted = {n for n, node in nodes.items() if any(t["key"] == QUARANTINED for t in node["spec"].get("taints") or ())}
    assert tainted == {BAD}  # nothing more is quarantined
    fv_events = [e for e in live(k8s, "v1/events") if e["reason"] == "FabricQuarantineBreakerOpen"]
    assert fv_events and fv_events[0]["type"] == "Warning"
    # Every pair failing is the pool itself broken: now, and only now, the Kueue check holds it.
    assert rc == 1 and "node proof" in doc["pools"][POOL]["message"]
    # The alert fires on the metrics this pass wrote (promtool, the rules as rendered).
    from promtool_support import run_promtool_tests, series_from_exposition

    from fabricguard.controller.alerts import rule_groups
    from fabricguard.profile import loads_profile

    series = series_from_exposition(prom.read_text())
    assert any(s_["series"].startswith("fabricguard_pool_quarantine_breaker_open") for s_ in series)
    r = run_promtool_tests(tmp_path, rule_groups(loads_profile(PROOF_PROFILE)), [{
        "interval": "1m", "input_series": series, "alert_rule_test": [
            {"eval_time": "5m", "alertname": "FabricguardQuarantineBreakerOpen",
             "exp_alerts": [{"exp_labels": {"severity": "critical", "pool": POOL}}]}]}])
    assert r.returncode == 0, r.stdout + r.stderr
    # The table says so (exit 2); a person resets the breaker, and the earlier failures are not counted again.
    rc, out = await _coverage(kc, profile, t)
    assert rc == 2 and " ".join(out.split()).startswith("FAILED pool gh200-roce: quarantine breaker OPEN"), out
    rc, out = await _coverage(kc, profile, t, "--reset-breaker")
    assert "breaker reset" in out
    brk = _fv(k8s)["status"]["proof"]["breaker"]
    assert brk["open"] is False and brk["resets"] == 1 and brk["resetAt"]


async def _coverage(kc: str, profile: Path, at: Any, *extra: str) -> tuple[int, str]:
    import asyncio

    from controller_support import admin_kubeconfig, ts
    from typer.testing import CliRunner

    from fabricguard.cli import app

    r = await asyncio.to_thread(CliRunner().invoke, app, ["pool", "coverage", "-p", str(profile), "--kubeconfig",
                                                          admin_kubeconfig(kc), "--now", ts(at), *extra])
    return r.exit_code, r.output
