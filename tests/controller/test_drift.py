"""Drift as an alert: staging publishes its snapshot into production's cluster; production's controller diffs
against it on every pass, exports fabricguard_drift_findings, and promtool fires the alert (kmock, real HTTP)."""

from __future__ import annotations

import asyncio
import base64
import gzip
import os
from pathlib import Path

import pytest
from controller_support import NOW, NS, PROFILE, RESOURCE, admin_kubeconfig, gen, kubeconfig, live
from kmock import KubernetesEmulator, Server
from promtool_support import run_promtool_tests, series_from_exposition
from typer.testing import CliRunner

from fabricguard.cli import app
from fabricguard.controller.alerts import rule_groups
from fabricguard.controller.kube import controller_permissions, list_cluster
from fabricguard.controller.metrics import Metrics
from fabricguard.controller.runner import RunConfig, run_pass
from fabricguard.doctor.diff import drift_scope
from fabricguard.doctor.reference import (
    DATA_KEY,
    MAX_BYTES,
    ReferenceError,
    configmap,
    decode,
    encode,
    from_configmap,
    parse_target,
)
from fabricguard.doctor.snapshot import snapshot_from_lists
from fabricguard.kube import Kube
from fabricguard.profile import loads_profile

PROF = loads_profile(PROFILE)
DS = ("DaemonSet", "network-operator", "rdma-shared-dp-ds")


def test_reference_round_trip_keeps_what_drift_compares() -> None:
    staging = snapshot_from_lists(gen.incident("staging"))
    data = encode(staging, drift_scope([PROF]))
    back = decode(data, "test")
    kinds = {o["kind"] for o in back.objects}
    assert "DaemonSet" in kinds and "Pod" not in kinds and "Node" not in kinds  # only the diff's scope
    (ds,) = [o for o in back.objects if o["kind"] == "DaemonSet" and o["metadata"]["name"] == DS[2]]
    assert "status" not in ds and "uid" not in ds["metadata"]
    cm = configmap("staging-reference", "fabricguard-system", data, "staging", NOW)
    ref = from_configmap(cm)
    assert ref.environment == "staging" and ref.published == "2025-09-30T12:00:00Z"
    assert len(ref.snapshot.objects) == len(back.objects)


@pytest.mark.parametrize(("cm", "message"), [
    ({"metadata": {"name": "r", "namespace": "n"}}, "has no binaryData"),
    ({"metadata": {"name": "r", "namespace": "n"}, "binaryData": {DATA_KEY: "%%%"}}, "not base64"),
    ({"metadata": {"name": "r", "namespace": "n"},
      "binaryData": {DATA_KEY: base64.b64encode(b"plain").decode()}}, "not a fabricguard reference"),
    ({"metadata": {"name": "r", "namespace": "n"},
      "binaryData": {DATA_KEY: base64.b64encode(gzip.compress(b"[]")).decode()}}, "no items"),
])
def test_a_broken_reference_says_what_is_wrong(cm: dict, message: str) -> None:
    with pytest.raises(ReferenceError, match=message):
        from_configmap(cm)


def test_targets_and_the_size_limit() -> None:
    assert parse_target("fabricguard-system/staging") == ("fabricguard-system", "staging")
    for bad in ("staging", "/x", "a/b/c", "a/"):
        with pytest.raises(ReferenceError):
            parse_target(bad)
    huge = snapshot_from_lists({"configmaps": {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}", "namespace": "kube-system"},
         "data": {"blob": base64.b64encode(os.urandom(4096)).decode()}}
        for i in range(400)]}})
    with pytest.raises(ReferenceError, match="over the"):
        encode(huge, drift_scope([PROF]))
    assert MAX_BYTES < 1024 * 1024


@pytest.mark.external
async def test_staging_publishes_production_alerts_on_the_drift(cluster, tmp_path: Path, lustre: Path) -> None:
    prod, prod_kc = cluster
    async with KubernetesEmulator() as stag, Server(stag) as server:
        stag["get /version/"] << {"major": "1", "minor": "31", "gitVersion": "v1.31.6"}
        for lst in gen.incident("staging").values():
            for obj in lst["items"]:
                m = obj["metadata"]
                stag.objects[RESOURCE[obj["kind"]], m.get("namespace"), m["name"]] = {
                    k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
        (tmp_path / "stag").mkdir()
        stag_kc = kubeconfig(tmp_path / "stag", str(server.url).rstrip("/"))
        r = await asyncio.to_thread(CliRunner().invoke, app, [
            "snapshot", str(tmp_path / "staging"), "--kubeconfig", stag_kc,
            "--publish", "fabricguard-system/staging-reference", "--publish-kubeconfig", admin_kubeconfig(prod_kc),
            "--environment", "staging"])
        assert r.exit_code == 0, r.output
        assert "published the staging reference" in r.stdout
    (cm,) = [c for c in live(prod, "v1/configmaps") if c["metadata"]["name"] == "staging-reference"]
    assert cm["metadata"]["annotations"]["fabricguard.io/reference-environment"] == "staging"

    cfg = RunConfig(PROF, lustre_root=lustre, kubeconfig=prod_kc, image="x", reference=("fabricguard-system",
                                                                                         "staging-reference"))
    rep = await run_pass(cfg, NOW, act=False)
    assert not [e for e in rep.errors if "reference" in e]
    drifted = {(f.objects[0].kind, f.objects[0].namespace, f.objects[0].name): f for f in rep.result.drift}
    f = drifted[DS]
    assert "image" in f.message and "staging has" in f.message and "this cluster has" in f.message
    metrics = Metrics()
    metrics.observe(PROF, rep.result, rep.seconds, 0)
    labels = {"kind": DS[0], "namespace": DS[1], "name": DS[2]}
    assert (metrics.registry.get_sample_value("fabricguard_drift_findings", labels) or 0) >= 1

    series = [s for s in series_from_exposition(metrics.exposition().decode())
              if s["series"].startswith("fabricguard_drift_findings")]
    r2 = run_promtool_tests(tmp_path, rule_groups(PROF), [{
        "interval": "1m", "input_series": series,
        "alert_rule_test": [
            {"eval_time": "20m", "alertname": "FabricguardDriftFromReference", "exp_alerts": []},
            {"eval_time": "31m", "alertname": "FabricguardDriftFromReference",
             "exp_alerts": [{"exp_labels": {"severity": "warning", **lbl}} for lbl in _drift_labels(series)]},
        ]}])
    assert r2.returncode == 0, r2.stdout + r2.stderr

    # Resolved: with the reference equal to this cluster, the series go away (no stale alert).
    kube = await Kube.connect(prod_kc, permissions=controller_permissions(NS, PROF))
    same = encode(await list_cluster(kube, PROF, NS), drift_scope([PROF]))
    await kube.close()
    prod.objects["v1/configmaps", "fabricguard-system", "staging-reference"].patch(
        {"binaryData": {DATA_KEY: base64.b64encode(same).decode()}})
    rep = await run_pass(cfg, NOW, act=False)
    metrics.observe(PROF, rep.result, rep.seconds, 0)
    assert rep.result.drift == []
    assert metrics.registry.get_sample_value("fabricguard_drift_findings", labels) is None


def _drift_labels(series: list[dict]) -> list[dict[str, str]]:
    out = []
    for s in series:
        body = s["series"].split("{", 1)[1].rstrip("}")
        out.append(dict(part.split("=", 1) for part in body.split(",")))
    # Prometheus drops a label whose value is empty (a cluster-scoped object has no namespace).
    return [{k: v.strip('"') for k, v in d.items() if v.strip('"')} for d in out]


async def test_a_missing_reference_is_an_error_line_not_a_crash(cluster, lustre: Path) -> None:
    _, kc = cluster
    cfg = RunConfig(PROF, lustre_root=lustre, kubeconfig=kc, image="x", reference=("fabricguard-system", "nope"))
    rep = await run_pass(cfg, NOW, act=False)
    assert any("does not exist" in e for e in rep.errors) and rep.result.drift == []
