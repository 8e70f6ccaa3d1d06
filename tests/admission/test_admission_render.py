"""Rendered webhook manifests: kubernetes-validate for built-in kinds, a structural check for cert-manager's."""

from __future__ import annotations

from typing import Any

import pytest
from admission_support import PROFILES, check

from fabricguard.admission.render import image_warnings, manifests

IMAGE = "ghcr.io/acme/fabricguard@sha256:" + "ab" * 32
CRD_KINDS = {"Issuer", "Certificate"}
CIDR = "172.16.0.32/28"


@pytest.fixture(params=PROFILES, ids=[p.stem for p in PROFILES])
def rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return manifests(request.param.read_text(), IMAGE, "fg-system", [CIDR])


def by_kind(objs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [obj] = [o for o in objs if o["kind"] == kind]
    return obj


def by_name(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    [obj] = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    return obj


def test_builtin_kinds_pass_kubernetes_validate(rendered: list[dict[str, Any]]) -> None:
    checked = [o["kind"] for o in rendered if o["kind"] not in CRD_KINDS]
    for o in rendered:
        if o["kind"] not in CRD_KINDS:
            check(o)
    assert set(checked) == {"ServiceAccount", "ConfigMap", "Deployment", "PodDisruptionBudget",
                            "Service", "NetworkPolicy", "MutatingWebhookConfiguration",
                            "ValidatingWebhookConfiguration"}


def test_cert_manager_ca_chain(rendered: list[dict[str, Any]]) -> None:
    # kubernetes-validate has no cert-manager schemas: check what cainjector and the webhook rely on.
    selfsigned = by_name(rendered, "Issuer", "fabricguard-admission-selfsigned")
    ca_cert = by_name(rendered, "Certificate", "fabricguard-admission-ca")
    ca_issuer = by_name(rendered, "Issuer", "fabricguard-admission-ca")
    serving = by_name(rendered, "Certificate", "fabricguard-admission-serving")
    ref = {"kind": "Issuer", "group": "cert-manager.io"}
    # self-signed Issuer -> long-lived CA certificate -> CA Issuer -> short-lived serving certificate
    assert selfsigned["spec"] == {"selfSigned": {}}
    assert ca_cert["spec"]["isCA"] is True
    assert ca_cert["spec"]["issuerRef"] == {"name": "fabricguard-admission-selfsigned", **ref}
    assert ca_issuer["spec"] == {"ca": {"secretName": ca_cert["spec"]["secretName"]}}
    assert serving["spec"]["issuerRef"] == {"name": "fabricguard-admission-ca", **ref}
    assert "isCA" not in serving["spec"]
    hours = {c["metadata"]["name"]: int(c["spec"]["duration"].rstrip("h")) for c in (ca_cert, serving)}
    assert hours["fabricguard-admission-ca"] >= 10 * hours["fabricguard-admission-serving"]
    assert ca_cert["spec"]["privateKey"]["rotationPolicy"] == "Never"
    assert "fabricguard-admission.fg-system.svc" in serving["spec"]["dnsNames"]
    dep = by_kind(rendered, "Deployment")
    [tls] = [v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "tls"]
    assert tls["secret"]["secretName"] == serving["spec"]["secretName"]
    # The bundle is the CA, which serving-certificate renewals never change.
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        ann = by_kind(rendered, kind)["metadata"]["annotations"]
        assert ann["cert-manager.io/inject-ca-from"] == "fg-system/fabricguard-admission-ca"


def test_network_policy_admits_only_the_api_server_to_the_webhook_port(rendered: list[dict[str, Any]]) -> None:
    pol = by_kind(rendered, "NetworkPolicy")["spec"]
    dep = by_kind(rendered, "Deployment")
    assert pol["podSelector"]["matchLabels"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    assert pol["policyTypes"] == ["Ingress", "Egress"] and pol["egress"] == []
    webhook, health = pol["ingress"]
    # 10250: what a GKE private cluster's control plane reaches without a firewall rule (issue 24)
    assert webhook == {"ports": [{"protocol": "TCP", "port": 10250}], "from": [{"ipBlock": {"cidr": CIDR}}]}
    dep = by_kind(manifests("kind: x", IMAGE, port=8443), "Deployment")
    [c] = dep["spec"]["template"]["spec"]["containers"]
    assert c["ports"][0]["containerPort"] == 8443 and c["args"][c["args"].index("--port") + 1] == "8443"
    assert health["ports"] == [{"protocol": "TCP", "port": 8081}]
    open_policy = by_kind(manifests("kind: x", IMAGE), "NetworkPolicy")["spec"]["ingress"][0]
    assert "from" not in open_policy


def test_webhook_configurations(rendered: list[dict[str, Any]]) -> None:
    svc = by_kind(rendered, "Service")
    for kind, path in (("MutatingWebhookConfiguration", "/mutate"), ("ValidatingWebhookConfiguration", "/validate")):
        [hook] = by_kind(rendered, kind)["webhooks"]
        assert hook["failurePolicy"] == "Fail"
        assert hook["timeoutSeconds"] == 5
        assert hook["sideEffects"] == "None"
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["namespaceSelector"] == {
            "matchLabels": {"fabricguard.io/enabled": "true"},
            "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                  "values": ["kube-system", "fg-system"]}]}
        exprs = [c["expression"] for c in hook["matchConditions"]]
        assert "request.namespace != 'kube-system'" in exprs
        assert "request.namespace != 'fg-system'" in exprs
        assert hook["clientConfig"]["service"] == {"namespace": "fg-system", "name": svc["metadata"]["name"],
                                                   "path": path, "port": 443}
        resources = {(g, r) for rule in hook["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
        assert resources == {("jobset.x-k8s.io", "jobsets"), ("trainer.kubeflow.org", "trainjobs"),
                             ("batch", "jobs"), ("", "pods")}
        assert all(rule["operations"] == ["CREATE"] for rule in hook["rules"])
        assert (hook.get("reinvocationPolicy") == "IfNeeded") == (kind == "MutatingWebhookConfiguration")


def test_deployment_is_highly_available_and_least_privileged(rendered: list[dict[str, Any]]) -> None:
    dep = by_kind(rendered, "Deployment")
    spec = dep["spec"]["template"]["spec"]
    [c] = spec["containers"]
    assert dep["spec"]["replicas"] == 2
    assert by_kind(rendered, "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    assert c["image"] == IMAGE
    assert c["resources"]["limits"]["memory"] and c["resources"]["requests"]["cpu"]
    # Probes on the plain-HTTP health port, which the server really serves (see --health-port in the args).
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert c["args"][c["args"].index("--health-port") + 1] == str(ports["health"])
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz"), ("startupProbe", "/healthz")):
        assert c[probe]["httpGet"] == {"path": path, "scheme": "HTTP", "port": "health"}
    # Drain: the preStop delay, the server's drain and a grace period that covers both.
    prestop = int(c["lifecycle"]["preStop"]["exec"]["command"][1])
    drain = sum(float(c["args"][c["args"].index(f) + 1]) for f in ("--shutdown-delay", "--shutdown-timeout"))
    assert spec["terminationGracePeriodSeconds"] > prestop + drain
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert c["resources"]["requests"]["memory"] and c["resources"]["limits"]["memory"]
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    # It reads nothing from the API server: no token, and no Role or binding at all.
    assert spec["automountServiceAccountToken"] is False
    assert not {o["kind"] for o in rendered} & {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}
    assert "--host" in c["args"] and c["args"][c["args"].index("--host") + 1] == "0.0.0.0"


def test_profile_checksum_rolls_the_pods_on_a_profile_change() -> None:
    text = PROFILES[0].read_text()
    a = by_kind(manifests(text, IMAGE), "Deployment")["spec"]["template"]["metadata"]["annotations"]
    b = by_kind(manifests(text + "\n# changed\n", IMAGE), "Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert a["fabricguard.io/profile-sha256"] != b["fabricguard.io/profile-sha256"]
    assert a == by_kind(manifests(text, IMAGE), "Deployment")["spec"]["template"]["metadata"]["annotations"]


@pytest.mark.parametrize(("image", "warns"), [
    (IMAGE, False),
    ("ghcr.io/acme/fabricguard:0.1.0", True),
    ("ghcr.io/acme/fabricguard", True),
    ("localhost:5000/fabricguard", True),
    ("ghcr.io/acme/fabricguard@sha256:short", True),
])
def test_image_reference_warnings(image: str, warns: bool) -> None:
    assert bool(image_warnings(image)) == warns
