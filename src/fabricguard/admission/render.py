"""Manifests that install the admission webhook: ``fabricguard render webhook --profile P --image REF``.

Rendered: a ServiceAccount (no API token: the webhook reads nothing from the API server, so it is bound to no Role
at all, which is the least privilege there is; with DRA claim pools it lists ResourceClaimTemplates, and its
ClusterRole is built from the webhook's permission table, ``admission/templates.py``), a ConfigMap with the profile,
a Deployment of 2 replicas spread over nodes (``system-cluster-critical``, health probes on a plain-HTTP port,
memory sized from the measured peak under the request caps, a preStop delay and a grace period longer than the
server's drain, a checksum annotation of the profile so that a profile change rolls the pods, a locked-down security
context), a PodDisruptionBudget, a Service, a NetworkPolicy (only the API server reaches the webhook port, only the
scrapers of ``--monitoring`` and the kubelet reach the health port, nothing leaves), cert-manager objects for a
CA chain (a self-signed Issuer makes a long-lived CA, a CA Issuer signs the short-lived serving certificate, so
renewals of the serving certificate never change the CA bundle), and the
Mutating and Validating webhook configurations (opt-in namespaces only; kube-system and the webhook's own namespace
excluded by ``namespaceSelector`` on ``kubernetes.io/metadata.name`` and by ``matchConditions``; ``failurePolicy:
Fail``, ``timeoutSeconds: 5``, ``sideEffects: None``; the mutating one with ``reinvocationPolicy: IfNeeded``), whose
CA bundle cert-manager's cainjector fills in from the CA.
"""

from __future__ import annotations

import hashlib
from typing import Any

from fabricguard import kinds, names, yamlout
from fabricguard.admission.templates import WEBHOOK_GRANTS
from fabricguard.imageref import pinning_warnings
from fabricguard.netpolicy import scrape_rule
from fabricguard.rbac import rbac_rules

NAME = "fabricguard-admission"
ENABLED_LABEL = names.LABEL_ENABLED
# The container port the API server calls. 10250 by default: a GKE private cluster's control plane reaches nodes
# only on 443 and 10250 without a firewall rule (docs/install.md), and a webhook it cannot reach with
# failurePolicy Fail times out every pod create in opted-in namespaces. ``--webhook-port`` chooses another
# (8443 with the firewall rule); 443 would need NET_BIND_SERVICE for the non-root user.
PORT = 10250
HEALTH_PORT = 8081
PROFILE_KEY = "profile.yaml"
PROFILE_CHECKSUM = names.ANN_PROFILE_CHECKSUM
PRIORITY_CLASS = "system-cluster-critical"
# From bench/admission/README.md: 62 MiB resident at saturation with realistic reviews; 167 MiB at the peak of
# the worst case the caps allow (eight 3 MiB bodies of 40,000 GPU containers at once). Request: twice the
# steady state; limit: the worst-case peak with half again as headroom.
MEMORY_REQUEST = "128Mi"
MEMORY_LIMIT = "256Mi"
PRESTOP_SECONDS = 5  # endpoints are removed while the pod still answers
SHUTDOWN_DELAY = 5  # after SIGTERM: not ready, still answering
SHUTDOWN_TIMEOUT = 15  # then in-flight requests finish


# Every workload kind fabricguard admits (fabricguard.kinds), pods last.
RULES = [{"apiGroups": [k.group], "apiVersions": [k.version], "resources": [k.plural]}
         for k in sorted(kinds.KINDS, key=lambda k: k.kind == "Pod")]


def image_warnings(image: str) -> list[str]:
    """Why an image reference is not reproducible (empty for ``repo@sha256:<digest>``)."""
    return pinning_warnings(image)


def _labels() -> dict[str, str]:
    return {names.LABEL_APP_NAME: NAME, names.LABEL_APP_PART_OF: "fabricguard",
            names.LABEL_APP_COMPONENT: "admission-webhook"}


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
        # The name label is set by the API server on every namespace (1.21+); matchConditions need 1.30.
        "namespaceSelector": {"matchLabels": {ENABLED_LABEL: "true"}, "matchExpressions": [
            {"key": names.LABEL_NAMESPACE_NAME, "operator": "NotIn", "values": ["kube-system", namespace]}]},
        "matchConditions": [
            {"name": "not-kube-system", "expression": "request.namespace != 'kube-system'"},
            {"name": "not-own-namespace", "expression": f"request.namespace != '{namespace}'"},
        ],
    }
    if kind == "mutate":
        hook["reinvocationPolicy"] = "IfNeeded"
    return hook


def _network_policy_port(port: int) -> dict[str, Any]:
    return {"ports": [{"protocol": "TCP", "port": port}]}


def _network_policy(meta: dict[str, Any], apiserver_cidrs: list[str], *, api_egress: bool = False,
                    port: int = PORT, monitoring: str = "prometheus-operator") -> dict[str, Any]:
    webhook_from: list[dict[str, Any]] = [{"ipBlock": {"cidr": c}} for c in apiserver_cidrs]
    webhook_rule: dict[str, Any] = _network_policy_port(port)
    if webhook_from:
        webhook_rule["from"] = webhook_from
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": meta,
        "spec": {
            "podSelector": {"matchLabels": {names.LABEL_APP_NAME: NAME}},
            "policyTypes": ["Ingress", "Egress"],
            # Probes come from the kubelet on the pod's own node (always allowed), metrics from the scrapers of
            # --monitoring only: no other pod may hold the health port's connections.
            "ingress": [webhook_rule, *scrape_rule([HEALTH_PORT], monitoring)],
            # The webhook calls nothing, not even DNS; with DRA claim pools it lists ResourceClaimTemplates from
            # the API server (its in-cluster address is an IP: still no DNS).
            "egress": [_api_egress(apiserver_cidrs)] if api_egress else [],
        },
    }


def _api_egress(apiserver_cidrs: list[str]) -> dict[str, Any]:
    rule: dict[str, Any] = {"ports": [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 6443}]}
    if apiserver_cidrs:
        rule["to"] = [{"ipBlock": {"cidr": c}} for c in apiserver_cidrs]
    return rule


def manifests(profile_text: str, image: str, namespace: str = "fabricguard-system",
              apiserver_cidrs: list[str] | None = None,
              extra_mutating: list[dict[str, Any]] | None = None, *,
              claim_templates: bool = False, mode: str = "enforce", port: int = PORT,
              monitoring: str = "prometheus-operator", job_dir_image: str | None = None) -> list[dict[str, Any]]:
    """Every object that installs the webhook; ``apiserver_cidrs`` narrow the NetworkPolicy to the API server;
    ``extra_mutating``: further entries of the mutating configuration (the fabric DaemonSets' tolerations).
    ``job_dir_image``: the image of the job directory's init container where the profile names none (the node
    agent's in an install: already on every GPU node, ours, with the CLI; default: ``image``).

    ``claim_templates`` (a profile with DRA claim pools): the webhook lists ResourceClaimTemplates, so it gets a
    service-account token, a ClusterRole that lists them and an egress rule to the API server."""
    labels = _labels()
    meta = {"name": NAME, "namespace": namespace, "labels": labels}
    ca_name = f"{NAME}-ca"
    cert_name = f"{NAME}-serving"
    secret = f"{NAME}-tls"
    svc_dns = [f"{NAME}.{namespace}.svc", f"{NAME}.{namespace}.svc.cluster.local"]
    inject = {"cert-manager.io/inject-ca-from": f"{namespace}/{ca_name}"}
    health_probe = {"scheme": "HTTP", "port": "health"}
    container = {
        "name": "webhook",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": ["admission", "serve", "--profile", f"/etc/fabricguard/{PROFILE_KEY}",
                 "--cert", "/etc/fabricguard/tls/tls.crt", "--key", "/etc/fabricguard/tls/tls.key",
                 "--host", "0.0.0.0", "--port", str(port), "--health-port", str(HEALTH_PORT),
                 "--shutdown-delay", str(SHUTDOWN_DELAY), "--shutdown-timeout", str(SHUTDOWN_TIMEOUT),
                 "--mode", mode, "--job-dir-image", job_dir_image or image],
        "ports": [{"name": "https", "containerPort": port, "protocol": "TCP"},
                  {"name": "health", "containerPort": HEALTH_PORT, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/readyz", **health_probe}, "periodSeconds": 5,
                           "failureThreshold": 2},
        "livenessProbe": {"httpGet": {"path": "/healthz", **health_probe}, "periodSeconds": 10,
                          "failureThreshold": 3, "timeoutSeconds": 2},
        "startupProbe": {"httpGet": {"path": "/healthz", **health_probe}, "periodSeconds": 1,
                         "failureThreshold": 30},
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", str(PRESTOP_SECONDS)]}}},
        "resources": {"requests": {"cpu": "100m", "memory": MEMORY_REQUEST},
                      "limits": {"cpu": "1", "memory": MEMORY_LIMIT}},
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
        "apiVersion": names.APPS_API, "kind": "Deployment", "metadata": meta,
        "spec": {
            "replicas": 2,
            "revisionHistoryLimit": 3,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "selector": {"matchLabels": {names.LABEL_APP_NAME: NAME}},
            "template": {
                "metadata": {"labels": pod_labels, "annotations": {
                    PROFILE_CHECKSUM: hashlib.sha256(profile_text.encode()).hexdigest()}},
                "spec": {
                    "serviceAccountName": NAME,
                    "priorityClassName": PRIORITY_CLASS,
                    "terminationGracePeriodSeconds": PRESTOP_SECONDS + SHUTDOWN_DELAY + SHUTDOWN_TIMEOUT + 5,
                    "automountServiceAccountToken": claim_templates,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "nodeSelector": {names.LABEL_OS: "linux"},
                    "topologySpreadConstraints": [{
                        "maxSkew": 1, "topologyKey": names.LABEL_HOSTNAME,
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchLabels": {names.LABEL_APP_NAME: NAME}}}],
                    "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                        "weight": 100, "podAffinityTerm": {
                            "topologyKey": names.LABEL_HOSTNAME,
                            "labelSelector": {"matchLabels": {names.LABEL_APP_NAME: NAME}}}}]}},
                    "containers": [container],
                    "volumes": [
                        {"name": "tls", "secret": {"secretName": secret}},
                        {"name": "profile", "configMap": {"name": f"{NAME}-profile"}},
                    ],
                },
            },
        },
    }
    rbac = webhook_rbac(namespace) if claim_templates else []
    # No Namespace here: it has one owner, the install's namespace component (fabricguard render namespace).
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta,
         "automountServiceAccountToken": claim_templates},
        *rbac,
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {**meta, "name": f"{NAME}-profile"}, "data": {PROFILE_KEY: profile_text}},
        deployment,
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta,
         "spec": {"minAvailable": 1, "selector": {"matchLabels": {names.LABEL_APP_NAME: NAME}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": meta,
         "spec": {"selector": {names.LABEL_APP_NAME: NAME},
                  "ports": [{"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}]}},
        _network_policy(meta, apiserver_cidrs or [], api_egress=claim_templates, port=port, monitoring=monitoring),
        # The CA chain: a self-signed Issuer only makes the CA; the CA Issuer signs the serving certificate.
        {"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
         "metadata": {**meta, "name": f"{NAME}-selfsigned"}, "spec": {"selfSigned": {}}},
        {"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
         "metadata": {**meta, "name": ca_name},
         "spec": {"isCA": True, "commonName": f"{NAME} CA", "secretName": f"{NAME}-ca",
                  "duration": "87600h", "renewBefore": "720h",
                  # The same key across renewals: serving certificates signed before a renewal still verify.
                  "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Never"},
                  "issuerRef": {"name": f"{NAME}-selfsigned", "kind": "Issuer", "group": "cert-manager.io"}}},
        {"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
         "metadata": {**meta, "name": ca_name}, "spec": {"ca": {"secretName": f"{NAME}-ca"}}},
        {"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
         "metadata": {**meta, "name": cert_name},
         "spec": {"secretName": secret, "dnsNames": [f"{NAME}.{namespace}", *svc_dns],
                  "duration": "2160h", "renewBefore": "360h",
                  "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
                  "usages": ["server auth", "digital signature", "key encipherment"],
                  "issuerRef": {"name": ca_name, "kind": "Issuer", "group": "cert-manager.io"}}},
        {"apiVersion": names.ADMISSIONREGISTRATION_API, "kind": "MutatingWebhookConfiguration",
         "metadata": {"name": NAME, "labels": labels, "annotations": inject},
         "webhooks": [_webhook("mutate", namespace, "/mutate"), *(extra_mutating or [])]},
        {"apiVersion": names.ADMISSIONREGISTRATION_API, "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": NAME, "labels": labels, "annotations": inject},
         "webhooks": [_webhook("validate", namespace, "/validate")]},
    ]


def pod_monitor(namespace: str, release: str | None = None) -> dict[str, Any]:
    """The webhook's PodMonitor (Prometheus Operator): ``/metrics`` on its plain-HTTP health port. A fail-closed
    webhook nobody scrapes is down in silence (the alerts FabricguardWebhookDown/Errors/Slow read these series)."""
    labels = _labels()
    if release:
        labels["release"] = release
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
            "metadata": {"name": NAME, "namespace": namespace, "labels": labels},
            "spec": {"selector": {"matchLabels": {names.LABEL_APP_NAME: NAME}},
                     "namespaceSelector": {"matchNames": [namespace]},
                     "podMetricsEndpoints": [{"port": "health", "path": "/metrics", "interval": "30s"}]}}


def pod_monitoring(namespace: str) -> dict[str, Any]:
    """The GKE Managed Prometheus form of :func:`pod_monitor`."""
    return {"apiVersion": "monitoring.googleapis.com/v1", "kind": "PodMonitoring",
            "metadata": {"name": NAME, "namespace": namespace, "labels": _labels()},
            "spec": {"selector": {"matchLabels": {names.LABEL_APP_NAME: NAME}},
                     "endpoints": [{"port": "health", "path": "/metrics", "interval": "30s"}]}}


def webhook_rbac(namespace: str) -> list[dict[str, Any]]:
    """The webhook's ClusterRole (and Role in ``namespace``, for namespaced rows) with their bindings to its
    ServiceAccount, built from :data:`~fabricguard.admission.templates.WEBHOOK_GRANTS`: what its code calls."""
    labels = _labels()
    subjects = [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]
    out: list[dict[str, Any]] = []
    for kind, rules, meta in (
            ("ClusterRole", rbac_rules(WEBHOOK_GRANTS, "cluster"), {"name": NAME, "labels": labels}),
            ("Role", rbac_rules(WEBHOOK_GRANTS, "namespace"),
             {"name": NAME, "namespace": namespace, "labels": labels})):
        if not rules:
            continue
        out += [{"apiVersion": names.RBAC_API, "kind": kind, "metadata": meta, "rules": rules},
                {"apiVersion": names.RBAC_API, "kind": f"{kind}Binding", "metadata": meta,
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": NAME},
                 "subjects": subjects}]
    return out


def to_yaml(objs: list[dict[str, Any]]) -> str:
    head = ("# fabricguard admission webhook. Needs cert-manager (Issuer/Certificate, CA injection).\n"
            f"# Opt a namespace in with: kubectl label namespace <ns> {ENABLED_LABEL}=true\n"
            "# The NetworkPolicy admits the API server by --apiserver-cidr; see docs/admission.md per provider.\n")
    return head + yamlout.dump_all(objs, sort_keys=False, default_flow_style=False, width=120)
