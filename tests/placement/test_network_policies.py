"""The install's NetworkPolicies: every serving port of fabricguard's own pods is reached by who must reach it
(the scrapers of ``--monitoring``, the API server for the webhook, the kubelet on the pod's node) and by no tenant
pod (issue 25: any pod could hold the controller's :8080 with 1,005 idle connections). Decided by
``tests/netpolicy_support.py``, a model of the API's NetworkPolicy semantics (no network plugin runs here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from typer.testing import CliRunner

from fabricguard import names
from fabricguard.cli import app
from fabricguard.placement import install
from fabricguard.profile import load_profile
from kube_support import ROOT
from netpolicy_support import Source, allowed

PROFILE = sorted((ROOT / "examples" / "profiles").glob("*.yaml"))[0]
DIGEST = "@sha256:" + "ab" * 32
IMAGE = f"registry.example.com/fabricguard:0.1.0{DIGEST}"
NS = "fabricguard-system"
APISERVER = "172.16.0.0/28"

PROMETHEUS = Source("monitoring", {"app.kubernetes.io/name": "prometheus", "prometheus": "kube-prometheus"})
GMP = Source("gmp-system", {"app.kubernetes.io/name": "collector"})
GMP_AUTOPILOT = Source("gke-gmp-system", {"app.kubernetes.io/name": "collector"})
TENANT = Source("team-a", {"app": "trainer"})
# A tenant who names a pod "collector" in their own namespace, or "prometheus": labels alone admit nothing.
TENANT_AS_COLLECTOR = Source("team-a", {"app.kubernetes.io/name": "collector"})
OWN_NAMESPACE = Source(NS, {"app": "anything"})
KUBELET = Source(own_node=True)
API_SERVER = Source(ip="172.16.0.5")


def objects(monitoring: str) -> list[dict[str, Any]]:
    profile = load_profile(PROFILE)
    comps = install.components(profile, PROFILE.read_text(), install.Options(
        image=IMAGE, agent_image=IMAGE.replace("fabricguard:", "fabricguard-agent:"),
        canary_image=IMAGE.replace("fabricguard:", "fabricguard-canary:"), monitoring=monitoring,
        apiserver_cidrs=(APISERVER,)))
    return [o for c in comps for o in c.objects]


def pods(objs: list[dict[str, Any]]) -> list[tuple[str, dict[str, str], dict[str, int]]]:
    """(name, pod labels, named container ports) of every pod template fabricguard runs long-lived."""
    out = []
    for o in objs:
        if o["kind"] in ("Deployment", "DaemonSet"):
            tpl = o["spec"]["template"]
            ports = {p["name"]: p["containerPort"] for c in tpl["spec"]["containers"] for p in c.get("ports", [])}
            out.append((o["metadata"]["name"], tpl["metadata"]["labels"], ports))
    return out


def metrics_port(ports: dict[str, int]) -> int:
    return ports.get("metrics") or ports["health"]


@pytest.mark.parametrize("monitoring,scrapers,others", [
    ("prometheus-operator", [PROMETHEUS], [GMP]),
    ("gmp", [GMP, GMP_AUTOPILOT], [PROMETHEUS]),
    ("none", [], [PROMETHEUS, GMP]),
])
def test_only_scrapers_and_kubelet_reach_metrics_ports(monitoring: str, scrapers: list[Source],
                                                       others: list[Source]) -> None:
    objs = objects(monitoring)
    policies = [o for o in objs if o["kind"] == "NetworkPolicy"]
    served = pods(objs)
    assert {n for n, _l, _p in served} >= {"fabricguard-admission", "fabricguard-controller"}
    assert any(n.startswith(names.AGENT_NAME) for n, _l, _p in served)
    for name, labels, ports in served:
        port = metrics_port(ports)
        for src in [KUBELET, *scrapers]:
            assert allowed(policies, NS, labels, port, src), (name, port, src)
        for src in [TENANT, TENANT_AS_COLLECTOR, OWN_NAMESPACE, *others]:
            assert not allowed(policies, NS, labels, port, src), (name, port, src)
        for other in set(ports.values()) - {port}:  # the webhook's own port: the API server only
            assert allowed(policies, NS, labels, other, API_SERVER)
            for src in [TENANT, *scrapers]:
                assert not allowed(policies, NS, labels, other, src), (name, other, src)


def test_policies_validate_and_name_each_component() -> None:
    objs = objects("prometheus-operator")
    policies = [o for o in objs if o["kind"] == "NetworkPolicy"]
    assert sorted(p["metadata"]["name"] for p in policies) == [
        "fabricguard-admission", "fabricguard-agent", "fabricguard-controller"]
    for p in policies:
        kubernetes_validate.validate(p, kubernetes_validate.latest_version(), strict=True)
    # Egress stays open for the controller and the agent (they call the API server); the webhook calls nothing.
    assert {p["metadata"]["name"]: p["spec"]["policyTypes"] for p in policies} == {
        "fabricguard-admission": ["Ingress", "Egress"], "fabricguard-agent": ["Ingress"],
        "fabricguard-controller": ["Ingress"]}


def test_render_commands_take_monitoring(tmp_path: Path) -> None:
    import yaml

    for cmd in (["render", "agent", "-p", str(PROFILE), "--image", IMAGE],
                ["render", "webhook", "-p", str(PROFILE), "--image", IMAGE, "--apiserver-cidr", APISERVER]):
        r = CliRunner().invoke(app, [*cmd, "--monitoring", "gmp"])
        assert r.exit_code == 0, r.output
        [pol] = [o for o in yaml.safe_load_all(r.stdout) if o and o["kind"] == "NetworkPolicy"]
        assert "gmp-system" in str(pol["spec"]["ingress"])
        bad = CliRunner().invoke(app, [*cmd, "--monitoring", "datadog"])
        assert bad.exit_code == 3 and "--monitoring 'datadog'" in bad.output
