"""``readiness-taint-blocks-scale-from-zero`` on the cluster autoscaler's status ConfigMap as CA writes it.

The YAML form is the one cluster-autoscaler >= 1.30 writes (``clusterstate/api`` types: ``nodeGroups[].health``
with ``minSize``, ``maxSize``, ``nodeCounts.registered.total``); the text form the older releases (and some managed
offerings) still write. A GKE node group is a MIG URL ending in ``gke-<cluster>-<nodepool>-<hash>-grp``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fabricguard.doctor.model import Severity
from fabricguard.doctor.rules.autoscaler import RULE, parse_status, scale_from_zero_blocked
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.profile import load_profile, loads_profile
from kube_support import ROOT

GKE = ROOT / "examples" / "profiles" / "gke-a3-ultra.yaml"
NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)
MIG = "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-b/instanceGroups/"


def yaml_status(groups: list[tuple[str, int, int]]) -> str:
    """(name, minSize, registered) per group, in CA's YAML status."""
    lines = ["time: 2026-12-01 11:59:30.1 +0000 UTC", "autoscalerStatus: Running", "clusterWide:",
             "  health:", "    status: Healthy", "nodeGroups:"]
    for name, lo, reg in groups:
        lines += [f"- name: {name}", "  health:", "    status: Healthy", "    nodeCounts:", "      registered:",
                  f"        total: {reg}", f"        ready: {reg}", "      longUnregistered: 0",
                  "      unregistered: 0", f"    cloudProviderTarget: {reg}", f"    minSize: {lo}",
                  "    maxSize: 16", "  scaleUp:", "    status: NoActivity", "  scaleDown:",
                  "    status: NoCandidates"]
    return "\n".join(lines) + "\n"


def text_status(name: str, lo: int, reg: int) -> str:
    return ("Cluster-autoscaler status at 2026-12-01 11:59:30 +0000 UTC:\n"
            "Cluster-wide:\n  Health:      Healthy (ready=3 unready=0 notStarted=0 longNotStarted=0 registered=3 "
            "longUnregistered=0)\n\nNodeGroups:\n"
            f"  Name:        {name}\n"
            f"  Health:      Healthy (ready={reg} unready=0 notStarted=0 longNotStarted=0 registered={reg} "
            f"longUnregistered=0 cloudProviderTarget={reg} (minSize={lo}, maxSize=16))\n"
            "  ScaleUp:     NoActivity (ready=0 cloudProviderTarget=0)\n")


def snapshot(status: str) -> Snapshot:
    cm: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "cluster-autoscaler-status", "namespace": "kube-system"}, "data": {"status": status}}
    return Snapshot(objects=[cm])


def test_a_zero_node_pool_with_the_readiness_taint_is_critical_and_names_the_field() -> None:
    profile = load_profile(GKE)
    found = scale_from_zero_blocked(snapshot(yaml_status([(MIG + "gke-prod-a3u-pool-1-7f3c9a2e-grp", 0, 0),
                                                          (MIG + "gke-prod-default-pool-1a2b3c4d-grp", 1, 3)])),
                                    profile, NOW)
    assert [f.rule for f in found] == [RULE]
    (f,) = found
    assert f.severity is Severity.critical and f.pools == ["h200-rdma"]
    assert "at zero nodes now" in f.message and "readiness.k8s.io/fabric-unverified" in f.message
    assert "spec.pools[0].readinessTaintPrefix: startup-taint.cluster-autoscaler.kubernetes.io/" in f.fix


def test_minimum_zero_with_nodes_is_a_warning_and_the_text_form_is_read() -> None:
    profile = load_profile(GKE)
    (f,) = scale_from_zero_blocked(snapshot(text_status("gke-prod-a3u-pool-1-7f3c9a2e-grp", 0, 4)), profile, NOW)
    assert f.severity is Severity.warning and "once the pool reaches zero" in f.message
    assert parse_status(text_status("g", 0, 4))[0].registered == 4


def test_no_finding_when_the_minimum_is_kept_the_group_is_another_pool_or_the_startup_prefix_is_used() -> None:
    profile = load_profile(GKE)
    assert scale_from_zero_blocked(snapshot(yaml_status([(MIG + "gke-prod-a3u-pool-1-7f3c9a2e-grp", 1, 1)])),
                                   profile, NOW) == []
    # a3u-pool-10 is not a3u-pool-1
    assert scale_from_zero_blocked(snapshot(yaml_status([(MIG + "gke-prod-a3u-pool-10-7f3c9a2e-grp", 0, 0)])),
                                   profile, NOW) == []
    startup = loads_profile(GKE.read_text().replace(
        "    nodeSelector: {cloud.google.com/gke-nodepool: a3u-pool-1}",
        "    nodeSelector: {cloud.google.com/gke-nodepool: a3u-pool-1}\n"
        "    readinessTaintPrefix: startup-taint.cluster-autoscaler.kubernetes.io/"))
    assert startup.spec.pools[0].bootstrap_taint == "startup-taint.cluster-autoscaler.kubernetes.io/fabric-unverified"
    assert scale_from_zero_blocked(snapshot(yaml_status([(MIG + "gke-prod-a3u-pool-1-7f3c9a2e-grp", 0, 0)])),
                                   startup, NOW) == []


def test_an_unreadable_status_says_nothing() -> None:
    profile = load_profile(GKE)
    for text in ("autoscalerStatus: [unclosed", "", "x" * (5 * 1024 * 1024)):
        assert scale_from_zero_blocked(snapshot(text), profile, NOW) == []
