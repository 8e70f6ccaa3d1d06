"""The controller's Prometheus metrics, on its own registry, updated from each pass's result.

Gauges are set from the pass's standings (so they are right after a restart); counters count what the
controller itself recorded (a canary run written to a FabricValidation, a verdict written to a job).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from fabricguard.controller.outcome import Outcome
from fabricguard.controller.reconcile import PassResult
from fabricguard.profile.model import PlatformProfile


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.canary_runs = Counter("fabricguard_canary_runs", "Canary runs recorded, by outcome.",
                                   ["pool", "outcome"], registry=r)
        self.last_success = Gauge("fabricguard_canary_last_success_timestamp_seconds",
                                  "Finish time of the pool's latest passed canary.", ["pool"], registry=r)
        self.busbw = Gauge("fabricguard_canary_busbw_gbps",
                           "Peak bus bandwidth of the pool's latest judged canary, per collective.",
                           ["pool", "collective"], registry=r)
        self.floor = Gauge("fabricguard_canary_busbw_floor_gbps", "The pool's all-reduce busbw floor.",
                           ["pool"], registry=r)
        self.last_outcome = Gauge("fabricguard_canary_last_outcome",
                                  "1 for the outcome of the pool's latest canary run, 0 for the others.",
                                  ["pool", "outcome"], registry=r)
        self.interval = Gauge("fabricguard_canary_interval_seconds", "The pool's canary interval.", ["pool"],
                              registry=r)
        self.ready = Gauge("fabricguard_pool_fabric_validated",
                           "1 when the pool's latest canary passed within two intervals.", ["pool"], registry=r)
        self.verdicts = Counter("fabricguard_job_verdicts", "Verdicts of finished managed jobs.",
                                ["pool", "verdict", "transport"], registry=r)
        self.findings = Gauge("fabricguard_doctor_findings", "Doctor findings on the latest pass.",
                              ["rule", "severity"], registry=r)
        self.pending = Gauge("fabricguard_admission_check_pending_workloads",
                             "Workloads the fabric-validated check holds in Pending.", ["pool"], registry=r)
        self.pass_seconds = Gauge("fabricguard_reconcile_duration_seconds", "Duration of the latest pass.",
                                  registry=r)
        self.last_pass = Gauge("fabricguard_reconcile_last_timestamp_seconds", "End of the latest pass.",
                               registry=r)
        self.errors = Counter("fabricguard_reconcile_errors", "Actions the API server refused.", registry=r)
        self.leader = Gauge("fabricguard_controller_leader", "1 while this replica holds the Lease.", registry=r)
        self._finding_keys: set[tuple[str, str]] = set()

    def observe(self, profile: PlatformProfile, result: PassResult, seconds: float, errors: int) -> None:
        from fabricguard.controller.objects import parse_time

        for pool, outcome in result.counters.canary_runs:
            self.canary_runs.labels(pool, outcome).inc()
        for pool, verdict, transport in result.counters.job_verdicts:
            self.verdicts.labels(pool, verdict, transport).inc()
        for p in profile.spec.pools:
            s = result.pools.get(p.name)
            if s is None or not s.canary:
                continue
            self.interval.labels(p.name).set(s.interval_s)
            self.ready.labels(p.name).set(1 if s.ready else 0)
            t = parse_time(s.last_success)
            if t is not None:
                self.last_success.labels(p.name).set(t.timestamp())
            for o in Outcome:
                self.last_outcome.labels(p.name, str(o)).set(1 if s.latest == str(o) else 0)
            for coll, v in s.busbw.items():
                self.busbw.labels(p.name, coll).set(v)
            if p.baseline.busbw_floor_gbps is not None:
                self.floor.labels(p.name).set(p.baseline.busbw_floor_gbps)
            self.pending.labels(p.name).set(result.pending.get(p.name, 0))
        counts: dict[tuple[str, str], int] = {}
        for f in result.findings:
            key = (f.rule, str(f.severity))
            counts[key] = counts.get(key, 0) + 1
        for key in self._finding_keys - set(counts):
            self.findings.labels(*key).set(0)  # a cleared finding reads 0, not a stale count
        for key, n in counts.items():
            self.findings.labels(*key).set(n)
        self._finding_keys |= set(counts)
        self.pass_seconds.set(seconds)
        self.last_pass.set(result.now.timestamp())
        if errors:
            self.errors.inc(errors)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
