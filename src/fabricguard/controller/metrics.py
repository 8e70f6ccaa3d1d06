"""The controller's Prometheus metrics, on its own registry, updated from each pass's result.

Gauges are set from the pass's standings (so they are right after a restart); counters count what the
controller itself recorded (a canary run written to a FabricValidation, a verdict written to a job).

:func:`serve` answers ``/metrics`` and the liveness probe's ``/healthz``, which turns 503 once
``FAILED_PASSES_UNHEALTHY`` passes in a row have failed (the kubelet then restarts the controller, and the
reason is in the probe's answer and in ``fabricguard_reconcile_consecutive_failures``), once the passes stalled,
and while the watch-fed cache is stale: a read the API server has not spoken for (list, event or bookmark)
within the bound (``fabricguard_controller_cache_age_seconds`` per read, computed when scraped).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import Any, get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from fabricguard.controller import proof as pf
from fabricguard.controller.live import LiveCost, Observation
from fabricguard.controller.outcome import Outcome
from fabricguard.controller.reconcile import PassResult
from fabricguard.descriptors import Limit
from fabricguard.profile.model import PlatformProfile
from fabricguard.times import parse_time

FAILED_PASSES_UNHEALTHY = 3
# Per-object series (a finding's object, a held workload) so an alert can name what to look at; bounded, and
# what the bound left out is counted in fabricguard_metrics_series_dropped{metric}.
MAX_OBJECT_SERIES = 500

Ages = Callable[[], dict[str, float | None]]


class CacheAges(Collector):
    """The watch-fed cache's age per read, and its bound, read when scraped (so a frozen loop still shows it)."""

    def __init__(self) -> None:
        self.ages: Ages | None = None
        self.bound_s = 0.0

    def stale(self) -> list[tuple[str, float]]:
        """(read, age) of every read older than the bound, oldest first."""
        if self.ages is None:
            return []
        return sorted(((k, a) for k, a in self.ages().items() if a is not None and a > self.bound_s),
                      key=lambda ka: -ka[1])

    def collect(self) -> Iterable[GaugeMetricFamily]:
        if self.ages is None:
            return
        age = GaugeMetricFamily("fabricguard_controller_cache_age_seconds",
                                "Seconds since the API server last spoke (a list, an event, a bookmark) for each "
                                "read of the controller's watch-fed cache.", labels=["read"])
        for key, a in sorted(self.ages().items()):
            if a is not None:
                age.add_metric([key], round(a, 3))
        yield age
        yield GaugeMetricFamily("fabricguard_controller_cache_stale_bound_seconds",
                                "Age past which the controller admits nothing (the Kueue check holds) and its "
                                "liveness fails.", value=self.bound_s)
        yield GaugeMetricFamily("fabricguard_controller_cache_stale_reads",
                                "Reads of the cache older than the bound.", value=len(self.stale()))


def _drop(gauge: Gauge, *labels: str) -> None:
    """Remove a series that may never have been set (a gauge set only when its value was known)."""
    with contextlib.suppress(KeyError):
        gauge.remove(*labels)


Labels = tuple[str, ...]


class _Series:
    """A labelled gauge's series for what is current now: each ``update`` sets the current ones, and those of the
    previous update that are not current are removed (``zero``: set to 0, for a count that must read 0 once
    cleared, not vanish). No series outlives what it stands for."""

    def __init__(self, gauge: Gauge, *, zero: bool = False) -> None:
        self.gauge, self.zero = gauge, zero
        self.keys: set[Labels] = set()

    def update(self, values: dict[Labels, float]) -> None:
        for key, value in values.items():
            self.gauge.labels(*key).set(value)
        for key in self.keys - values.keys():
            if self.zero:
                self.gauge.labels(*key).set(0)
            else:
                _drop(self.gauge, *key)
        self.keys = self.keys | values.keys() if self.zero else set(values)


class _Declare:
    """Metrics declared on one registry: ``gauge(name, help, *label_names)``, likewise ``counter``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def gauge(self, name: str, documentation: str, *labels: str) -> Gauge:
        return Gauge(name, documentation, labels, registry=self.registry)

    def counter(self, name: str, documentation: str, *labels: str) -> Counter:
        return Counter(name, documentation, labels, registry=self.registry)


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        gauge, counter = _Declare(r).gauge, _Declare(r).counter
        self._proof_metrics(gauge, counter)
        self.failed_passes = gauge("fabricguard_reconcile_consecutive_failures",
                                   "Passes in a row that failed (0 after a pass that completed).")
        self.pass_failures = counter("fabricguard_reconcile_pass_failures", "Passes that failed.")
        self._failed_in_a_row = 0
        self._last_failure = ""
        self.canary_runs = counter("fabricguard_canary_runs", "Canary runs recorded, by outcome.",
                                   "pool", "outcome")
        self.last_success = gauge("fabricguard_canary_last_success_timestamp_seconds",
                                  "Finish time of the pool's latest passed canary.", "pool")
        self.busbw = gauge("fabricguard_canary_busbw_gbps",
                           "Peak bus bandwidth of the pool's latest judged canary, per collective.",
                           "pool", "collective")
        self.floor = gauge("fabricguard_canary_busbw_floor_gbps", "The pool's all-reduce busbw floor.",
                           "pool")
        self.last_outcome = gauge("fabricguard_canary_last_outcome",
                                  "1 for the outcome of the pool's latest canary run, 0 for the others.",
                                  "pool", "outcome")
        self.interval = gauge("fabricguard_canary_interval_seconds", "The pool's canary interval.", "pool")
        self.ready = gauge("fabricguard_pool_fabric_validated",
                           "1 when the pool's latest canary passed within two intervals.", "pool")
        self.storage_ready = gauge("fabricguard_pool_storage_ready",
                                   "1 when the pool's storage canary proved its Lustre within two intervals.",
                                   "pool")
        self.storage_mbps = gauge("fabricguard_canary_storage_mbps",
                                  "The storage canary's nodes' summed rate per phase (write, read).",
                                  "pool", "phase")
        self.storage_floor = gauge("fabricguard_canary_storage_floor_mbps",
                                   "The pool's storage floor per phase (baseline x floorFraction).",
                                   "pool", "phase")
        self.verdicts = counter("fabricguard_job_verdicts", "Verdicts of finished managed jobs.",
                                "pool", "verdict", "transport")
        self.findings = gauge("fabricguard_doctor_findings", "Doctor findings on the latest pass.",
                              "rule", "severity")
        self.finding_objects = gauge("fabricguard_doctor_finding",
                                     "1 for each object a critical or warning doctor finding names (its first "
                                     "object), on the latest pass.",
                                     "rule", "severity", "kind", "namespace", "name")
        self.held = gauge("fabricguard_admission_check_held_workload",
                          "1 for each Workload the fabric-validated check holds off its pool now.",
                          "namespace", "workload", "pool")
        self.series_dropped = gauge("fabricguard_metrics_series_dropped",
                                    f"Per-object series left out on the latest pass (over {MAX_OBJECT_SERIES}).",
                                    "metric")
        self._object_series: dict[str, _Series] = {}
        self.pending = gauge("fabricguard_admission_check_pending_workloads",
                             "Workloads the fabric-validated check holds in Pending.", "pool")
        self.pass_seconds = gauge("fabricguard_reconcile_duration_seconds", "Duration of the latest pass.")
        self.last_pass = gauge("fabricguard_reconcile_last_timestamp_seconds", "End of the latest pass.")
        # Incremental passes (controller/incremental.py): how many of each kind, and how much the latest judged.
        self.passes = counter("fabricguard_reconcile_passes", "Passes that finished, by kind (full, incremental).",
                              "kind")
        self.pass_changed = gauge("fabricguard_reconcile_changed_objects",
                                  "Objects that changed between the previous pass's snapshot and the latest's.")
        self.pass_reevaluated = gauge("fabricguard_reconcile_reevaluated_objects",
                                      "Objects the latest pass judged again: those the doctor's re-run rules read "
                                      "and the Workloads whose check was decided again (all of them: full).")
        for kind in ("full", "incremental"):
            self.passes.labels(kind)
        self.verdicts_waiting = gauge("fabricguard_job_verdicts_waiting",
                                      "Finished managed jobs awaiting a verdict whose logs the latest pass had no "
                                      "time to read (--verdict-budget); read first by the next passes.")
        self.errors = counter("fabricguard_reconcile_errors", "Actions the API server refused.")
        self.leader = gauge("fabricguard_controller_leader", "1 while this replica holds the Lease.")
        self.lease_duration = gauge("fabricguard_controller_lease_duration_seconds",
                                    "leaseDurationSeconds this replica writes (longer when the API is slow).")
        self.lease_window = gauge("fabricguard_controller_lease_window_seconds",
                                  "Seconds left to act after the latest won election round (0 when not leading).")
        self.lease_too_short = counter("fabricguard_controller_lease_too_short",
                                       "Won election rounds that left too little time to act (the API is too slow "
                                       "for the lease).")
        self.api_latency = gauge("fabricguard_controller_api_latency_seconds",
                                 "Slowest of the controller's recent API requests.")
        self.stalled = gauge("fabricguard_controller_stalled",
                             "1 when this replica gave up the Lease because its passes stalled (liveness fails).")
        self.cache = CacheAges()
        r.register(self.cache)
        self._findings = _Series(self.findings, zero=True)
        self.job_transport = gauge("fabricguard_job_transport",
                                   "1 for the transport a running managed job's NCCL logs prove so far.",
                                   "namespace", "job", "pool", "transport")
        self.job_on_sockets = gauge("fabricguard_job_on_sockets",
                                    "1 while a running managed job on a fabric pool connects over TCP sockets.",
                                    "namespace", "job", "pool")
        self.live_jobs = gauge("fabricguard_live_jobs_followed", "Running managed jobs whose logs are followed.")
        self.live_unfollowed = gauge("fabricguard_live_jobs_unfollowed",
                                     "Running managed jobs whose logs were not read within their bound (twice the "
                                     "live interval): the followers cannot keep up.")
        self.live_lag = gauge("fabricguard_live_follow_lag_seconds",
                              "Age of the least recently read running job's latest read.")
        self.live_files = gauge("fabricguard_live_log_files_followed", "NCCL log files followed.")
        self.fd_limit = gauge("fabricguard_controller_fd_limit",
                              "The controller's soft file descriptor limit (raised to the hard limit at start).")
        self.fd_open = gauge("fabricguard_controller_open_fds", "File descriptors the controller holds open.")
        self.fd_short = counter("fabricguard_descriptor_shortages",
                                "Opens refused for want of a file descriptor (EMFILE/ENFILE); the file is read "
                                "on a later poll.")
        self._fd_short_seen = 0
        self.live_bytes = counter("fabricguard_live_log_bytes_read", "Bytes of running jobs' NCCL logs read.")
        self.live_poll_seconds = gauge("fabricguard_live_poll_duration_seconds",
                                       "Duration of the latest read of running jobs' logs.")
        self.live_last_poll = gauge("fabricguard_live_last_poll_timestamp_seconds",
                                    "End of the latest read of running jobs' logs.")
        self.drift = gauge("fabricguard_drift_findings",
                           "Fields of a fabric object that differ from the reference environment "
                           "(1: on one side only).",
                           "kind", "namespace", "name")
        self.reference_published = gauge("fabricguard_drift_reference_published_timestamp_seconds",
                                         "When the reference environment's snapshot was published.",
                                         "environment")
        self._drift = _Series(self.drift)
        self.job_step = gauge("fabricguard_job_step_median_seconds",
                              "Median step time of a finished managed job, from its verdict.",
                              "namespace", "job", "pool")
        self.job_verdict = gauge("fabricguard_job_verdict",
                                 "1 for a finished managed job's verdict (pass, degraded, failed, missing-logs, "
                                 "input-unusable) and the transport it proved, once judged.",
                                 "namespace", "job", "pool", "verdict", "transport")
        self.step_baseline = gauge("fabricguard_pool_step_baseline_seconds", "The pool's baseline step time.",
                                   "pool")
        self._job_transport, self._job_on_sockets = _Series(self.job_transport), _Series(self.job_on_sockets)
        self.job_io_share = gauge("fabricguard_job_io_share",
                                  "Share of a running job's time so far in its logged I/O phases (checkpoint writes "
                                  "and reads, data reads).", "namespace", "job", "pool")
        self.job_io_mbps = gauge("fabricguard_job_io_mbps",
                                 "A running job's aggregate rate per I/O phase so far (ranks' bytes over the slowest "
                                 "rank's seconds).", "namespace", "job", "phase")
        self.job_bound = gauge("fabricguard_job_bound",
                               "1 for what holds a running job back so far: fabric, storage, fabric+storage or none.",
                               "namespace", "job", "pool", "bound")
        self._job_io = (_Series(self.job_io_share), _Series(self.job_io_mbps), _Series(self.job_bound))
        self.job_busbw = gauge("fabricguard_job_busbw_gbps",
                               "Bus bandwidth of a running job's large collectives across nodes (NCCL Inspector, "
                               "median over the latest 5 minutes), per communicator shape (ranks per node; 0: "
                               "uneven).", "namespace", "job", "collective", "ranks_per_node")
        self.job_busbw_floor = gauge("fabricguard_job_busbw_floor_gbps",
                                     "The busbw floor a running job's communicators of this shape are held to (the "
                                     "pool's floor for whole nodes, x k/G for k of G GPUs per node).",
                                     "namespace", "job", "pool", "ranks_per_node")
        self.job_busbw_below = gauge("fabricguard_job_busbw_below_floor_minutes",
                                     "Minutes (by the records' dump times) a running job's collective has been "
                                     "below its shape's floor.", "namespace", "job", "collective", "ranks_per_node")
        self.rank_lateness = gauge("fabricguard_job_rank_lateness_seconds",
                                   "How long the other ranks of a running job wait for this rank at its collectives "
                                   "(NCCL Inspector, aligned by coll_sn; a rank confirmed late over suspectRounds).",
                                   "namespace", "job", "node", "rank")
        self.node_busbw = gauge("fabricguard_job_node_busbw_gbps",
                                "A running job's busbw on the communicators across this node (its worst GPU's "
                                "median), per communicator shape.", "namespace", "job", "node", "ranks_per_node")
        self.node_busbw_ratio = gauge("fabricguard_job_node_busbw_ratio",
                                      "This node's communicators' busbw over their same-shape peers' in the job "
                                      "(1: like the others; a slow rail on it: well below).",
                                      "namespace", "job", "node")
        self.node_suspect = gauge("fabricguard_job_node_suspect_confidence",
                                  "A node a running job's records point at as slow (confirmed over suspectRounds), "
                                  "with how sure (0-1); never acted on.", "namespace", "job", "node")
        self._ranks = (_Series(self.rank_lateness), _Series(self.node_busbw_ratio), _Series(self.node_busbw),
                       _Series(self.node_suspect))
        self.job_hung = gauge("fabricguard_job_hung",
                              "1 for the rank (pod's node) a running job's other ranks wait for, once NCCL's RAS "
                              "confirmed the hang (counts mismatched and not advancing over two queries).",
                              "namespace", "job", "node", "rank")
        self._job_hung = _Series(self.job_hung)
        self.canary_inspector_busbw = gauge("fabricguard_canary_inspector_busbw_gbps",
                                            "Busbw per collective of the pool's latest judged canary, from NCCL's "
                                            "Inspector (the instrument running jobs are measured with).",
                                            "pool", "collective")
        self.live_inspector_files = gauge("fabricguard_live_inspector_files_followed",
                                          "NCCL Inspector record files followed.")
        self.live_inspector_bytes = counter("fabricguard_live_inspector_bytes_read",
                                            "Bytes of running jobs' Inspector records read.")
        self.breaker_open = gauge("fabricguard_breaker_open",
                                  "1 while the pool's blast-radius breaker for this check is open (not tainting "
                                  "or holding for it until a person resets it).", "pool", "check")
        self.breaker_spent = gauge("fabricguard_breaker_spent_nodes",
                                   "Nodes newly failing this check within the pool's blast-radius window.",
                                   "pool", "check")
        self.breaker_budget = gauge("fabricguard_breaker_budget_nodes",
                                    "Nodes the pool may newly fail one check within its window.", "pool")
        self.mode_enforce = gauge("fabricguard_pool_enforcing",
                                  "1 when the pool is enforced, 0 while it is observed (nothing held or tainted).",
                                  "pool")
        self.would_hold = gauge("fabricguard_admission_check_would_hold_workloads",
                                "Observe mode: workloads the Kueue check would hold under enforce.", "pool")
        self._breakers = (_Series(self.breaker_open, zero=True), _Series(self.breaker_spent, zero=True))
        self._job_busbw = (_Series(self.job_busbw), _Series(self.job_busbw_below), _Series(self.job_busbw_floor))
        self._inspector_bytes_seen = 0
        self._live_bytes_seen = 0

    def _proof_metrics(self, gauge: Callable[..., Gauge], counter: Callable[..., Counter]) -> None:
        self.proof_last_proven = gauge("fabricguard_node_proof_last_proven_timestamp_seconds",
                                       "When a pair test last proved the node's fabric data path.",
                                       "pool", "node")
        self.proof_busbw = gauge("fabricguard_node_proof_busbw_gbps", "All-reduce busbw of the node's proving pair.",
                                 "pool", "node")
        self.proof_nodes = gauge("fabricguard_pool_proof_nodes", "The pool's nodes by proof state.",
                                 "pool", "state")
        self.proof_overdue = gauge("fabricguard_pool_proof_nodes_overdue",
                                   "Nodes that count (not held elsewhere, Ready) not proven within proof.every.",
                                   "pool")
        self.proof_coverage = gauge("fabricguard_pool_proof_coverage_ratio",
                                    "Share of the pool's counted nodes proven within proof.every.", "pool")
        self.proof_every = gauge("fabricguard_pool_proof_every_seconds", "The pool's proof.every.", "pool")
        self.proof_budget = gauge("fabricguard_pool_proof_budget_gpu_hours",
                                  "GPU-hours pair tests may spend per UTC day.", "pool")
        self.proof_spent = gauge("fabricguard_pool_proof_spent_gpu_hours",
                                 "GPU-hours pair tests spent this UTC day (finished tests) plus those running "
                                 "(charged their pairDuration).", "pool")
        self.proof_pairs = counter("fabricguard_pool_proof_pairs", "Pair tests recorded, by outcome and purpose.",
                                   "pool", "outcome", "purpose")
        self.proof_quarantined = gauge("fabricguard_pool_quarantined_nodes",
                                       "Nodes carrying fabricguard's quarantine taint.", "pool")
        self.proof_withheld = gauge("fabricguard_pool_quarantine_withheld_nodes", "Convicted nodes not quarantined "
                                    "(the budget, the largest gang, or the open breaker).", "pool")
        self.proof_breaker_open = gauge("fabricguard_pool_quarantine_breaker_open", "1 while the pool's quarantine "
                                        "breaker is open (nothing more is quarantined until a person resets it).",
                                        "pool")
        self._proof_nodes: set[tuple[str, str]] = set()

    def observe_proof(self, profile: PlatformProfile, result: PassResult) -> None:
        seen: set[tuple[str, str]] = set()
        for p in profile.spec.pools:
            s = result.pools.get(p.name)
            out = getattr(s, "proof", None)
            if out is None or p.proof is None:
                continue
            d = out.decision
            counts = d.counts
            for state in get_args(pf.NodeStateName):
                self.proof_nodes.labels(p.name, state).set(counts.get(state, 0))
            for gauge, value in (
                (self.proof_overdue, out.counted - out.proven),
                (self.proof_coverage, out.proven / out.counted if out.counted else 1.0),
                (self.proof_every, out.every_s),
                (self.proof_budget, d.budget_gpu_hours),
                (self.proof_spent, d.state.spentGpuHours + sum(a.gpuHours for a in d.state.active)),
                (self.proof_quarantined, counts.get("quarantined", 0)),
                (self.proof_withheld, len(d.withheld)),
                (self.proof_breaker_open, 1 if d.state.breaker.open else 0),
            ):
                gauge.labels(p.name).set(value)
            for res in out.evaluated:
                self.proof_pairs.labels(p.name, res.outcome, res.purpose).inc()
            for node, row in d.state.nodes.items():
                t = parse_time(row.lastProven)
                if t is None:
                    continue
                seen.add((p.name, node))
                self.proof_last_proven.labels(p.name, node).set(t.timestamp())
                if row.busbwGBps is not None:
                    self.proof_busbw.labels(p.name, node).set(row.busbwGBps)
        for key in self._proof_nodes - seen:  # a node gone from the pool: its series go too
            for g in (self.proof_last_proven, self.proof_busbw):
                _drop(g, *key)
        self._proof_nodes = seen

    def observe_descriptor_limit(self, limit: Limit) -> None:
        """The descriptor limit the controller runs with (after raising the soft limit at start)."""
        self.fd_limit.set(limit.soft)

    def pass_failed(self, why: str) -> None:
        """A pass that raised instead of completing."""
        self._failed_in_a_row += 1
        self._last_failure = why[:500]
        self.failed_passes.set(self._failed_in_a_row)
        self.pass_failures.inc()

    def mark_stalled(self, why: str) -> None:
        """This replica's passes stalled and it gave up the Lease: the liveness probe fails from now on."""
        self._stalled = why
        self.stalled.set(1)

    def watch_cache(self, ages: Ages, bound_s: float) -> None:
        """Export the cache's ages (``Cache.ages``) from now on, and fail liveness while one is past ``bound_s``."""
        self.cache.ages, self.cache.bound_s = ages, bound_s

    def health(self) -> tuple[bool, str]:
        """(alive, why) for the liveness probe: not alive once passes keep failing, once they stalled, or while
        the cache is stale."""
        if getattr(self, "_stalled", ""):
            return False, f"passes stalled: {self._stalled}; gave up the Lease\n"
        stale = self.cache.stale()
        if stale:
            shown = ", ".join(f"{k} {a:.0f} s" for k, a in stale[:3])
            return False, (f"the watch-fed cache is stale: last heard from the API server for {shown} ago (bound "
                           f"{self.cache.bound_s:.0f} s); the Kueue check admits nothing\n")
        n = self._failed_in_a_row
        if n >= FAILED_PASSES_UNHEALTHY:
            return False, f"the last {n} reconcile passes failed; latest: {self._last_failure}\n"
        return True, "ok\n" if not n else f"ok ({n} failed pass(es) in a row; latest: {self._last_failure})\n"

    def observe(self, profile: PlatformProfile, result: PassResult, seconds: float, errors: int) -> None:
        from fabricguard.times import parse_time

        self._failed_in_a_row = 0
        self.failed_passes.set(0)

        for pool, outcome in result.counters.canary_runs:
            self.canary_runs.labels(pool, outcome).inc()
        for pool, verdict, transport in result.counters.job_verdicts:
            self.verdicts.labels(pool, verdict, transport).inc()
        for ns, job, pool, median in result.counters.job_steps:
            self.job_step.labels(ns, job, pool).set(median)
        for ns, job, pool, verdict, transport in result.counters.job_verdict_of:
            self.job_verdict.labels(ns, job, pool, verdict, transport).set(1)
        for p in profile.spec.pools:
            if p.baseline.stepTimeSeconds is not None:
                self.step_baseline.labels(p.name).set(p.baseline.stepTimeSeconds)
        for p in profile.spec.pools:
            s = result.pools.get(p.name)
            if s is None or not s.canary:
                continue
            self.interval.labels(p.name).set(s.interval_s)
            self.ready.labels(p.name).set(1 if s.ready else 0)
            if s.storage is not None:
                self.storage_ready.labels(p.name).set(1 if s.storage.ready else 0)
                proof = s.storage.proof
                for phase, got, floor in (("write", proof.writeMBps, proof.floorWriteMBps),
                                          ("read", proof.readMBps, proof.floorReadMBps)) if proof else ():
                    if got is not None:
                        self.storage_mbps.labels(p.name, phase).set(got)
                    if floor is not None:
                        self.storage_floor.labels(p.name, phase).set(floor)
            t = parse_time(s.last_success)
            if t is not None:
                self.last_success.labels(p.name).set(t.timestamp())
            for o in Outcome:
                self.last_outcome.labels(p.name, str(o)).set(1 if s.latest == str(o) else 0)
            for coll, v in s.busbw.items():
                self.busbw.labels(p.name, coll).set(v)
            for coll, v in s.inspector_busbw.items():
                self.canary_inspector_busbw.labels(p.name, coll).set(v)
            if p.baseline.busbw_floor_gbps is not None:
                self.floor.labels(p.name).set(p.baseline.busbw_floor_gbps)
            self.pending.labels(p.name).set(result.pending.get(p.name, 0))
        self.observe_breakers(profile, result)
        counts: dict[Labels, float] = {}
        for f in result.findings:
            key = (f.rule, str(f.severity))
            counts[key] = counts.get(key, 0) + 1
        self._findings.update(counts)  # a cleared finding reads 0, not a stale count
        self.observe_proof(profile, result)
        self._set_objects("fabricguard_doctor_finding", self.finding_objects, sorted(
            {(f.rule, str(f.severity), f.objects[0].kind, f.objects[0].namespace or "", f.objects[0].name)
             for f in result.findings if f.objects and str(f.severity) in ("critical", "warning")},
            key=lambda k: (k[1] != "critical", k)))
        self._set_objects("fabricguard_admission_check_held_workload", self.held, sorted(set(result.held)))
        self.pass_seconds.set(seconds)
        self.last_pass.set(result.now.timestamp())
        if result.stats is not None:
            self.passes.labels(result.stats.kind).inc()
            self.pass_changed.set(sum(result.stats.changed.values()))
            self.pass_reevaluated.set(result.stats.reevaluated)
        self.verdicts_waiting.set(result.counters.job_verdicts_waiting)
        if errors:
            self.errors.inc(errors)
        self.observe_drift(result)

    def observe_breakers(self, profile: PlatformProfile, result: PassResult) -> None:
        """Breakers per pool and check (a check no longer failing and closed reads 0, not a stale 1), the
        budget, and the pool's mode with what observe would have held."""
        is_open: dict[Labels, float] = {}
        spent: dict[Labels, float] = {}
        for p in profile.spec.pools:
            self.mode_enforce.labels(p.name).set(0 if p.name in result.observing else 1)
            self.would_hold.labels(p.name).set(result.would_hold.get(p.name, 0))
            pb = result.breakers.get(p.name)
            if pb is None:
                continue
            self.breaker_budget.labels(p.name).set(pb.allowed)
            for check, state in pb.states.items():
                is_open[p.name, check] = 1 if state.open else 0
                spent[p.name, check] = pb.spent.get(check, 0)
        self._breakers[0].update(is_open)
        self._breakers[1].update(spent)

    def observe_drift(self, result: PassResult) -> None:
        drift: dict[Labels, float] = {}
        for f in result.drift:
            obj = f.objects[0]
            one_side = "absent from" in f.evidence
            # Each differing field is one evidence entry holding both sides' values.
            drift[(obj.kind, obj.namespace or "", obj.name)] = 1 if one_side else sum(
                isinstance(v, dict) for v in f.evidence.values())
        self._drift.update(drift)  # resolved drift leaves no stale series
        ref = result.reference
        if ref is not None and ref.published:
            from fabricguard.times import parse_time

            t = parse_time(ref.published)
            if t is not None:
                self.reference_published.labels(ref.environment).set(t.timestamp())

    def _set_objects(self, metric: str, gauge: Gauge, keys: list[tuple[str, ...]]) -> None:
        """One series per object, at most MAX_OBJECT_SERIES (the rest counted); gone objects' series removed."""
        self.series_dropped.labels(metric).set(max(0, len(keys) - MAX_OBJECT_SERIES))
        self._object_series.setdefault(metric, _Series(gauge)).update(dict.fromkeys(keys[:MAX_OBJECT_SERIES], 1))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def observe_live(self, profile: PlatformProfile, observations: list[Observation], cost: LiveCost) -> None:
        """Per-job transport series for the jobs followed now; series of jobs no longer running are removed."""
        import time

        from fabricguard.profile.model import Transport

        transports: dict[Labels, float] = {}
        sockets: dict[Labels, float] = {}
        for ob in observations:
            job = ob.job
            transport = ob.verdict.transport
            transports[job.namespace, job.name, job.pool, transport.value] = 1
            expected = profile.pool(job.pool).fabric.expected_transports
            on_sockets = transport in (Transport.socket, Transport.mixed) and transport not in expected
            sockets[job.namespace, job.name, job.pool] = 1 if on_sockets else 0
        self._job_transport.update(transports)
        self._job_on_sockets.update(sockets)
        self._observe_io(observations)
        self._observe_busbw(observations)
        self.live_inspector_files.set(cost.inspector_files)
        if cost.inspector_bytes_total > self._inspector_bytes_seen:
            self.live_inspector_bytes.inc(cost.inspector_bytes_total - self._inspector_bytes_seen)
            self._inspector_bytes_seen = cost.inspector_bytes_total
        self.live_jobs.set(cost.followed)
        self.live_unfollowed.set(cost.unfollowed)
        self.live_lag.set(round(cost.lag_s, 3))
        if cost.descriptor_shortages > self._fd_short_seen:
            self.fd_short.inc(cost.descriptor_shortages - self._fd_short_seen)
            self._fd_short_seen = cost.descriptor_shortages
        from fabricguard.descriptors import open_count

        self.fd_open.set(open_count())
        self.live_files.set(cost.files)
        if cost.bytes_total > self._live_bytes_seen:
            self.live_bytes.inc(cost.bytes_total - self._live_bytes_seen)
            self._live_bytes_seen = cost.bytes_total
        self.live_poll_seconds.set(cost.last_poll_s)
        self.live_last_poll.set(time.time())

    def _observe_io(self, observations: list[Observation]) -> None:
        """Per running job: its bound, its I/O share and per-phase rates; series of jobs or phases gone are
        removed."""
        share: dict[Labels, float] = {}
        mbps: dict[Labels, float] = {}
        bound: dict[Labels, float] = {}
        for ob in observations:
            ns, name, pool = ob.job.namespace, ob.job.name, ob.job.pool
            if ob.io is not None:
                for ph in ob.io.phases:
                    if ph.mbps is not None:
                        mbps[ns, name, ph.phase] = round(ph.mbps, 1)
                if ob.io.share is not None:
                    share[ns, name, pool] = round(ob.io.share, 4)
            bound[ns, name, pool, ob.bound] = 1
        for series, values in zip(self._job_io, (share, mbps, bound), strict=True):
            series.update(values)

    def _observe_busbw(self, observations: list[Observation]) -> None:
        """Per job, collective and communicator shape, the Inspector's busbw and the shape's floor; series of jobs,
        collectives or shapes gone are removed."""
        busbw: dict[Labels, float] = {}
        below: dict[Labels, float] = {}
        floor: dict[Labels, float] = {}
        for ob in observations:
            v = ob.busbw
            if v is None or not v.figures:
                continue
            ns, name = ob.job.namespace, ob.job.name
            for (c, k), f in v.figures.items():
                busbw[ns, name, c, str(k)] = round(f.busbw_gbps, 3)
                below[ns, name, c, str(k)] = f.below_minutes
                if f.floor_gbps is not None:
                    floor[ns, name, ob.job.pool, str(k)] = round(f.floor_gbps, 3)
        for series, values in zip(self._job_busbw, (busbw, below, floor), strict=True):
            series.update(values)
        self._observe_ranks(observations)

    def _observe_ranks(self, observations: list[Observation]) -> None:
        """Per job: the confirmed late ranks, the per-node view and the suspects; series gone are removed."""
        late: dict[Labels, float] = {}
        ratio: dict[Labels, float] = {}
        gbps: dict[Labels, float] = {}
        suspect: dict[Labels, float] = {}
        for ob in observations:
            v = ob.busbw.ranks if ob.busbw is not None else None
            if v is None:
                continue
            ns, name = ob.job.namespace, ob.job.name
            for r in v.confirmed_late():
                late[ns, name, r.hostname, str(r.rank)] = round(r.lateness_s, 6)
            for n in v.nodes:
                ratio[ns, name, n.hostname] = round(n.ratio, 3)
                for k, g in n.busbw_gbps.items():
                    gbps[ns, name, n.hostname, str(k)] = round(g, 3)
            for s in v.confirmed_slow():
                suspect[ns, name, s.hostname] = round(s.confidence, 3)
        for series, values in zip(self._ranks, (late, ratio, gbps, suspect), strict=True):
            series.update(values)
        self._job_hung.update({
            (ob.job.namespace, ob.job.name, str(w.get("node") or w.get("ip") or ""), str(w.get("rank"))): 1
            for ob in observations for w in (ob.hang or {}).get("waited_for") or ()})

class HealthApp:
    """``/healthz`` (and ``/livez``): 200, or 503 with the reason (passes failing, stalled, a stale cache); and
    ``/metrics``, rendered on a thread with a deadline (``health_http.Render``)."""

    def __init__(self, metrics: Metrics) -> None:
        from fabricguard.health_http import RENDER_TIMEOUT, Render

        self.metrics = metrics
        self._render = Render(metrics)
        self._timeout = RENDER_TIMEOUT

    async def answer(self, path: str, accept: str) -> tuple[int, str, bytes]:
        if path in ("/healthz", "/livez"):
            ok, why = self.metrics.health()
            return (200 if ok else 503), "text/plain; charset=utf-8", why.encode()
        if path == "/metrics" or path == "/":
            return await self._render(accept, self._timeout)
        return 404, "text/plain", b"/healthz or /metrics\n"


def serve(metrics: Metrics, port: int, addr: str = "0.0.0.0") -> Any:
    """Serve ``/healthz`` and ``/metrics`` on ``port`` with the one bounded server (``fabricguard.health_http``:
    one event loop on a daemon thread, a header deadline, at most 64 connections, half of them per address, idle
    ones closed for new ones), not a thread
    per connection: 1,005 idle connections no longer starve the liveness probe. Returns the server
    (``server_port``, ``shutdown``); ``OSError`` when the port cannot be bound."""
    from fabricguard.health_http import MetricsServer

    return MetricsServer(HealthApp(metrics), addr, port, name="controller-http")
