"""NetworkPolicies of fabricguard's own serving ports: who may connect, and nobody else.

The controller's ``:8080``, the agent's ``:9400`` and the webhook's health port serve ``/metrics`` and
``/healthz``. Any pod that reaches them can hold connections open or scrape what it should not, so each is
admitted only from the scrapers of the chosen ``--monitoring``:

- ``prometheus-operator``: Prometheus pods in any namespace (the operator labels every Prometheus pod
  ``app.kubernetes.io/name: prometheus``; kube-prometheus-stack's release name varies, its Prometheus label does
  not);
- ``gmp``: GKE Managed Prometheus collectors (``app.kubernetes.io/name: collector``) in ``gmp-system`` (Standard)
  or ``gke-gmp-system`` (Autopilot);
- ``none``: no scraper at all.

The kubelet needs no rule: its probes come from the pod's own node, and traffic from the node a pod runs on is
always allowed whatever the policy says (Kubernetes NetworkPolicy semantics). Egress is not restricted here: the
controller and the agent call the API server, whose address the policy cannot name on every provider.
"""

from __future__ import annotations

from typing import Any

from fabricguard import names

MONITORING = ("prometheus-operator", "gmp", "none")
PROMETHEUS_POD = {names.LABEL_APP_NAME: "prometheus"}
GMP_COLLECTOR_POD = {names.LABEL_APP_NAME: "collector"}
GMP_NAMESPACES = ("gmp-system", "gke-gmp-system")
API = "networking.k8s.io/v1"


def scraper_peers(monitoring: str) -> list[dict[str, Any]]:
    """The NetworkPolicy peers that scrape metrics under ``monitoring`` (empty for ``none``)."""
    if monitoring == "prometheus-operator":
        return [{"namespaceSelector": {}, "podSelector": {"matchLabels": dict(PROMETHEUS_POD)}}]
    if monitoring == "gmp":
        return [{"namespaceSelector": {"matchExpressions": [
                    {"key": names.LABEL_NAMESPACE_NAME, "operator": "In", "values": list(GMP_NAMESPACES)}]},
                 "podSelector": {"matchLabels": dict(GMP_COLLECTOR_POD)}}]
    if monitoring == "none":
        return []
    raise ValueError(f"--monitoring {monitoring!r}: use one of {', '.join(MONITORING)}")


def scrape_rule(ports: list[int], monitoring: str) -> list[dict[str, Any]]:
    """The ingress rules that admit the scrapers to ``ports``: none at all for ``none`` (a rule without
    ``from`` would admit every source)."""
    peers = scraper_peers(monitoring)
    if not peers:
        return []
    return [{"from": peers, "ports": [{"protocol": "TCP", "port": p} for p in ports]}]


def metrics_policy(meta: dict[str, Any], selector: dict[str, str], ports: list[int],
                   monitoring: str) -> dict[str, Any]:
    """An ingress-only policy for a component whose only listener is its metrics/health port."""
    return {"apiVersion": API, "kind": "NetworkPolicy", "metadata": meta,
            "spec": {"podSelector": {"matchLabels": dict(selector)}, "policyTypes": ["Ingress"],
                     "ingress": scrape_rule(ports, monitoring)}}
