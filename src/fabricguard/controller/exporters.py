"""Scrape configuration for the signals the alerts and the job view read: ``fabricguard render exporters``.

fabricguard reuses the exporters a GPU platform already runs and renders only what ties them together:

- NVIDIA DCGM exporter (GPU operator; ``DCGM_FI_DEV_GPU_UTIL``, ``DCGM_FI_PROF_PIPE_TENSOR_ACTIVE``) and
  node-exporter (``node_infiniband_port_data_*_bytes_total`` from its InfiniBand collector, on by default on Linux;
  ``node_network_transmit_bytes_total``) each get a ServiceMonitor that relabels the pod's node name into ``node``,
  the label every per-node alert and the dashboard join on;
- the fabricguard node agent gets a PodMonitor (its RDMA port, Lustre client and FabricReady metrics, and
  ``fabricguard_agent_info{node,pool}``).

The selectors default to the GPU operator's and kube-prometheus-stack's Services; the options override them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from fabricguard import names
from fabricguard.agent.render import NAME as AGENT_NAME

NODE_RELABEL = [{"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node", "action": "replace"}]


@dataclass(frozen=True)
class ExporterTargets:
    dcgm_namespace: str = "gpu-operator"
    dcgm_labels: tuple[tuple[str, str], ...] = (("app", "nvidia-dcgm-exporter"),)
    dcgm_port: str = "gpu-metrics"
    node_exporter_namespace: str = "monitoring"
    node_exporter_labels: tuple[tuple[str, str], ...] = ((names.LABEL_APP_NAME, "prometheus-node-exporter"),)
    node_exporter_port: str = "http-metrics"
    agent_namespace: str = "fabricguard-system"


def _meta(name: str, namespace: str) -> dict[str, Any]:
    return {"name": name, "namespace": namespace,
            "labels": {names.LABEL_APP_PART_OF: "fabricguard", names.LABEL_APP_COMPONENT: "monitoring"}}


def monitors(t: ExporterTargets, namespace: str) -> list[dict[str, Any]]:
    """ServiceMonitors for DCGM exporter and node-exporter, a PodMonitor for the node agent; all label ``node``."""
    def service_monitor(name: str, ns: str, labels: tuple[tuple[str, str], ...], port: str,
                        honor: bool = False) -> dict[str, Any]:
        endpoint: dict[str, Any] = {"port": port, "interval": "30s", "relabelings": NODE_RELABEL}
        if honor:
            # DCGM exporter's own namespace/pod labels name the GPU's workload, not the exporter pod.
            endpoint["honorLabels"] = True
        return {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", "metadata": _meta(name, namespace),
                "spec": {"selector": {"matchLabels": dict(labels)}, "namespaceSelector": {"matchNames": [ns]},
                         "endpoints": [endpoint]}}

    return [
        service_monitor("fabricguard-dcgm-exporter", t.dcgm_namespace, t.dcgm_labels, t.dcgm_port, honor=True),
        service_monitor("fabricguard-node-exporter", t.node_exporter_namespace, t.node_exporter_labels,
                        t.node_exporter_port),
        {"apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
         "metadata": _meta("fabricguard-node-agent", namespace),
         "spec": {"selector": {"matchLabels": {names.LABEL_APP_NAME: AGENT_NAME}},
                  "namespaceSelector": {"matchNames": [t.agent_namespace]},
                  "podMetricsEndpoints": [{"port": "metrics", "interval": "30s", "relabelings": NODE_RELABEL}]}},
    ]


# Where DCGM exporter runs per platform (the selectors of its Service). GKE runs no GPU Operator: its managed DCGM
# metrics (GKE >= 1.30 with --enable-dcgm-metrics / monitoring DCGM package) go to Cloud Monitoring through Managed
# Prometheus, so on GKE there is nothing to scrape here and the GMP variant reads them as they are ([U]: the names
# of GKE's managed exporter are not in the reference; docs/install.md says how to check).
DCGM_PLATFORMS: dict[str, ExporterTargets | None] = {
    "gpu-operator": ExporterTargets(),
    "dcgm-exporter": ExporterTargets(dcgm_namespace="dcgm-exporter",
                                     dcgm_labels=((names.LABEL_APP_NAME, "dcgm-exporter"),), dcgm_port="metrics"),
    "gke": None,
}


def agent_monitors(namespace: str, agent_namespace: str | None = None) -> list[dict[str, Any]]:
    """Only the node agent's PodMonitor (the install renders the exporters' monitors separately, per platform)."""
    return [m for m in monitors(ExporterTargets(agent_namespace=agent_namespace or namespace), namespace)
            if m["kind"] == "PodMonitor"]


def gmp_monitors(namespace: str) -> list[dict[str, Any]]:
    """GKE Managed Prometheus: a PodMonitoring for the node agent (``node`` from the pod's node name)."""
    return [{"apiVersion": "monitoring.googleapis.com/v1", "kind": "PodMonitoring",
             "metadata": _meta("fabricguard-node-agent", namespace),
             "spec": {"selector": {"matchLabels": {names.LABEL_APP_NAME: AGENT_NAME}},
                      "endpoints": [{"port": "metrics", "interval": "30s"}],
                      "targetLabels": {"metadata": ["pod", "container", "node"]}}}]


# Controller series that carry the labels of the *objects* they describe (a job's namespace and name, a drifted
# object's namespace). Managed Prometheus protects ``namespace`` and ``job`` as target labels and has no
# honorLabels: those series arrive with ``exported_namespace``/``exported_job`` instead.
GMP_RENAMED = ("fabricguard_job_", "fabricguard_drift_")
_GMP_LABEL = re.compile(r"(?<![\w.$])(namespace|job)\b(?!\s*\()")


def gmp_expr(expr: str, *also: str) -> tuple[str, ...]:
    """``expr`` (and ``also``: its legend) with the job labels renamed, when it reads the controller's
    object-labelled series; unchanged otherwise."""
    if not any(m in expr for m in GMP_RENAMED):
        return (expr, *also)
    return tuple(_GMP_LABEL.sub(lambda m: f"exported_{m.group(1)}", s) for s in (expr, *also))


def gmp_relabel(rule: dict[str, Any]) -> dict[str, Any]:
    """``rule`` for Managed Prometheus: on the controller's object-labelled series, ``namespace`` and ``job`` read
    as ``exported_namespace`` and ``exported_job`` (in the PromQL and in ``$labels`` of the annotations)."""
    expr = str(rule.get("expr", ""))
    if not any(m in expr for m in GMP_RENAMED):
        return rule
    out = dict(rule)
    out["expr"] = gmp_expr(expr)[0]
    if "annotations" in rule:
        out["annotations"] = {k: re.sub(r"\$labels\.(namespace|job)\b", r"$labels.exported_\1", v)
                              for k, v in rule["annotations"].items()}
    return out


def gmp_rules(groups: dict[str, Any], namespace: str) -> dict[str, Any]:
    """The alert groups as a GKE Managed Prometheus ``ClusterRules`` object (``monitoring.googleapis.com/v1``,
    cluster-scoped), with the controller's job labels read as Managed Prometheus stores them (:func:`gmp_relabel`).

    ``ClusterRules``, not ``Rules``: GMP scopes a namespaced ``Rules`` to the series of its own namespace, while
    these read kube-state-metrics, node-exporter, DCGM exporter and agents elsewhere; a never-ready alert's
    ``absent()`` branch would then fire forever and the real signal never be seen. ``namespace`` is unused (kept
    for callers)."""
    del namespace
    out = []
    for g in groups["groups"]:
        rules = []
        for r in g["rules"]:
            rule = {k: r[k] for k in ("alert", "record", "expr", "for", "labels", "annotations") if k in r}
            rules.append(gmp_relabel(rule))
        out.append({"name": g["name"], "interval": g.get("interval", "30s"), "rules": rules})
    meta = _meta("fabricguard", "")
    meta.pop("namespace", None)
    return {"apiVersion": "monitoring.googleapis.com/v1", "kind": "ClusterRules", "metadata": meta,
            "spec": {"groups": out}}
