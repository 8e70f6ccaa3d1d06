"""The agent's Prometheus metrics, in their own registry (one per agent, so tests can run several).

- ``fabricguard_node_check{check,status}``: 1 for the status each check has now, 0 for the others, so a
  change of status shows as two series flipping, the way kube-state-metrics exports conditions;
- ``fabricguard_node_fabric_ready``: 1 when the last report was ``True``;
- ``fabricguard_agent_last_run_timestamp_seconds`` and ``fabricguard_agent_run_duration_seconds``;
- ``fabricguard_agent_report_errors_total``: reports the API server refused or never received;
- ``fabricguard_agent_status_writes_total{result="written"|"skipped"}``: condition writes, and runs that wrote
  nothing because nothing changed and the heartbeat was not due;
- ``fabricguard_agent_checks_abandoned_total``: runs whose checks passed ``--check-timeout`` (left behind);
- ``fabricguard_agent_taints_withheld{check}``: failing checks an open breaker keeps from tainting (--manage-taints);
- ``fabricguard_agent_taint_budget_withheld{pool}`` and ``..._runs_total``: a taint withheld for want of a taint
  slot (the pool's blast-radius budget, ``agent.taint_slots``);
- the RDMA port and Lustre client metrics of ``agent.fabric_metrics``, read at scrape time.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from fabricguard.agent.condition import Readiness
from fabricguard.probes.result import Status

STATUSES = tuple(str(s) for s in Status)


class AgentMetrics:
    def __init__(self, node: str, pool: str | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.check = Gauge(
            "fabricguard_node_check",
            "1 for the status the check has in the last run, 0 for the others.",
            ["check", "status"],
            registry=self.registry,
        )
        self.ready = Gauge(
            "fabricguard_node_fabric_ready", "1 when the agent last reported FabricReady=True.", registry=self.registry
        )
        self.last_run = Gauge(
            "fabricguard_agent_last_run_timestamp_seconds",
            "Unix time at which the last run of the checks finished.",
            registry=self.registry,
        )
        self.duration = Histogram(
            "fabricguard_agent_run_duration_seconds",
            "Seconds one run of every check took.",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
            registry=self.registry,
        )
        self.report_errors = Counter(
            "fabricguard_agent_report_errors_total",
            "Condition or taint writes that failed.",
            registry=self.registry,
        )
        self.status_writes = Counter(
            "fabricguard_agent_status_writes_total",
            "Runs that wrote the FabricReady condition (written) or found it unchanged with its heartbeat not due "
            "(skipped).",
            ["result"],
            registry=self.registry,
        )
        self.abandoned = Counter(
            "fabricguard_agent_checks_abandoned_total",
            "Runs whose checks did not finish within --check-timeout (the worker was left behind).",
            registry=self.registry,
        )
        self.info = Gauge(
            "fabricguard_agent_info",
            "1, labelled with the node and pool this agent checks: alerts join on it to name a pool's nodes.",
            ["node", "pool"],
            registry=self.registry,
        )
        self.withheld = Gauge(
            "fabricguard_agent_taints_withheld",
            "1 per failing check whose open blast-radius breaker keeps this node untainted (--manage-taints).",
            ["check"],
            registry=self.registry,
        )
        self.budget_withheld = Gauge(
            "fabricguard_agent_taint_budget_withheld",
            "1 while this node fails its checks but is left untainted because its pool's taint slots (the "
            "blast-radius budget, agent/taint_slots.py) are all held by other nodes or could not be read.",
            ["pool"],
            registry=self.registry,
        )
        self.budget_withheld_runs = Counter(
            "fabricguard_agent_taint_budget_withheld_runs_total",
            "Runs that withheld a taint for want of a taint slot.",
            ["pool"],
            registry=self.registry,
        )
        self._withheld: set[str] = set()
        self._budget_pool: str | None = None
        self._seen: set[str] = set()
        self._fabric: Path | None = None
        self._identity: tuple[str, str] | None = None

    def withhold(self, checks: list[str]) -> None:
        """The checks an open breaker keeps from tainting this node now (series of the others removed)."""
        for c in self._withheld - set(checks):
            self.withheld.remove(c)
        for c in checks:
            self.withheld.labels(c).set(1)
        self._withheld = set(checks)

    def budget_withhold(self, pool: str, withheld: bool) -> None:
        """Whether this run withheld a taint for want of a taint slot (the series is 0 otherwise, never stale)."""
        if self._budget_pool not in (None, pool):
            self.budget_withheld.remove(self._budget_pool)
        self._budget_pool = pool
        self.budget_withheld.labels(pool).set(1 if withheld else 0)
        if withheld:
            self.budget_withheld_runs.labels(pool).inc()

    def identify(self, node: str, pool: str) -> None:
        if self._identity not in (None, (node, pool)):
            self.info.remove(*self._identity)
        self.info.labels(node, pool).set(1)
        self._identity = (node, pool)

    def watch_fabric(self, root: Path) -> None:
        """Also serve the node's RDMA port and Lustre client metrics, read from ``root`` at every scrape."""
        from fabricguard.agent.fabric_metrics import FabricCollector

        if self._fabric is None:
            self.registry.register(FabricCollector(root))
            self._fabric = root

    def observe(self, verdict: Readiness, seconds: float, finished_at: float) -> None:
        names = {c.name: str(c.status) for c in verdict.checks}
        # A check that stopped being reported (another pool, a removed check) must not keep its old status.
        for gone in self._seen - set(names):
            for s in STATUSES:
                self.check.remove(gone, s)
        for name, status in names.items():
            for s in STATUSES:
                self.check.labels(name, s).set(1 if s == status else 0)
        self._seen = set(names)
        self.ready.set(1 if verdict.ready else 0)
        self.duration.observe(seconds)
        self.last_run.set(finished_at)
