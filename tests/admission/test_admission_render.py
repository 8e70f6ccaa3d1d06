"""Rendered webhook manifests: kubernetes-validate for built-in kinds, a structural check for cert-manager's."""

from __future__ import annotations

from typing import Any

import pytest
from admission_support import PROFILES, check

from fabricguard.admission.render import image_warnings, manifests

IMAGE = "ghcr.io/acme/fabricguard@sha256:" + "ab" * 32
CRD_KINDS = {"Issuer", "Certificate"}


@pytest.fixture(params=PROFILES, ids=[p.stem for p in PROFILES])
def rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return manifests(request.param.read_text(), IMAGE, "fg-system")


def by_kind(objs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [obj] = [o for o in objs if o["kind"] == kind]
    return obj


def test_builtin_kinds_pass_kubernetes_validate(rendered: list[dict[str, Any]]) -> None:
    checked = [o["kind"] for o in rendered if o["kind"] not in CRD_KINDS]
    for o in rendered:
        if o["kind"] not in CRD_KINDS:
            check(o)
    assert set(checked) == {"Namespace", "ServiceAccount", "ConfigMap", "Deployment", "PodDisruptionBudget",
                            "Service", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}


def test_cert_manager_objects_are_well_formed(rendered: list[dict[str, Any]]) -> None:
    # kubernetes-validate has no cert-manager schemas: check what cainjector and the webhook rely on.
    issuer = by_kind(rendered, "Issuer")
    cert = by_kind(rendered, "Certificate")
    assert issuer["apiVersion"] == cert["apiVersion"] == "cert-manager.io/v1"
    assert issuer["spec"] == {"selfSigned": {}}
    assert cert["spec"]["issuerRef"] == {"name": issuer["metadata"]["name"], "kind": "Issuer",
                                         "group": "cert-manager.io"}
    assert "fabricguard-admission.fg-system.svc" in cert["spec"]["dnsNames"]
    dep = by_kind(rendered, "Deployment")
    [tls] = [v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "tls"]
    assert tls["secret"]["secretName"] == cert["spec"]["secretName"]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        ann = by_kind(rendered, kind)["metadata"]["annotations"]
        assert ann["cert-manager.io/inject-ca-from"] == f"fg-system/{cert['metadata']['name']}"


def test_webhook_configurations(rendered: list[dict[str, Any]]) -> None:
    svc = by_kind(rendered, "Service")
    for kind, path in (("MutatingWebhookConfiguration", "/mutate"), ("ValidatingWebhookConfiguration", "/validate")):
        [hook] = by_kind(rendered, kind)["webhooks"]
        assert hook["failurePolicy"] == "Fail"
        assert hook["timeoutSeconds"] == 5
        assert hook["sideEffects"] == "None"
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["namespaceSelector"] == {"matchLabels": {"fabricguard.io/enabled": "true"}}
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
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    # It reads nothing from the API server: no token, and no Role or binding at all.
    assert spec["automountServiceAccountToken"] is False
    assert not {o["kind"] for o in rendered} & {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}
    assert "--host" in c["args"] and c["args"][c["args"].index("--host") + 1] == "0.0.0.0"


@pytest.mark.parametrize(("image", "warns"), [
    (IMAGE, False),
    ("ghcr.io/acme/fabricguard:0.1.0", True),
    ("ghcr.io/acme/fabricguard", True),
    ("localhost:5000/fabricguard", True),
    ("ghcr.io/acme/fabricguard@sha256:short", True),
])
def test_image_reference_warnings(image: str, warns: bool) -> None:
    assert bool(image_warnings(image)) == warns
