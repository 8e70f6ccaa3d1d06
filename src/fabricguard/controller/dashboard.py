"""The Grafana dashboard: ``fabricguard render dashboard`` (schemaVersion 39 JSON, one Prometheus datasource).

Fabric validation: canary outcomes per pool over time, all-reduce busbw against the floor, job verdicts by
transport, workloads held by the check, time since the last successful validation, doctor findings, jobs on
sockets now, drift from the reference environment. Per pool: fabric ports down, RDMA link errors, Lustre client
latency against the pool's baseline; with Lustre, its client's checks per node, imports not connected, client
throughput, the storage canary against its floor and the jobs' I/O share and bound; node proof coverage
(proven, overdue, suspects, quarantined, the breaker)
and its GPU-hours against the budget. The job view (variables ``namespace`` and ``job``), on one time axis: the
transport the job's logs prove, its collectives' busbw across nodes from NCCL's Inspector against the pool's
floor, the GPU utilization of its pods, the RDMA and TCP traffic of its nodes and their
Lustre latency, so "low GPU utilization, uneven steps" is seen next to its cause. Every metric a query reads is
listed with its source in docs/metrics.md (the tests check it).
"""

from __future__ import annotations

from typing import Any

from fabricguard import names
from fabricguard.controller.alerts import AGENT, NIC, lustre_latency_ms
from fabricguard.profile.model import PlatformProfile

DS = {"type": "prometheus", "uid": "${datasource}"}

PANELS: tuple[tuple[str, str, list[tuple[str, str]], str], ...] = (
    ("Canary outcome per pool", "state-timeline",
     [('max by (pool, outcome) (fabricguard_canary_last_outcome == 1)', "{{pool}} {{outcome}}")], "none"),
    ("All-reduce busbw vs floor (GB/s)", "timeseries",
     [('fabricguard_canary_busbw_gbps{collective="all_reduce"}', "{{pool}} busbw"),
      ('fabricguard_canary_inspector_busbw_gbps{collective="AllReduce"}', "{{pool}} busbw (Inspector)"),
      ("fabricguard_canary_busbw_floor_gbps", "{{pool}} floor {{ranks_per_node}}/node")], "none"),
    ("Job verdicts by transport (per hour)", "timeseries",
     [("sum by (verdict, transport) (increase(fabricguard_job_verdicts_total[1h]))", "{{verdict}} {{transport}}")],
     "none"),
    ("Workloads held by fabric-validated", "timeseries",
     [("fabricguard_admission_check_pending_workloads", "{{pool}}")], "none"),
    ("Time since last successful validation", "stat",
     [("time() - fabricguard_canary_last_success_timestamp_seconds", "{{pool}}")], "s"),
    ("Doctor findings", "timeseries",
     [("sum by (rule, severity) (fabricguard_doctor_findings)", "{{severity}} {{rule}}")], "none"),
    ("Running jobs on sockets (fabric pools)", "timeseries",
     [("sum by (pool) (fabricguard_job_on_sockets)", "{{pool}}")], "none"),
    ("Drift from the reference environment (fields)", "timeseries",
     [("sum by (kind, namespace, name) (fabricguard_drift_findings)", "{{kind}} {{namespace}}/{{name}}")], "none"),
    ("Fabric ports down per pool", "timeseries",
     [(f"count by (pool) ((fabricguard_rdma_port_up == 0) {AGENT})", "{{pool}}")], "none"),
    ("RDMA link errors per pool (per 15 min)", "timeseries",
     [(f"sum by (pool) ((increase(fabricguard_rdma_port_symbol_errors_total[15m])"
       f" + increase(fabricguard_rdma_port_link_downed_total[15m])) {AGENT})", "{{pool}}")], "none"),
)

# Pools with a ``proof`` goal (controller/proof.py): coverage and its GPU-hours.
PROOF_PANELS: tuple[tuple[str, str, list[tuple[str, str]], str], ...] = (
    ("Node proof coverage per pool (nodes)", "timeseries",
     [('fabricguard_pool_proof_nodes{state="proven"}', "{{pool}} proven within every"),
      ("fabricguard_pool_proof_nodes_overdue", "{{pool}} overdue"),
      ('sum by (pool) (fabricguard_pool_proof_nodes{state=~"suspect|convicted"})', "{{pool}} suspect/convicted"),
      ("fabricguard_pool_quarantined_nodes", "{{pool}} quarantined"),
      ("fabricguard_pool_quarantine_breaker_open", "{{pool}} breaker open")], "none"),
    ("Node proof GPU-hours today vs budget", "timeseries",
     [("fabricguard_pool_proof_spent_gpu_hours", "{{pool}} spent"),
      ("fabricguard_pool_proof_budget_gpu_hours", "{{pool}} budget")], "none"),
)

# The job view: one row of panels over the same time axis, filtered by the ``namespace`` and ``job`` variables.
JOB_PODS = 'kube_pod_info{namespace="$namespace",pod=~"$job-.*"}'
JOB_NODES = f"on(node) (count by (node) ({JOB_PODS}))"
JOB_PANELS: tuple[tuple[str, str, list[tuple[str, str]], str], ...] = (
    ("Job $namespace/$job: transport its NCCL logs prove", "state-timeline",
     [('max by (transport) (fabricguard_job_transport{namespace="$namespace",job="$job"})', "{{transport}}")],
     "none"),
    ("Job $namespace/$job: collective busbw across nodes (NCCL Inspector) vs the pool's floor (GB/s)", "timeseries",
     [('fabricguard_job_busbw_gbps{namespace="$namespace",job="$job"}', "{{collective}} {{ranks_per_node}}/node"),
      ('fabricguard_job_busbw_floor_gbps{namespace="$namespace",job="$job"}',
       "{{pool}} floor {{ranks_per_node}}/node")], "none"),
    ("Job $namespace/$job: GPU utilization of its pods", "timeseries",
     [('avg by (pod) (DCGM_FI_DEV_GPU_UTIL{namespace="$namespace",pod=~"$job-.*"})', "{{pod}}")], "percent"),
    ("Job $namespace/$job: RDMA traffic of its nodes", "timeseries",
     [(f"sum by (node) (rate(node_infiniband_port_data_transmitted_bytes_total[2m])) and {JOB_NODES}",
       "{{node}} RDMA")], "Bps"),
    ("Job $namespace/$job: TCP traffic of its nodes", "timeseries",
     [(f"sum by (node) (rate(node_network_transmit_bytes_total{{{NIC}}}[2m])) and {JOB_NODES}", "{{node}} TCP")],
     "Bps"),
    ("Job $namespace/$job: Lustre client latency of its nodes (ms)", "timeseries",
     [(f"({lustre_latency_ms()} * on(instance) group_left(node) fabricguard_agent_info) and {JOB_NODES}",
       "{{node}}")], "ms"),
    ("Job $namespace/$job: median step time at its verdict vs the pool's baseline (s)", "timeseries",
     [('fabricguard_job_step_median_seconds{namespace="$namespace",job="$job"}', "{{job}} median step"),
      ('fabricguard_pool_step_baseline_seconds * on(pool) group_left() '
       'max by (pool) (fabricguard_job_step_median_seconds{namespace="$namespace",job="$job"})'
       ' / max by (pool) (fabricguard_job_step_median_seconds{namespace="$namespace",job="$job"})',
       "{{pool}} baseline")], "s"),
    ("Job $namespace/$job: its verdict", "stat",
     [("JOB_VERDICT", "{{verdict}} over {{transport}}")], "none"),
)


# Profiles with Lustre (docs/storage.md): the client's health per node, the same checks FabricReady reads (one row
# per node and lustre.* check, with its status: the doctor's per-node grid), imports not connected, the clients'
# throughput, the storage canary against the floor, and the running jobs' I/O share and bound.
AGENT_NODE = 'on(instance) group_left(node, pool) fabricguard_agent_info{pool=~"$pool"}'
LUSTRE_TABLE = "Lustre client health per node (FabricReady's lustre.* checks)"
LUSTRE_PANELS: tuple[tuple[str, str, list[tuple[str, str]], str], ...] = (
    (LUSTRE_TABLE, "table",
     [(f'max by (node, pool, check, status) ((fabricguard_node_check{{check=~"lustre[.].+"}} == 1) * {AGENT_NODE})',
       "{{node}} {{check}} {{status}}")], "none"),
    ("Lustre imports not connected per node", "timeseries",
     [(f"count by (node, pool) ((fabricguard_lustre_import_full == 0) * {AGENT_NODE})", "{{node}}")], "none"),
    ("Lustre client throughput per node", "timeseries",
     [(f"sum by (node) (rate(fabricguard_lustre_client_write_bytes_total[5m]) * {AGENT_NODE})", "{{node}} write"),
      (f"sum by (node) (rate(fabricguard_lustre_client_read_bytes_total[5m]) * {AGENT_NODE})", "{{node}} read")],
     "Bps"),
    ("Storage canary vs floor (MB/s) and storage ready", "timeseries",
     [('fabricguard_canary_storage_mbps{pool=~"$pool"}', "{{pool}} {{phase}}"),
      ('fabricguard_canary_storage_floor_mbps{pool=~"$pool"}', "{{pool}} {{phase}} floor"),
      ('fabricguard_pool_storage_ready{pool=~"$pool"}', "{{pool}} ready")], "none"),
    ("Job $namespace/$job: share of its time in I/O and what bounds it", "timeseries",
     [('fabricguard_job_io_share{namespace="$namespace",job="$job"}', "{{job}} I/O share"),
      ('max by (bound) (fabricguard_job_bound{namespace="$namespace",job="$job"})', "bound {{bound}}")], "percentunit"),
)


def _lustre_panel(profile: PlatformProfile) -> tuple[str, str, list[tuple[str, str]], str]:
    targets = [(f"avg by (pool) ({lustre_latency_ms()} * on(instance) group_left(pool) fabricguard_agent_info)",
                "{{pool}}")]
    for p in profile.spec.pools:
        if p.baseline.lustreRpcLatencyMs is not None:
            targets.append((f'label_replace(vector({p.baseline.lustreRpcLatencyMs:g}), "pool", "{p.name}", "", "")',
                            "{{pool}} baseline"))
    return ("Lustre client latency per pool vs baseline (ms)", "timeseries", targets, "ms")


# Canary outcomes as one value per pool (so a state timeline colours each state), and their colours: green only
# for passed; each failure its own colour; "never passed" (-1) darkest, since that is the 271-day pattern.
OUTCOME_CODES = {"passed": 0, "degraded": 1, "fallback": 2, "failed": 3, "unschedulable": 4, "not-created": 5,
                 "skipped": 6}
NEVER_PASSED = -1
OUTCOME_COLORS = {"passed": "green", "degraded": "yellow", "fallback": "red", "failed": "dark-red",
                  "unschedulable": "orange", "not-created": "purple", "skipped": "blue", "never passed": "#4a0000"}
POOL = 'pool=~"$pool"'


def _outcome_expr() -> str:
    codes = " or ".join(f'label_replace(vector({c}), "outcome", "{o}", "", "")' for o, c in OUTCOME_CODES.items())
    never = (f"(fabricguard_canary_interval_seconds{{{POOL}}} unless on(pool) "
             f"fabricguard_canary_last_success_timestamp_seconds) * 0 + ({NEVER_PASSED})")
    latest = (f"sum by (pool) ((fabricguard_canary_last_outcome{{{POOL}}} == 1) * on(outcome) group_left() "
              f"({codes}))")
    return f"({latest} unless on(pool) ({never})) or ({never})"


def _mapping(values: dict[str, tuple[int, str]]) -> list[dict[str, Any]]:
    return [{"type": "value", "options": {str(v): {"text": text, "color": color, "index": i}
                                          for i, (text, (v, color)) in enumerate(values.items())}}]


def _outcome_mappings() -> list[dict[str, Any]]:
    values = {o: (c, OUTCOME_COLORS[o]) for o, c in OUTCOME_CODES.items()}
    values["never passed"] = (NEVER_PASSED, OUTCOME_COLORS["never passed"])
    return _mapping(values)


def _decorate(panels: list[dict[str, Any]], profile: PlatformProfile) -> None:
    """Colours that mean something: outcome mappings, staleness thresholds from the pools' canary intervals (and
    never passed as its own state), busbw in GB/s with the floor drawn, units, descriptions."""
    intervals = [c.interval_s for p in profile.spec.pools if (c := profile.canary(p)) is not None] or [600]
    floors = [f for p in profile.spec.pools if (f := p.baseline.busbw_floor_gbps) is not None]
    for panel in panels:
        title, d = panel["title"], panel["fieldConfig"]["defaults"]
        if title == "Canary outcome per pool":
            panel["targets"] = [{"refId": "A", "datasource": DS, "expr": _outcome_expr(), "legendFormat": "{{pool}}"}]
            d["mappings"] = _outcome_mappings()
            d["color"] = {"mode": "thresholds"}
            d["thresholds"] = {"mode": "absolute", "steps": [{"color": "text", "value": None}]}
            panel["description"] = ("The latest canary outcome per pool: green only for passed; a pool whose canary "
                                    "never passed is drawn dark red as 'never passed'.")
        elif title == "Time since last successful validation":
            panel["targets"] = [{"refId": "A", "datasource": DS, "legendFormat": "{{pool}}", "expr": (
                f"(time() - fabricguard_canary_last_success_timestamp_seconds{{{POOL}}}) or "
                f"((fabricguard_canary_interval_seconds{{{POOL}}} unless on(pool) "
                f"fabricguard_canary_last_success_timestamp_seconds) * 0 + ({NEVER_PASSED}))")}]
            d["unit"] = "s"
            d["mappings"] = _mapping({"never passed": (NEVER_PASSED, OUTCOME_COLORS["never passed"])})
            d["color"] = {"mode": "thresholds"}
            # Fresh within one interval, late after it, stale (the alert's two intervals) after that.
            d["thresholds"] = {"mode": "absolute", "steps": [
                {"color": "green", "value": None},
                {"color": "yellow", "value": max(intervals) + 60},
                {"color": "red", "value": 2 * max(intervals)}]}
            panel["description"] = (f"Seconds since the pool's latest passed canary; yellow after one canary interval "
                                    f"({max(intervals)} s), red after two (FabricguardNoRecentValidation).")
        elif title.startswith("All-reduce busbw"):
            d["unit"] = "GBs"
            if floors:
                d["thresholds"] = {"mode": "absolute", "steps": [{"color": "red", "value": None},
                                                                   {"color": "green", "value": min(floors)}]}
                d["custom"] = {"thresholdsStyle": {"mode": "line+area"}}
            panel["description"] = "Canary bus bandwidth against the pool's floor (floorFraction x baseline)."
        elif title.endswith(": its verdict"):
            d["mappings"] = _mapping({v: (c, VERDICT_COLORS[v]) for v, c in VERDICT_CODES.items()})
            d["color"] = {"mode": "thresholds"}
            d["thresholds"] = {"mode": "absolute", "steps": [{"color": "text", "value": None}]}
            panel["options"] = {"colorMode": "background", "textMode": "value_and_name"}
            panel["description"] = ("The finished job's verdict (filtered by $namespace/$job): green only for pass; "
                                    "missing-logs and input-unusable are never a pass.")
        elif "busbw" in title:
            d["unit"] = "GBs"
        elif title == LUSTRE_TABLE:
            # One row per node and check, the latest value: failed red, degraded yellow, pass green.
            for t in panel["targets"]:
                t |= {"instant": True, "format": "table"}
            panel["options"] = {"sortBy": [{"displayName": "status", "desc": False}]}
            panel["transformations"] = [{"id": "organize", "options": {"excludeByName": {"Time": True,
                                                                                        "Value": True}}}]
            panel["fieldConfig"]["overrides"] = [{
                "matcher": {"id": "byName", "options": "status"},
                "properties": [{"id": "custom.cellOptions", "value": {"type": "color-background"}},
                               {"id": "mappings", "value": [{"type": "value", "options": {
                                   "failed": {"color": "red", "index": 0}, "degraded": {"color": "yellow", "index": 1},
                                   "pass": {"color": "green", "index": 2},
                                   "skipped": {"color": "blue", "index": 3}}}]}]}]
            panel["description"] = ("Each node's Lustre client checks as its agent last ran them (lustre.health, "
                                    "lustre.imports, lustre.evictions, lustre.lnet, lustre.jobid): the line each "
                                    "failed check read is in the node's FabricReady message and in `fabricguard "
                                    "doctor`.")
        if d.get("unit") == "none" and "(s)" in title:
            d["unit"] = "s"


# Finished jobs' verdicts as codes (one colour each): the job view's verdict stat.
VERDICT_CODES = {"pass": 0, "degraded": 1, "failed": 2, "missing-logs": 3, "input-unusable": 4, "unknown-pool": 5}
VERDICT_COLORS = {"pass": "green", "degraded": "yellow", "failed": "red", "missing-logs": "orange",
                  "input-unusable": "purple", "unknown-pool": "blue"}


def _job_verdict_expr() -> str:
    codes = " or ".join(f'label_replace(vector({c}), "verdict", "{v}", "", "")' for v, c in VERDICT_CODES.items())
    return ('max by (verdict, transport) (fabricguard_job_verdict{namespace="$namespace",job="$job"}'
            f" * on(verdict) group_left() ({codes}))")


# Every panel's one-line description (what it shows and what a colour or a line means).
DESCRIPTIONS = {
    "Job verdicts by transport (per hour)": "Finished managed jobs judged per hour, by verdict and by the transport "
    "their logs proved: socket on a fabric pool is the silent half-speed fallback.",
    "Workloads held by fabric-validated": "Workloads the Kueue check holds off each pool (kubectl fabricguard why "
    "JOB says why).",
    "Doctor findings": "The doctor's findings by rule and severity, from the controller's pass.",
    "Running jobs on sockets (fabric pools)": "Running jobs whose logs prove TCP sockets on a fabric pool, now.",
    "Drift from the reference environment (fields)": "Objects that differ from the published reference "
    "environment, in fields that matter for the fabric.",
    "Fabric ports down per pool": "RDMA ports the node agents read as down, per pool.",
    "RDMA link errors per pool (per 15 min)": "Symbol errors and link-downed events of the pools' RDMA ports.",
    "Lustre client latency per pool vs baseline (ms)": "The Lustre client's RPC wait time per pool against the "
    "profile's baseline.",
    "Node proof coverage per pool (nodes)": "Nodes proven by pair tests within the goal, overdue, suspect, "
    "quarantined, and the quarantine breaker.",
    "Node proof GPU-hours today vs budget": "GPU-hours the pair tests spent today against the daily budget.",
    "Lustre imports not connected per node": "Lustre imports (OSC/MDC) each node's client reads as not FULL: "
    "a node that lost a server.",
    "Lustre client throughput per node": "Bytes each node's Lustre client writes and reads.",
    "Storage canary vs floor (MB/s) and storage ready": "The storage canary's write/read rates against the pool's "
    "storage floor, and whether the pool's storage is ready.",
    "Job $namespace/$job: share of its time in I/O and what bounds it": "The running job's share of step time "
    "spent in I/O and whether the fabric or storage bounds it.",
    "Job $namespace/$job: transport its NCCL logs prove": "The inter-node transport the running job's NCCL logs "
    "prove over time: socket on a fabric pool is the fallback that halves the step rate.",
    "Job $namespace/$job: collective busbw across nodes (NCCL Inspector) vs the pool's floor (GB/s)": "The job's "
    "large collectives across nodes (NCCL Inspector, 5-minute median) per communicator shape, with each shape's "
    "floor.",
    "Job $namespace/$job: GPU utilization of its pods": "DCGM GPU utilization of the job's pods: low and uneven "
    "next to low busbw points at the fabric.",
    "Job $namespace/$job: RDMA traffic of its nodes": "RDMA bytes sent by the job's nodes: near zero while TCP is "
    "high is the socket fallback.",
    "Job $namespace/$job: TCP traffic of its nodes": "TCP bytes sent by the job's nodes (pod-network interfaces "
    "left out).",
    "Job $namespace/$job: Lustre client latency of its nodes (ms)": "The Lustre client's RPC wait on the job's "
    "nodes: storage-bound steps show here.",
    "Job $namespace/$job: median step time at its verdict vs the pool's baseline (s)": "The finished job's median "
    "step time against the pool's baseline step time.",
}

# Rows, top to bottom: the pools' standing, their nodes, then the job view.
ROW_OF = {"Nodes": ("Fabric ports down per pool", "RDMA link errors per pool (per 15 min)",
                    "Lustre client latency per pool vs baseline (ms)", "Node proof coverage per pool (nodes)",
                    "Node proof GPU-hours today vs budget", LUSTRE_TABLE, "Lustre imports not connected per node",
                    "Lustre client throughput per node"),
          "Jobs": ("Job verdicts by transport (per hour)", "Running jobs on sockets (fabric pools)")}
ROWS = ("Pools", "Nodes", "Jobs")
CLUSTER = 'cluster=~"$cluster"'
_SKIP_AFTER = {"by", "without", "on", "ignoring", "group_left", "group_right"}  # a label list follows
_AGGREGATIONS = {"sum", "avg", "max", "min", "count", "stddev", "stdvar", "topk", "bottomk", "quantile",
                 "count_values", "group", "limitk", "limit_ratio"}
_WORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan", *_SKIP_AFTER, *_AGGREGATIONS}


def scoped(expr: str, pool_labelled: frozenset[str]) -> str:
    """``expr`` with ``cluster=~"$cluster"`` on every series selector and ``pool=~"$pool"`` on those of metrics
    that carry a pool label (a selector that already names the label keeps its own). With the variables at All
    (``.*``) a series without the label still matches, so one-cluster Prometheus and GMP read the same."""
    out: list[str] = []
    i, n = 0, len(expr)
    while i < n:
        ch = expr[i]
        if ch == '"':
            j = i + 1
            while j < n and expr[j] != '"':
                j += 2 if expr[j] == "\\" else 1
            out.append(expr[i:j + 1])
            i = j + 1
            continue
        if ch in "[{":
            j = expr.index("]" if ch == "[" else "}", i)
            out.append(expr[i:j + 1])
            i = j + 1
            continue
        if ch.isalpha() or ch in "_:":
            j = i
            while j < n and (expr[j].isalnum() or expr[j] in "_:"):
                j += 1
            word = expr[i:j]
            k = j
            while k < n and expr[k] == " ":
                k += 1
            nxt = expr[k] if k < n else ""
            if word in _SKIP_AFTER and nxt == "(":
                end = expr.index(")", k)
                out.append(expr[i:end + 1])
                i = end + 1
                continue
            if nxt == "(" or word in _WORDS or (i > 0 and (expr[i - 1].isdigit() or expr[i - 1] == ".")):
                out.append(word)
                i = j
                continue
            matchers = [CLUSTER] + ([POOL] if word in pool_labelled else [])
            if nxt == "{":
                end = expr.index("}", k)
                inner = expr[k + 1:end]
                have = [m for m in matchers if m.split("=")[0] + "=" not in inner.replace("=~", "=")]
                out.append(word + "{" + ",".join([*have, *([inner] if inner.strip() else [])]) + "}")
                i = end + 1
            else:
                out.append(word + "{" + ",".join(matchers) + "}")
                i = j
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def pool_labelled() -> frozenset[str]:
    """The series that carry a ``pool`` label: the controller's and the node agent's metrics, as registered."""
    from fabricguard.agent.metrics import AgentMetrics
    from fabricguard.controller.metrics import Metrics

    out: set[str] = set()
    for reg in (Metrics().registry, AgentMetrics("-").registry):
        for collector in list(reg._collector_to_names):  # prometheus_client keeps no public list of collectors
            if "pool" in getattr(collector, "_labelnames", ()):
                out.update(reg._collector_to_names[collector])
    return frozenset(out)


def _layout(panels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows (Pools, Nodes, Jobs), each a full-width row header then its panels two per line."""
    out: list[dict[str, Any]] = []
    y = 0
    for row in ROWS:
        mine = [p for p in panels if _row(p["title"]) == row]
        if not mine:
            continue
        out.append({"type": "row", "title": row, "collapsed": False, "panels": [], "targets": [],
                    "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}})
        y += 1
        for i, p in enumerate(mine):
            p["gridPos"] = {"h": 8, "w": 12, "x": 12 * (i % 2), "y": y + 8 * (i // 2)}
            out.append(p)
        y += 8 * ((len(mine) + 1) // 2)
    for i, p in enumerate(out):
        p["id"] = i + 1
    return out


def _row(title: str) -> str:
    if title.startswith("Job $namespace/$job") or title in ROW_OF["Jobs"]:
        return "Jobs"
    return "Nodes" if title in ROW_OF["Nodes"] else "Pools"


def dashboard(profile: PlatformProfile) -> dict[str, Any]:
    panels: list[dict[str, Any]] = []
    proof = PROOF_PANELS if any(p.proof is not None for p in profile.spec.pools) else ()
    lustre = LUSTRE_PANELS if profile.spec.storage.lustre is not None else ()
    for title, ptype, targets, unit in (*PANELS, _lustre_panel(profile), *lustre, *proof, *JOB_PANELS):
        panels.append({
            "type": ptype,
            "title": title,
            "datasource": DS,
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": {},
            "targets": [{"refId": chr(ord("A") + j), "datasource": DS,
                         "expr": _job_verdict_expr() if expr == "JOB_VERDICT" else expr, "legendFormat": legend}
                        for j, (expr, legend) in enumerate(targets)],
        })
    _decorate(panels, profile)
    panels.append({
        "type": "stat", "title": "Pools validated now", "datasource": DS,
        "description": "fabricguard_pool_fabric_validated: 1 when the pool's latest canary passed within two "
                       "intervals and nothing critical names it; what the Kueue check admits on.",
        "fieldConfig": {"defaults": {"unit": "none", "color": {"mode": "thresholds"},
                                     "mappings": _mapping({"validated": (1, "green"), "not validated": (0, "red")}),
                                     "thresholds": {"mode": "absolute", "steps": [{"color": "red", "value": None},
                                                                                  {"color": "green", "value": 1}]}},
                        "overrides": []},
        "options": {"colorMode": "background", "textMode": "value_and_name"},
        "targets": [{"refId": "A", "datasource": DS, "expr": f"fabricguard_pool_fabric_validated{{{POOL}}}",
                     "legendFormat": "{{pool}}"}],
    })
    labelled = pool_labelled()
    for p in panels:
        p.setdefault("description", DESCRIPTIONS.get(p["title"], ""))
        job_view = p["title"].startswith("Job $namespace/$job")  # filtered by its job, whatever its pool
        for t in p["targets"]:
            t["expr"] = scoped(t["expr"], frozenset() if job_view else labelled)
    return {
        "uid": f"fabricguard-{profile.metadata.name}"[:40],
        "title": f"fabricguard: fabric validation ({profile.metadata.name})",
        "tags": ["fabricguard"],
        "timezone": "utc",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "1m",
        "time": {"from": "now-24h", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"},
            {"name": "cluster", "type": "query", "datasource": DS, "label": "Cluster", "multi": True,
             "includeAll": True, "allValue": ".*", "current": {"text": "All", "value": "$__all"},
             "query": {"query": "label_values(fabricguard_canary_interval_seconds, cluster)", "refId": "cluster"},
             "refresh": 2},
            {"name": "pool", "type": "query", "datasource": DS, "label": "Pool", "multi": True, "includeAll": True,
             "allValue": ".*", "current": {"text": "All", "value": "$__all"},
             "query": {"query": f"label_values(fabricguard_canary_interval_seconds{{{CLUSTER}}}, pool)",
                       "refId": "pool"},
             "refresh": 2},
            {"name": "namespace", "type": "query", "datasource": DS, "label": "Job namespace",
             "query": {"query": f"label_values(fabricguard_job_transport{{{CLUSTER}}}, namespace)", "refId": "ns"},
             "refresh": 2},
            {"name": "job", "type": "query", "datasource": DS, "label": "Job",
             "query": {"query": f'label_values(fabricguard_job_transport{{{CLUSTER},namespace="$namespace"}}, job)',
                       "refId": "job"}, "refresh": 2},
        ]},
        "annotations": {"list": []},
        "panels": _layout(panels),
    }


def for_gmp(board: dict[str, Any]) -> dict[str, Any]:
    """The dashboard for GKE Managed Prometheus: queries of the controller's job series read ``exported_namespace``
    and ``exported_job`` (GMP protects ``namespace`` and ``job``; ``exporters.gmp_expr``)."""
    import copy

    from fabricguard.controller.exporters import gmp_expr

    out = copy.deepcopy(board)
    for panel in out["panels"]:
        for t in panel.get("targets", ()):
            t["expr"], t["legendFormat"] = gmp_expr(t["expr"], t["legendFormat"])
    for var in out["templating"]["list"]:
        q = var.get("query")
        if isinstance(q, dict) and "query" in q:
            q["query"] = gmp_expr(q["query"])[0]
    return out


def configmap(profile: PlatformProfile, namespace: str = "fabricguard-system", *, gmp: bool = False) -> dict[str, Any]:
    """The dashboard as a ConfigMap labelled ``grafana_dashboard: "1"``, which Grafana's dashboard sidecar
    (kube-prometheus-stack) loads from any namespace it watches; ``gmp``: :func:`for_gmp`."""
    import json

    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "fabricguard-dashboard", "namespace": namespace,
                         "labels": {names.LABEL_APP_PART_OF: "fabricguard", "grafana_dashboard": "1"}},
            "data": {"fabricguard.json": json.dumps(for_gmp(dashboard(profile)) if gmp else dashboard(profile),
                                                    indent=1, sort_keys=True)}}
