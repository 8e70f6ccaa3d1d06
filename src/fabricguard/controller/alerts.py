"""Alerting rules: ``fabricguard render alerts`` (a PrometheusRule, or ``--plain`` a Prometheus rules file).

The rules read the controller's metrics (names in ``metrics.py``) and kube-state-metrics for the fabric
device plugins. kubernetes-mixin's DaemonSet alerts compare ``desired`` with ``current``/``available``, so a
DaemonSet that wants no pod at all (``desiredNumberScheduled == 0``: a nodeSelector or an untolerated taint
that matches none of the pool's nodes) never fires them. Here a fabric DaemonSet has three alerts, each meaning
what its name says: never ready (no pod ready at any time since it was created, by its creation age), no pod
ready now (it had some), and missing (kube-state-metrics does not report it at all).

Every rule carries ``runbook_url``: ``docs/runbooks/<alert>.md`` under ``RUNBOOK_BASE_URL`` (or the base given
to ``render alerts --runbook-base-url``, an internal mirror); tests/controller/test_runbooks.py fails when a
rendered alert has no runbook file, so whoever adds an alert adds its runbook. Summaries name the object
(pool, workload, DaemonSet, node, job) so the page says where to look before anyone opens the runbook.
"""

from __future__ import annotations

from typing import Any

from fabricguard import names
from fabricguard.profile.model import PlatformProfile

GROUP = "fabricguard"
# Where the runbooks (docs/runbooks/<alert>.md) are read; ``render alerts --runbook-base-url`` points elsewhere.
RUNBOOK_BASE_URL = "https://github.com/fabricguard/fabricguard/blob/main/docs/runbooks"
# A DaemonSet younger than this may still be pulling its image: "never ready" waits this long after creation.
NEVER_READY_AFTER_S = 900
# How far back "never" looks: kube-state-metrics' series of the DaemonSet within Prometheus's usual retention.
NEVER_READY_LOOKBACK = "7d"


def runbook_url(alert: str, base: str = RUNBOOK_BASE_URL) -> str:
    return f"{base.rstrip('/')}/{alert}.md"


def _rule(alert: str, expr: str, for_: str, severity: str, summary: str, description: str) -> dict[str, Any]:
    return {"alert": alert, "expr": expr, "for": for_, "labels": {"severity": severity},
            "annotations": {"summary": summary, "description": description, "runbook_url": runbook_url(alert)}}


def with_runbook_base(groups: dict[str, Any], base: str) -> dict[str, Any]:
    """The rule groups with every ``runbook_url`` read from ``base`` instead of ``RUNBOOK_BASE_URL``."""
    for g in groups["groups"]:
        for r in g["rules"]:
            if "alert" in r:
                r.setdefault("annotations", {})["runbook_url"] = runbook_url(r["alert"], base)
    return groups


def _plugins(profile: PlatformProfile) -> list[str]:
    """kube-state-metrics label selectors of the pools' fabric DaemonSets."""
    plugins = sorted({(dp.namespace, dp.daemonSet)
                      for p in profile.spec.pools if (dp := p.fabric.fabric_daemonset) is not None})
    return [f'namespace="{ns}",daemonset="{ds}"' for ns, ds in plugins]


def _or(terms: list[str]) -> str:
    return "\nor\n".join(f"({t})" for t in terms)


def daemonset_rules(profile: PlatformProfile) -> list[dict[str, Any]]:
    """The pools' fabric DaemonSets: never ready since creation, no pod ready now, not reported at all."""
    sels = _plugins(profile)
    if not sels:
        return []
    by = "on(namespace, daemonset)"
    never = [f"(time() - kube_daemonset_created{{{s}}} > {NEVER_READY_AFTER_S})"
             f" and {by} (max_over_time(kube_daemonset_status_number_ready{{{s}}}[{NEVER_READY_LOOKBACK}]) == 0)"
             for s in sels]
    none_now = [f"(kube_daemonset_status_number_ready{{{s}}} == 0)"
                f" and {by} (max_over_time(kube_daemonset_status_number_ready{{{s}}}[{NEVER_READY_LOOKBACK}]) > 0)"
                for s in sels]
    missing = [f"absent(kube_daemonset_created{{{s}}})" for s in sels]
    ds = "fabric DaemonSet {{ $labels.namespace }}/{{ $labels.daemonset }}"
    return [
        _rule("FabricguardFabricDaemonSetNeverReady", _or(never), "5m", "critical",
              f"{ds} has never had a ready pod",
              "Created {{ $value | humanizeDuration }} ago, and no pod of it has been ready since (within the "
              f"{NEVER_READY_LOOKBACK} Prometheus is asked about): the device plugin never advertised the fabric "
              "(an image without this node architecture, a nodeSelector or taint that matches no node, a crash "
              "loop). kubernetes-mixin's DaemonSet alerts compare desired with current and stay silent when "
              "desired is 0. Canaries on its pools are unschedulable and their workloads held."),
        _rule("FabricguardFabricDaemonSetNoneReady", _or(none_now), "10m", "critical",
              f"{ds} has no ready pod now (it had some)",
              "The device plugin had ready pods within the last "
              f"{NEVER_READY_LOOKBACK} and has none now: a rollout, a node image change or an evicted plugin "
              "took the fabric resource away from every node. New pods asking for the fabric stay Pending."),
        _rule("FabricguardFabricDaemonSetMissing", _or(missing), "15m", "critical",
              f"{ds} is not reported by kube-state-metrics",
              "The profile names this DaemonSet as the pools' fabric device plugin, but kube-state-metrics "
              "reports no such DaemonSet: it was deleted, never installed, or lives in another namespace than "
              "the profile says (or kube-state-metrics is down)."),
    ]


def rules(profile: PlatformProfile) -> list[dict[str, Any]]:
    pool = "pool {{ $labels.pool }}"
    out = [
        _rule("FabricguardCanaryUnschedulable", 'fabricguard_canary_last_outcome{outcome="unschedulable"} == 1',
              "1m", "critical", f"{pool}: the fabric canary cannot be scheduled",
              "The canary asked for the pool's fabric resources and stayed Pending past its timeout; the "
              "scheduler's reason is in the FabricValidation's latest run. A device plugin that does not "
              "advertise the resource is the usual cause. Training workloads on this pool are held."),
        _rule("FabricguardCanaryNotCreated", 'fabricguard_canary_last_outcome{outcome="not-created"} == 1',
              "1m", "critical", f"{pool}: no pod of the fabric canary was created",
              "The canary's JobSet made no pod within its pending timeout: the JobSet controller is not running, "
              "or pod creation was refused (Pod Security admission, a ResourceQuota, a webhook). Nothing reached "
              "the scheduler, so the fabric itself is unproven; the refusal is quoted in the FabricValidation's "
              "latest run. Training workloads on this pool are held."),
        _rule("FabricguardCanarySocketFallback", 'fabricguard_canary_last_outcome{outcome="fallback"} == 1',
              "1m", "critical", f"{pool}: the canary fell back to TCP sockets",
              "NCCL in the canary used NET/Socket instead of the pool's fabric: jobs here would run at a "
              "fraction of their speed without an error. See the evidence lines in the FabricValidation."),
        _rule("FabricguardCanaryFailed", 'fabricguard_canary_last_outcome{outcome="failed"} == 1',
              "1m", "critical", f"{pool}: the canary failed",
              "NCCL or the probe failed in the canary (with NCCL_NET forced, a missing fabric fails here)."),
        _rule("FabricguardCanaryBusBwBelowFloor",
              'fabricguard_canary_busbw_gbps{collective="all_reduce"} < on(pool) fabricguard_canary_busbw_floor_gbps',
              "5m", "warning", f"{pool}: canary all-reduce busbw below the floor",
              "Peak bus bandwidth {{ $value }} GB/s is below the pool's floor (floorFraction x baseline)."),
        _rule("FabricguardNoRecentValidation",
              "(time() - fabricguard_canary_last_success_timestamp_seconds > 2 * fabricguard_canary_interval_seconds)"
              "\nor\n(fabricguard_canary_interval_seconds unless on(pool) "
              "fabricguard_canary_last_success_timestamp_seconds)",
              "10m", "warning", f"{pool}: no successful fabric validation for more than two intervals",
              "Workloads on this pool wait in Kueue until a canary passes again."),
        _rule("FabricguardCanarySkippedTooLong", 'fabricguard_canary_last_outcome{outcome="skipped"} == 1',
              "1h", "warning", f"{pool}: canaries skipped for an hour (pool saturated)",
              "No node had free GPUs for the canary; the fabric is not being validated."),
        _rule("FabricguardWorkloadsHeld",
              "max by (namespace, workload, pool) (fabricguard_admission_check_held_workload) > 0", "15m", "warning",
              "workload {{ $labels.namespace }}/{{ $labels.workload }} held off pool {{ $labels.pool }} by the "
              "fabric-validated check",
              "The pool's fabric is not validated, so Kueue does not admit the workload. Why: kubectl describe "
              "workload -n {{ $labels.namespace }} {{ $labels.workload }} (the check's message, cause first), and "
              "kubectl describe fabricvalidation {{ $labels.pool }} for every cause."),
        _rule("FabricguardJobsFinishingDegraded",
              'sum by (pool, verdict, transport) (increase(fabricguard_job_verdicts_total{verdict!="pass"}[1h])) > 0',
              "0m", "warning", f"{pool}: jobs finished with verdict {{{{ $labels.verdict }}}}",
              "Finished jobs did not prove they used the fabric (transport {{ $labels.transport }}); see the "
              "fabricguard.io/verdict annotation and Events on the jobs."),
        _rule("FabricguardJobOnSockets", "max by (namespace, job, pool) (fabricguard_job_on_sockets) == 1", "0m",
              "critical", "{{ $labels.namespace }}/{{ $labels.job }} runs over TCP sockets on fabric pool "
              "{{ $labels.pool }}",
              "The running job's own NCCL logs show inter-node connections over NET/Socket: it runs at a "
              "fraction of its speed, without an error. The evidence line is in the job's Event and its "
              "fabricguard.io/transport-detail annotation; the pool's onFallback says whether it was stopped."),
        _rule("FabricguardDriftFromReference", "fabricguard_drift_findings > 0", "30m", "warning",
              "{{ $labels.kind }} {{ $labels.namespace }}/{{ $labels.name }} differs from the reference environment",
              "This cluster runs the fabric object differently from the environment that published the reference "
              "({{ $value }} field(s)): a fix made on one side only (the 271-day stopgap that never left staging). "
              "fabricguard doctor diff shows each field."),
        _rule("FabricguardDoctorCritical",
              'max by (rule, kind, namespace, name) (fabricguard_doctor_finding{severity="critical"}) > 0', "15m",
              "critical", "doctor: {{ $labels.rule }} on {{ $labels.kind }} "
              "{{ with $labels.namespace }}{{ . }}/{{ end }}{{ $labels.name }}",
              "The controller's doctor pass reports a critical finding of rule {{ $labels.rule }} on this object; "
              "fabricguard doctor prints the evidence and the fix (the cause first when several findings share "
              "one)."),
        _rule("FabricguardControllerNotReconciling",
              "time() - max(fabricguard_reconcile_last_timestamp_seconds) > 300", "5m", "warning",
              "fabricguard controller has not finished a pass for 5 minutes",
              "No replica holds the Lease or the API server refuses the controller; canaries and the Kueue "
              "check are frozen."),
        _rule("FabricguardControllerCacheStale",
              "max without (read) (fabricguard_controller_cache_age_seconds)"
              " > 0.5 * fabricguard_controller_cache_stale_bound_seconds",
              "30s", "critical", "fabricguard controller has not heard from the API server for "
              "{{ $value | printf \"%.0f\" }} s",
              "A read of the controller's watch-fed cache has had no list, event or bookmark for more than half "
              "its bound (a watch stalled behind a load balancer, an API server that stopped answering). Past the "
              "bound the Kueue check admits nothing and the controller's liveness fails; this fires before that. "
              "fabricguard_controller_cache_age_seconds says which read; the controller's log says why its "
              "watches end."),
        _rule("FabricguardJobsNotFollowed", "max(fabricguard_live_jobs_unfollowed) > 0", "5m", "warning",
              "{{ $value }} running managed job(s) not followed within their interval",
              "The controller could not read every running job's NCCL logs within twice its live interval: a "
              "socket fallback in those jobs is seen late (each is still read, least recently read first). "
              "fabricguard_live_follow_lag_seconds says how late; raise --live-workers on a slow file system."),
        _rule("FabricguardJobVerdictsBacklog", "max(fabricguard_job_verdicts_waiting) > 0", "30m", "warning",
              "{{ $value }} finished managed job(s) still waiting for their verdict",
              "Each pass reads finished jobs' NCCL logs for at most --verdict-budget seconds and leaves the rest "
              "for the next passes; for 30 minutes some have waited, so jobs finish faster than the controller "
              "judges them (or Lustre answers slowly). Their verdicts, Events and step metrics come late; none is "
              "lost."),
        _rule("FabricguardDescriptorsShort",
              "increase(fabricguard_descriptor_shortages_total[10m]) > 0 or "
              "max(fabricguard_controller_open_fds / fabricguard_controller_fd_limit) > 0.8",
              "0m", "warning", "the fabricguard controller is running short of file descriptors",
              "Opens were refused for want of a descriptor (EMFILE), or 80% of the limit is in use. No job's "
              "verdict changes (the files are read on a later poll), but following slows. Raise the container's "
              "nofile limit, or look for a leak in fabricguard_controller_open_fds."),
    ]
    out[6:6] = daemonset_rules(profile)
    out += down_rules(profile)
    out += job_busbw_rules(profile)
    out += node_rules(profile)
    return out


# Minutes a component's series may be missing before "down" fires: longer than a rollout, shorter than an outage
# anyone would accept for a fail-closed gate.
DOWN_FOR = "10m"


def down_rules(profile: PlatformProfile) -> list[dict[str, Any]]:
    """Never silent when down: ``absent()`` of each component's own series (a Deployment at 0 replicas, a pool's
    agents unscheduled, a webhook nobody scrapes leave no series at all, so no threshold alert can fire), the
    webhook's errors and latency, a stale agent, and an open blast-radius breaker."""
    out = [
        _rule("FabricguardControllerDown", "absent(fabricguard_reconcile_last_timestamp_seconds)", DOWN_FOR,
              "critical", "no fabricguard controller is reporting",
              "No series of the controller at all: its Deployment is at 0 replicas, it crash-loops, or nothing "
              "scrapes it. Its Kueue check holds every gated workload whose entry is not Ready, and no canary "
              "runs. (In CronJob mode: the textfile collector has no fabricguard file.)"),
        _rule("FabricguardWebhookDown", "absent(fabricguard_admission_draining)", DOWN_FOR, "critical",
              "no fabricguard admission webhook is reporting",
              "No series of the webhook: its Deployment is at 0 replicas, crash-loops, or its PodMonitor is "
              "missing. With failurePolicy Fail, every create of a training pod in opted-in namespaces fails."),
        _rule("FabricguardWebhookErrors",
              'sum(rate(fabricguard_admission_requests_total{outcome=~"error|timeout|busy|too_large"}[5m]))'
              " / sum(rate(fabricguard_admission_requests_total[5m])) > 0.05",
              "10m", "warning", "fabricguard webhook: {{ $value | humanizePercentage }} of reviews fail",
              "More than 5% of admission reviews end in an error, a timeout, a refusal for load or size: the API "
              "server then applies the failurePolicy (Fail: the create is refused)."),
        _rule("FabricguardWebhookSlow",
              "histogram_quantile(0.99, sum by (le) (rate(fabricguard_admission_duration_seconds_bucket[5m])))"
              " > 0.5",
              "10m", "warning", "fabricguard webhook p99 latency above 0.5 s",
              "The slowest 1% of reviews take more than 0.5 s (the webhook's timeout is 5 s): a creation storm, "
              "CPU throttling, or a slow ResourceClaimTemplate cache."),
        _rule("FabricguardBreakerOpen", "max by (pool, check) (fabricguard_breaker_open) == 1", "0m", "critical",
              "pool {{ $labels.pool }}: blast-radius breaker open for check {{ $labels.check }}",
              "Too many of the pool's nodes newly failed this check within the window: fabricguard assumes its "
              "own fault (profile, agent, driver), stopped tainting and holding for it, and waits for a person. "
              "fabricguard breaker status names the nodes; reset with fabricguard breaker reset."),
        _rule("FabricguardTaintBudgetSpent",
              "count by (pool) (fabricguard_agent_taint_budget_withheld == 1) > 0", "10m", "warning",
              "pool {{ $labels.pool }}: {{ $value }} failing node(s) left untainted, the pool's taint budget is spent",
              "Agents that keep their own taints (--manage-taints) found every taint slot of the pool held (its "
              "blast-radius budget), or could not read them: these nodes fail their fabric checks but stay "
              "schedulable. Where the controller runs, its breaker opens for the same cause; where it does not, "
              "nothing else will act: a person decides (fix the fault, or the profile)."),
        _rule("FabricguardAgentStale",
              "max by (node, pool) ((time() - fabricguard_agent_last_run_timestamp_seconds)"
              " * on(instance) group_left(node, pool) fabricguard_agent_info) > 900",
              "5m", "warning", "agent on {{ $labels.node }} (pool {{ $labels.pool }}) has not run for 15 minutes",
              "The agent's pod is up but its checks have not finished a run: a hung check, a stalled loop. Its "
              "FabricReady turns Unknown when the staleness sweep sees the old heartbeat."),
    ]
    for p in profile.spec.pools:
        out.append(_rule(
            "FabricguardAgentsDown", f'absent(fabricguard_agent_info{{pool="{p.name}"}})', DOWN_FOR, "critical",
            f"no fabricguard agent of pool {p.name} is reporting",
            f"No agent of pool {p.name} has a series: its DaemonSet is deleted or schedules no pod (a nodeSelector "
            "or an untolerated taint), or nothing scrapes it. No node of the pool proves its fabric; FabricReady "
            "goes stale and the readiness taints stay."))
    return out


JUDGED_COLLECTIVES = 'collective=~"AllReduce|AllGather|ReduceScatter"'


def job_busbw_rules(profile: PlatformProfile) -> list[dict[str, Any]]:
    """A running job's collectives below its pool's floor (NCCL Inspector), when the profile loads it."""
    ins = profile.spec.inspector
    if ins is None:
        return []
    return [_rule(
        "FabricguardJobBusBwBelowFloor",
        f"fabricguard_job_busbw_gbps{{{JUDGED_COLLECTIVES}}}"
        " < on(namespace, job, ranks_per_node) group_left(pool) fabricguard_job_busbw_floor_gbps",
        ins.belowFloorFor, "warning",
        "{{ $labels.namespace }}/{{ $labels.job }}: {{ $labels.collective }} busbw below pool {{ $labels.pool }}'s "
        "floor",
        "NCCL's Inspector in the running job measures {{ $value | printf \"%.1f\" }} GB/s bus bandwidth for its "
        "large {{ $labels.collective }} collectives across nodes on communicators with {{ $labels.ranks_per_node }} "
        "rank(s) per node, below the floor of that shape (floorFraction x baseline, x k/G for k of G GPUs per "
        f"node) for {ins.belowFloorFor}: the job runs, slowly, with no error. Its fabricguard.io/busbw "
        "annotation and Event have the figures; the dashboard's job view shows them beside step time, GPU "
        "utilization and RDMA traffic."),
        _rule("FabricguardJobHung", "max by (namespace, job, node, rank) (fabricguard_job_hung) > 0", "0m", "warning",
              "{{ $labels.namespace }}/{{ $labels.job }} hung, waiting for rank {{ $labels.rank }} on node "
              "{{ $labels.node }}",
              f"The job's collectives stopped advancing for {ins.hangAfter} and NCCL's RAS, asked twice from inside "
              "one of its pods, shows launch counts mismatched and not advancing: the other ranks wait for this "
              "rank. Its fabricguard.io/hang annotation and FabricJobHung Event name the pod and the node's last "
              "transport verdict.")]


# Joins a per-node series (scraped from the agent: same ``instance``) to the node and pool the agent checks.
AGENT = "* on(instance) group_left(node, pool) fabricguard_agent_info"
# Interfaces that carry pod traffic over TCP, not container plumbing.
NIC = 'device!~"lo|veth.*|cali.*|cilium.*|flannel.*|docker.*|cni.*|tunl.*|vxlan.*"'


def lustre_latency_ms() -> str:
    """Mean Lustre client RPC latency per node (ms): summed req_waittime over RPCs, over 5 minutes."""
    return ("(sum by (instance) (rate(fabricguard_lustre_client_rpc_wait_seconds_total[5m]))"
            " / sum by (instance) (rate(fabricguard_lustre_client_rpcs_total[5m]))) * 1000")


def node_rules(profile: PlatformProfile) -> list[dict[str, Any]]:
    """Fabric, Lustre and GPU signals per node: the agent's metrics, node-exporter's and DCGM exporter's."""
    out = [
        _rule("FabricguardRdmaLinkErrorsRising",
              "(increase(fabricguard_rdma_port_symbol_errors_total[15m]) > 0"
              " or increase(fabricguard_rdma_port_link_downed_total[15m]) > 0) " + AGENT,
              "0m", "warning", "RDMA link errors on {{ $labels.node }} {{ $labels.device }}/{{ $labels.port }}",
              "The port's symbol-error or link-downed counter rose in 15 minutes: a flapping or degrading link "
              "that NCCL may route around slowly or fail on. Check the cable and transceiver."),
        _rule("FabricguardFabricPortDownOnReadyNode",
              "((fabricguard_rdma_port_up == 0) " + AGENT + ")"
              ' and on(node) (kube_node_status_condition{condition="Ready",status="true"} == 1)',
              "2m", "critical", "fabric port {{ $labels.device }}/{{ $labels.port }} down on Ready node "
              "{{ $labels.node }}",
              "The node is Ready and takes pods, but one of its RDMA ports is not ACTIVE/LinkUp: jobs placed there "
              "lose a rail or fall back. The node agent reports FabricReady=False on its next run."),
        _rule("FabricguardGpuIdleOnSockets",
              "(avg by (node) (DCGM_FI_DEV_GPU_UTIL) < 40)"
              " and on(node) (sum by (node) (rate(node_infiniband_port_data_transmitted_bytes_total[5m])) == 0)"
              f" and on(node) (sum by (node) (rate(node_network_transmit_bytes_total{{{NIC}}}[5m])) > 1e8)",
              "10m", "warning", "GPUs idle on {{ $labels.node }} while its traffic goes over TCP",
              "GPU utilization is low, the node's RDMA ports carry nothing and its Ethernet sends over 100 MB/s: "
              "the signature of a job whose collectives fell back to sockets (or a storage stall). See the "
              "job-on-sockets alert and the job's fabricguard.io/transport annotation."),
    ]
    for p in profile.spec.pools:
        ms = p.baseline.lustreRpcLatencyMs
        if ms is None or not p.lustre or profile.spec.storage.lustre is None:
            continue
        out.append(_rule(
            "FabricguardLustreLatencyHigh",
            f'({lustre_latency_ms()} > {ms:g}) * on(instance) group_left(node, pool) '
            f'fabricguard_agent_info{{pool="{p.name}"}}',
            "10m", "warning", "Lustre client latency on {{ $labels.node }} above pool {{ $labels.pool }}'s baseline",
            f"Mean Lustre RPC latency is {{{{ $value | printf \"%.1f\" }}}} ms, above the pool's {ms:g} ms for 10 "
            "minutes: a mis-mounted or degraded Lustre client slows every step that reads data or checkpoints, "
            "which looks like a model problem unless storage is ruled out."))
    return out


def proof_rules(profile: PlatformProfile) -> list[dict[str, Any]]:
    """Node proof (controller/proof.py): coverage behind its goal, the quarantine breaker, a lifecycle timeout."""
    if not any(p.proof is not None for p in profile.spec.pools):
        return []
    pool = "pool {{ $labels.pool }}"
    return [
        _rule("FabricguardProofCoverageBehind", "fabricguard_pool_proof_nodes_overdue > 0", "1h", "warning",
              f"{pool}: {{{{ $value }}}} node(s) not proven within the pool's proof.every",
              "Pair tests did not prove every node of the pool within its coverage goal: no idle nodes (a busy "
              "pool), the GPU-hour budget spent, or no known-good partner. `fabricguard pool coverage -p POOL` "
              "lists each node's last proof and state; the FabricValidation's status.proof says what bounded it."),
        _rule("FabricguardQuarantineBreakerOpen", "fabricguard_pool_quarantine_breaker_open == 1", "1m", "critical",
              f"{pool}: the quarantine breaker is open; nothing more is quarantined",
              "More of the pool's nodes newly failed pair tests within the breaker's window than "
              "proof.quarantine.breakerPercent allows: a platform fault (a switch, a driver rollout, our own "
              "mistake) rather than bad nodes. fabricguard stops quarantining until a person has looked and "
              "resets it; the FabricValidation's status.proof.breaker names the nodes counted."),
        _rule("FabricguardNodeProofTimedOut", 'fabricguard_pool_proof_nodes{state="timed-out"} > 0', "1m",
              "warning", f"{pool}: {{{{ $value }}}} new node(s) not proven within proof.lifecycleTimeout",
              "A new or repaired node kept its readiness taint past the pool's lifecycleTimeout because no pair "
              "test with a known-good node passed (no idle partner, the budget, or the test failed). It takes "
              "no work until proven; its FabricProven condition and Events say why."),
    ]


def rule_groups(profile: PlatformProfile) -> dict[str, Any]:
    return {"groups": [{"name": GROUP, "rules": rules(profile) + proof_rules(profile)}]}


def prometheus_rule(profile: PlatformProfile, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "fabricguard", "namespace": namespace,
                     "labels": {names.LABEL_APP_PART_OF: "fabricguard"}},
        "spec": rule_groups(profile),
    }
