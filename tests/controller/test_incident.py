"""Replays against kmock's emulator over real HTTP, driven by ``fabricguard controller --once --now``."""

from __future__ import annotations

from datetime import timedelta

from controller_support import (
    CANARY_IMAGE,
    CHECKS,
    FVS,
    NOW,
    WORKLOADS,
    canaries,
    gate_check,
    jobset_created,
    kueue_validate,
    live,
    run_once,
    schedule_fails,
)

SCHED = (
    "0/9 nodes are available: 3 node(s) didn't match Pod's node affinity/selector, "
    "6 Insufficient rdma/rdma_shared_device_a. preemption: 0/9 nodes are available: "
    "9 No preemption victims found for incoming pod."
)


async def test_incident_canary_unschedulable_holds_the_workload(cluster, profile_path, lustre) -> None:
    k8s, kc = cluster
    rc, doc = await run_once(kc, profile_path, NOW, lustre)
    assert rc == 1
    (js,) = canaries(k8s)
    js = jobset_created(k8s, js, NOW)
    assert doc["pools"]["gh200-roce"]["ready"] is False
    # The canary asks for the fabric exactly like a training job: the missing resource makes it unschedulable.
    schedule_fails(k8s, js, SCHED, NOW + timedelta(seconds=5))

    rc, doc = await run_once(kc, profile_path, NOW + timedelta(minutes=2), lustre)
    assert rc == 1 and len(canaries(k8s)) == 1  # still within pendingTimeout: waits, starts no second canary

    t = NOW + timedelta(minutes=4)
    rc, doc = await run_once(kc, profile_path, t, lustre)
    assert rc == 1 and doc["errors"] == []
    pool = doc["pools"]["gh200-roce"]
    assert pool["outcome"] == "unschedulable"
    assert "Insufficient rdma/rdma_shared_device_a" in pool["message"]
    assert pool["heldWorkloads"] == 1
    # Detected within one canary interval of the first pass.
    (fv,) = live(k8s, FVS)
    run = fv["status"]["runs"][0]
    assert run["outcome"] == "unschedulable" and run["name"] == js["metadata"]["name"]
    assert (t - NOW) <= timedelta(minutes=10)
    # The stuck canary stays until a pass reads its record back (record first), and that pass removes it.
    assert [c["metadata"]["name"] for c in canaries(k8s)] == [js["metadata"]["name"]]

    (wl,) = live(k8s, WORKLOADS)
    ours = gate_check(k8s)
    # Known broken: Retry releases the Workload's quota; Kueue requeues it after one canary interval.
    assert ours["state"] == "Retry" and ours["requeueAfterSeconds"] == 600
    # The root cause where people look: first in the check's message (the deepest cause, issue 30), then the
    # scheduler's words, then the other causes, each whole, and where the rest is.
    assert ours["message"].startswith("fabricguard: held: pool gh200-roce canary unschedulable; cause: "
                                      "image-arch-mismatch"), ours["message"]
    assert "daemonset-never-ready: DaemonSet network-operator/rdma-shared-dp-ds never ready" in ours["message"]
    assert ours["message"].endswith("kubectl describe fabricvalidation gh200-roce") and len(ours["message"]) <= 1024
    assert "image-arch-mismatch" in ours["message"] and "exec format error" in ours["message"]
    assert "pool gh200-roce" in ours["message"] and "unschedulable" in ours["message"]
    assert "Insufficient rdma/rdma_shared_device_a" in ours["message"]
    # ... in the FabricValidation's conditions ...
    conds = {c["type"]: c for c in fv["status"]["conditions"]}
    assert conds["Validated"]["status"] == "False" and conds["Validated"]["reason"] == "CriticalFindings"
    assert conds["RootCause"]["status"] == "True" and "daemonset-never-ready" in conds["RootCause"]["message"]
    assert "fabric-request-missing" not in conds["RootCause"]["message"]  # one job's mistake holds no pool
    # ... and as a Warning Event on the DaemonSet at fault, once (not once per pass).
    ds_events = [e for e in live(k8s, "v1/events") if e["involvedObject"].get("kind") == "DaemonSet"]
    assert ds_events and all(e["reason"] == "FabricRootCause" and e["type"] == "Warning" for e in ds_events)
    assert ds_events[0]["involvedObject"]["name"] == "rdma-shared-dp-ds"
    assert ds_events[0]["metadata"]["namespace"] == "network-operator"
    assert "exec format error" in " ".join(e["message"] for e in ds_events)
    # One Event per finding naming it and per change of its words: never the same one again each pass.
    assert len(ds_events) >= 2 and len({e["message"] for e in ds_events}) == len(ds_events), ds_events
    before = len(ds_events)
    # The doctor's second, independent path: the device plugin that was never ready.
    assert "daemonset-never-ready" in {f["rule"] for f in doc["findings"]}
    events = [e for e in live(k8s, "v1/events") if e["involvedObject"].get("kind") == "Workload"]
    # One Event per change of the message: "no canary yet" on the first pass, then the scheduler's reason.
    assert [e["reason"] for e in events] == ["FabricNotValidated", "FabricNotValidated"]
    assert "no canary has finished yet" in events[0]["message"]
    assert "Insufficient rdma" in events[1]["message"] and events[1]["type"] == "Warning"

    # Only our entry was written, with server-side apply under our field manager.
    patches = [r for r in list(k8s) if r.method.value.upper() == "PATCH" and r.url.path.endswith("/status")
               and "/workloads/" in r.url.path]
    assert patches, "the Workload's check was never written"
    for r in patches:
        assert r.headers["Content-Type"] == "application/apply-patch+yaml"
        assert r.params["fieldManager"] == "fabricguard-controller" and r.params["force"] == "true"
        sent = r.data["status"]["admissionChecks"]
        assert [c["name"] for c in sent] == ["fabric-validated"]
        kueue_validate(r.data, "workload-admissionchecks")
    # The other controller's entry is untouched (the emulator merges naively; the API server merges by name).
    assert any(c["name"] == "capacity-provisioning" and c["state"] == "Ready" for c in wl["status"]["admissionChecks"])

    # The AdmissionCheck is kept Active, also by server-side apply, or its ClusterQueues would go inactive.
    (ac,) = live(k8s, CHECKS)
    (active,) = [c for c in ac["status"]["conditions"] if c["type"] == "Active"]
    assert active["status"] == "True"
    kueue_validate({"apiVersion": ac.get("apiVersion", "kueue.x-k8s.io/v1beta2"), "kind": "AdmissionCheck", **ac},
                   "admissionchecks")
    ac_patches = [r for r in list(k8s) if r.method.value.upper() == "PATCH" and "/admissionchecks/" in r.url.path]
    assert len(ac_patches) == 1  # once; later passes see it Active and write nothing

    # The next pass reads the unschedulable record back and only then removes the stuck canary.
    await run_once(kc, profile_path, t + timedelta(seconds=10), lustre)
    assert len([e for e in live(k8s, "v1/events") if e["involvedObject"].get("kind") == "DaemonSet"]) == before
    assert canaries(k8s) == []
    (fv,) = live(k8s, FVS)
    assert [r["outcome"] for r in fv["status"]["runs"]] == ["unschedulable"]


async def test_incident_alert_expression_holds_and_clears(cluster, profile_path, lustre, tmp_path) -> None:
    """The pass's own /metrics, fed to promtool: the unschedulable alert fires on the incident, not after recovery."""
    from controller_support import ROCE_LOGS, jobset_finishes, plugin_fixed, pods_run, ranks_wrote
    from promtool_support import run_promtool_tests, series_from_exposition

    from fabricguard.controller.alerts import rule_groups
    from fabricguard.controller.metrics import Metrics
    from fabricguard.controller.runner import RunConfig, run_pass
    from fabricguard.profile import load_profile

    k8s, kc = cluster
    profile = load_profile(profile_path)
    cfg = RunConfig(profile, image=CANARY_IMAGE, kubeconfig=kc, lustre_root=lustre)
    metrics = Metrics()
    rep = await run_pass(cfg, NOW)
    metrics.observe(profile, rep.result, rep.seconds, len(rep.errors))
    (js,) = canaries(k8s)
    js = jobset_created(k8s, js, NOW)
    schedule_fails(k8s, js, SCHED, NOW + timedelta(seconds=5))
    rep = await run_pass(cfg, NOW + timedelta(minutes=4))
    metrics.observe(profile, rep.result, rep.seconds, len(rep.errors))
    text = metrics.exposition().decode()
    assert 'fabricguard_canary_runs_total{outcome="unschedulable",pool="gh200-roce"} 1.0' in text
    assert 'fabricguard_admission_check_pending_workloads{pool="gh200-roce"} 1.0' in text
    assert 'fabricguard_doctor_findings{rule="daemonset-never-ready",severity="critical"} 1.0' in text
    # Per-object series, so the alerts can name the workload and the DaemonSet.
    assert 'fabricguard_admission_check_held_workload{namespace=' in text
    assert ('fabricguard_doctor_finding{kind="DaemonSet",name="rdma-shared-dp-ds",namespace="network-operator",'
            'rule="daemonset-never-ready",severity="critical"} 1.0') in text
    incident = series_from_exposition(text)
    (held,) = [(w["metadata"]["namespace"], w["metadata"]["name"]) for w in live(k8s, WORKLOADS)]

    # Recovery: the plugin's arm64 image is deployed, and the next canary passes over RoCE.
    plugin_fixed(k8s)
    t = NOW + timedelta(minutes=10)
    await run_pass(cfg, t)
    (js2,) = canaries(k8s)
    js2 = jobset_created(k8s, js2, t)
    pods_run(k8s, js2, ["prd-gh200-02", "prd-gh200-03"])
    ranks_wrote(lustre, js2, ROCE_LOGS, busbw=40.0)
    jobset_finishes(k8s, js2, t + timedelta(minutes=2))
    rep = await run_pass(cfg, t + timedelta(minutes=3))
    metrics.observe(profile, rep.result, rep.seconds, len(rep.errors))
    recovered = series_from_exposition(metrics.exposition().decode())

    labels = {"severity": "critical", "pool": "gh200-roce", "outcome": "unschedulable"}
    r = run_promtool_tests(tmp_path, rule_groups(profile), [
        {"interval": "1m", "input_series": incident, "alert_rule_test": [
            {"eval_time": "5m", "alertname": "FabricguardCanaryUnschedulable",
             "exp_alerts": [{"exp_labels": labels}]},
            {"eval_time": "20m", "alertname": "FabricguardWorkloadsHeld",
             "exp_alerts": [{"exp_labels": {"severity": "warning", "pool": "gh200-roce", "namespace": held[0],
                                            "workload": held[1]}}]}]},
        {"interval": "1m", "input_series": recovered, "alert_rule_test": [
            {"eval_time": "5m", "alertname": "FabricguardCanaryUnschedulable", "exp_alerts": []},
            {"eval_time": "20m", "alertname": "FabricguardWorkloadsHeld", "exp_alerts": []}]},
    ])
    assert r.returncode == 0, r.stdout + r.stderr


# --- issue 19: after the fix, the fabric breaks again; a canary that never made a pod; one meaning --------------


async def test_fabric_breaking_right_after_a_passing_canary_holds_work_within_minutes(
        cluster, profile_path, lustre) -> None:
    """The worst case of the canary path alone is interval + pending timeout + resync (15.5 min with the defaults)
    when the fabric breaks just after a pass. The gate also reads the agents' FabricReady: held by the next pass."""
    from controller_support import agents_report, canary_passed, plugin_fixed

    k8s, kc = cluster
    plugin_fixed(k8s)
    agents_report(k8s, "True", "FabricVerified", "all checks passed", NOW)
    passed_at = await canary_passed(k8s, kc, profile_path, lustre)
    rc, doc = await run_once(kc, profile_path, passed_at, lustre)
    assert rc == 0 and doc["pools"]["gh200-roce"]["ready"] is True, doc["pools"]
    assert gate_check(k8s)["state"] == "Ready"

    # One second after the canary passed, the fabric breaks: each node's agent sees it on its next run (at most
    # its --interval, 60 s, later) and turns FabricReady False at once (damping only delays True).
    broke = passed_at + timedelta(seconds=1)
    seen = broke + timedelta(seconds=60)
    agents_report(k8s, "False", "RdmaLinkDown", "mlx5_0 port 1: state DOWN (1: DOWN)", seen)
    held_at = seen + timedelta(seconds=30)  # the controller's next pass: --resync 30 s
    rc, doc = await run_once(kc, profile_path, held_at, lustre)
    pool = doc["pools"]["gh200-roce"]
    assert rc == 1 and pool["ready"] is False and pool["broken"] is True
    assert "6 of the pool's 6 reporting node(s) have FabricReady=False" in pool["message"]
    ours = gate_check(k8s)
    assert ours["state"] == "Retry" and "FabricReady=False" in ours["message"] and "RdmaLinkDown" in ours["message"]
    assert held_at - broke <= timedelta(minutes=10)
    assert held_at - broke == timedelta(seconds=90)  # agent interval + resync, far below the canary path's 15.5 min
    (fv,) = live(k8s, FVS)
    validated = next(c for c in fv["status"]["conditions"] if c["type"] == "Validated")
    assert validated["status"] == "False" and validated["reason"] == "NodesNotFabricReady"

    # The agents report the fabric back: with the canary still fresh, the work goes on (no new canary needed).
    agents_report(k8s, "True", "FabricVerified", "all checks passed", held_at + timedelta(minutes=1))
    rc, doc = await run_once(kc, profile_path, held_at + timedelta(minutes=1, seconds=30), lustre)
    assert doc["pools"]["gh200-roce"]["ready"] is True
    assert gate_check(k8s)["state"] == "Ready"


async def test_a_canary_whose_pods_were_never_created_has_its_own_outcome(cluster, profile_path, lustre) -> None:
    from controller_support import NS, ts

    k8s, kc = cluster
    await run_once(kc, profile_path, NOW, lustre)
    (js,) = canaries(k8s)
    js = jobset_created(k8s, js, NOW)
    name = js["metadata"]["name"]
    # The JobSet controller made the Job; Pod Security admission refused every pod it tried to create.
    refusal = (f'Error creating: pods "{name}-workers-0-0-x7k2p" is forbidden: violates PodSecurity '
               '"restricted:latest": privileged (container "canary" must not set securityContext.privileged=true)')
    k8s.objects["v1/events", NS, f"{name}-workers-0.1"] = {
        "metadata": {"name": f"{name}-workers-0.1", "namespace": NS, "creationTimestamp": ts(NOW)},
        "involvedObject": {"apiVersion": "batch/v1", "kind": "Job", "name": f"{name}-workers-0", "namespace": NS},
        "reason": "FailedCreate", "message": refusal, "type": "Warning", "count": 7,
        "lastTimestamp": ts(NOW + timedelta(minutes=1)),
    }
    _rc, doc = await run_once(kc, profile_path, NOW + timedelta(minutes=4), lustre)
    pool = doc["pools"]["gh200-roce"]
    assert pool["outcome"] == "not-created", pool
    assert "no pod of the canary was created" in pool["message"] and "violates PodSecurity" in pool["message"]
    assert "Insufficient" not in pool["message"] and "device plugin" not in pool["message"]
    ours = gate_check(k8s)
    assert ours["state"] == "Retry" and "canary not-created" in ours["message"]
    (fv,) = live(k8s, FVS)
    assert fv["status"]["runs"][0]["outcome"] == "not-created"


def test_a_pool_without_canary_but_with_critical_findings_is_not_validated() -> None:
    from controller_support import PROFILE, gen

    from fabricguard.controller.canaries import CanaryConfig
    from fabricguard.controller.reconcile import reconcile
    from fabricguard.doctor.snapshot import snapshot_from_lists
    from fabricguard.profile.loader import loads_profile

    prof = loads_profile(PROFILE.replace("    canary: {interval: 10m, pendingTimeout: 3m, runTimeout: 15m}\n",
                                         "    canary: {enabled: false}\n"))
    snap = snapshot_from_lists(gen.incident("production"))
    res = reconcile(snap, prof, NOW, CanaryConfig("fabricguard-system", CANARY_IMAGE, None))
    s = res.pools["gh200-roce"]
    assert s.canary is False and s.ready is False and "daemonset-never-ready" in s.root_cause
    assert res.exit_code == 1 and res.summary()["pools"]["gh200-roce"]["ready"] is False
    # ... and the same snapshot after the fix is validated, by every reader alike.
    fixed = reconcile(snapshot_from_lists(gen.incident("production", fixed=True)), prof, NOW,
                      CanaryConfig("fabricguard-system", CANARY_IMAGE, None))
    assert fixed.pools["gh200-roce"].ready is True and fixed.exit_code == 0, fixed.findings


async def test_once_writes_the_pass_metrics_for_node_exporter(cluster, profile_path, lustre, tmp_path) -> None:
    """A CronJob's ``--once`` feeds Prometheus through node-exporter's textfile collector, with the same
    validated gauge as the exit code."""
    from prometheus_client.parser import text_string_to_metric_families

    _k8s, kc = cluster
    prom = tmp_path / "textfile" / "fabricguard.prom"
    prom.parent.mkdir()
    rc, _doc = await run_once(kc, profile_path, NOW, lustre, "--metrics-textfile", str(prom))
    assert rc == 1
    families = {f.name: f for f in text_string_to_metric_families(prom.read_text())}
    (validated,) = [s for s in families["fabricguard_pool_fabric_validated"].samples if s.labels["pool"] == "gh200-roce"]
    assert validated.value == 0
    assert not list(prom.parent.glob(".*.tmp"))  # replaced atomically, nothing left behind
    before = prom.stat().st_mtime_ns
    await run_once(kc, profile_path, NOW + timedelta(seconds=30), lustre, "--metrics-textfile", str(prom))
    assert prom.stat().st_mtime_ns >= before
