"""Manifests that install the admission webhook: ``fabricguard render webhook --profile P --image REF``.

Rendered: a ServiceAccount (no API token: the webhook reads nothing from the API server, so it is bound to no
Role at all, which is the least privilege there is), a ConfigMap with the profile, a Deployment of 2 replicas
spread over nodes with probes, resource requests and limits and a locked-down security context, a
PodDisruptionBudget, a Service, a cert-manager self-signed Issuer and serving Certificate, and the Mutating and
Validating webhook configurations (opt-in namespaces only, kube-system and the webhook's own namespace excluded
by matchConditions, ``failurePolicy: Fail``, ``timeoutSeconds: 5``, ``sideEffects: None``; the mutating one with
``reinvocationPolicy: IfNeeded``), whose CA bundle cert-manager's cainjector fills in.
"""

from __future__ import annotations

from typing import Any

import yaml

from fabricguard.imageref import pinning_warnings

NAME = "fabricguard-admission"
ENABLED_LABEL = "fabricguard.io/enabled"
PORT = 8443
PROFILE_KEY = "profile.yaml"


RULES = [
    {"apiGroups": ["jobset.x-k8s.io"], "apiVersions": ["v1alpha2"], "resources": ["jobsets"]},
    {"apiGroups": ["trainer.kubeflow.org"], "apiVersions": ["v1alpha1"], "resources": ["trainjobs"]},
    {"apiGroups": ["batch"], "apiVersions": ["v1"], "resources": ["jobs"]},
    {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]},
]


def image_warnings(image: str) -> list[str]:
    """Why an image reference is not reproducible (empty for ``repo@sha256:<digest>``)."""
    return pinning_warnings(image)


def _labels() -> dict[str, str]:
    return {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "fabricguard",
            "app.kubernetes.io/component": "admission-webhook"}


def _webhook(kind: str, namespace: str, path: str) -> dict[str, Any]:
    hook: dict[str, Any] = {
        "name": f"{kind}.admission.fabricguard.io",
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"service": {"namespace": namespace, "name": NAME, "path": path, "port": 443}},
        "rules": [{**r, "operations": ["CREATE"], "scope": "Namespaced"} for r in RULES],
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "sideEffects": "None",
        "timeoutSeconds": 5,
        "namespaceSelector": {"matchLabels": {ENABLED_LABEL: "true"}},
        "matchConditions": [
            {"name": "not-kube-system", "expression": "request.namespace != 'kube-system'"},
            {"name": "not-own-namespace", "expression": f"request.namespace != '{namespace}'"},
        ],
    }
    if kind == "mutate":
        hook["reinvocationPolicy"] = "IfNeeded"
    return hook


def manifests(profile_text: str, image: str, namespace: str = "fabricguard-system") -> list[dict[str, Any]]:
    labels = _labels()
    meta = {"name": NAME, "namespace": namespace, "labels": labels}
    cert_name = f"{NAME}-serving"
    secret = f"{NAME}-tls"
    svc_dns = [f"{NAME}.{namespace}.svc", f"{NAME}.{namespace}.svc.cluster.local"]
    inject = {"cert-manager.io/inject-ca-from": f"{namespace}/{cert_name}"}
    https_probe = {"scheme": "HTTPS", "port": "https"}
    container = {
        "name": "webhook",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": ["admission", "serve", "--profile", f"/etc/fabricguard/{PROFILE_KEY}",
                 "--cert", "/etc/fabricguard/tls/tls.crt", "--key", "/etc/fabricguard/tls/tls.key",
                 "--host", "0.0.0.0", "--port", str(PORT)],
        "ports": [{"name": "https", "containerPort": PORT, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/readyz", **https_probe}, "periodSeconds": 5,
                           "failureThreshold": 2},
        "livenessProbe": {"httpGet": {"path": "/healthz", **https_probe}, "periodSeconds": 10,
                          "failureThreshold": 3, "timeoutSeconds": 2},
        "startupProbe": {"httpGet": {"path": "/healthz", **https_probe}, "periodSeconds": 1,
                         "failureThreshold": 30},
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                      "limits": {"cpu": "1", "memory": "256Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [
            {"name": "tls", "mountPath": "/etc/fabricguard/tls", "readOnly": True},
            {"name": "profile", "mountPath": f"/etc/fabricguard/{PROFILE_KEY}", "subPath": PROFILE_KEY,
             "readOnly": True},
        ],
    }
    pod_labels = dict(labels)
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
        "spec": {
            "replicas": 2,
            "revisionHistoryLimit": 3,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "serviceAccountName": NAME,
                    "automountServiceAccountToken": False,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "topologySpreadConstraints": [{
                        "maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchLabels": {"app.kubernetes.io/name": NAME}}}],
                    "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                        "weight": 100, "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": NAME}}}}]}},
                    "containers": [container],
                    "volumes": [
                        {"name": "tls", "secret": {"secretName": secret}},
                        {"name": "profile", "configMap": {"name": f"{NAME}-profile"}},
                    ],
                },
            },
        },
    }
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": labels}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta, "automountServiceAccountToken": False},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {**meta, "name": f"{NAME}-profile"}, "data": {PROFILE_KEY: profile_text}},
        deployment,
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta,
         "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": meta,
         "spec": {"selector": {"app.kubernetes.io/name": NAME},
                  "ports": [{"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}]}},
        {"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
         "metadata": {**meta, "name": f"{NAME}-selfsigned"}, "spec": {"selfSigned": {}}},
        {"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
         "metadata": {**meta, "name": cert_name},
         "spec": {"secretName": secret, "dnsNames": [f"{NAME}.{namespace}", *svc_dns],
                  "duration": "2160h", "renewBefore": "360h",
                  "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
                  "usages": ["server auth", "digital signature", "key encipherment"],
                  "issuerRef": {"name": f"{NAME}-selfsigned", "kind": "Issuer", "group": "cert-manager.io"}}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
         "metadata": {"name": NAME, "labels": labels, "annotations": inject},
         "webhooks": [_webhook("mutate", namespace, "/mutate")]},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": NAME, "labels": labels, "annotations": inject},
         "webhooks": [_webhook("validate", namespace, "/validate")]},
    ]


def to_yaml(objs: list[dict[str, Any]]) -> str:
    head = ("# fabricguard admission webhook. Needs cert-manager (Issuer/Certificate, CA injection).\n"
            f"# Opt a namespace in with: kubectl label namespace <ns> {ENABLED_LABEL}=true\n")
    return head + yaml.safe_dump_all(objs, sort_keys=False, default_flow_style=False, width=120)
