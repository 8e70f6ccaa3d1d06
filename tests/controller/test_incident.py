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


def _our_check(wl: dict) -> dict:
    return next(c for c in wl["status"]["admissionChecks"] if c["name"] == "fabric-validated")


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
    ours = _our_check(wl)
    assert ours["state"] == "Pending"
    assert "pool gh200-roce" in ours["message"] and "unschedulable" in ours["message"]
    assert "Insufficient rdma/rdma_shared_device_a" in ours["message"]
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
    assert canaries(k8s) == []
    (fv,) = live(k8s, FVS)
    assert [r["outcome"] for r in fv["status"]["runs"]] == ["unschedulable"]


async def test_incident_alert_expression_holds_and_clears(cluster, profile_path, lustre, tmp_path) -> None:
    """The pass's own /metrics, fed to promtool: the unschedulable alert fires on the incident, not after recovery."""
    from controller_support import ROCE_LOGS, jobset_finishes, pods_run, ranks_wrote
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
    incident = series_from_exposition(text)

    # Recovery: the next canary passes over RoCE.
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
             "exp_alerts": [{"exp_labels": {"severity": "warning", "pool": "gh200-roce"}}]}]},
        {"interval": "1m", "input_series": recovered, "alert_rule_test": [
            {"eval_time": "5m", "alertname": "FabricguardCanaryUnschedulable", "exp_alerts": []},
            {"eval_time": "20m", "alertname": "FabricguardWorkloadsHeld", "exp_alerts": []}]},
    ])
    assert r.returncode == 0, r.stdout + r.stderr
