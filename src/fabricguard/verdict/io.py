"""Where a job's time went on storage: its checkpoint and data I/O phases against the pool's storage floor, so a
job slowed by storage is told apart from one slowed by the fabric.

The Lustre *client* keeps no per-job statistics: job_stats live on the servers (``obdfilter.*.job_stats``,
``mdt.*.job_stats``; lustre-release ``obdclass/lprocfs_jobstats.c``), which managed services do not expose. So a
job's I/O is read from what the job itself logs beside its step times (``steps.IoRecord``: phase, seconds, bytes,
step, one record per rank). The webhook still tags every request with the job (``FABRICGUARD_LUSTRE_JOBID``) for
clusters whose operators can read the servers' job_stats.

Ranks write their shards of one checkpoint at the same time, so one phase instance (phase, step) moves the sum of
the ranks' bytes in the slowest rank's seconds: that aggregate rate is what the storage probe's baseline
(``storageWriteMBps``/``storageReadMBps``, all ranks) measures too. A job's I/O share is the phases' seconds over
the phases' plus the steps' seconds (step times exclude the I/O phases the job logs apart).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fabricguard.profile.model import Pool
from fabricguard.verdict.steps import IoRecord, StepTimes

WRITE_PHASES = ("checkpoint-write",)


@dataclass(frozen=True)
class PhaseFigures:
    """One phase over the whole job: its instances, seconds, bytes and aggregate rate, against its floor."""

    phase: str
    instances: int
    seconds: float
    bytes: int | None
    floor_mbps: float | None

    @property
    def mbps(self) -> float | None:
        if not self.bytes or self.seconds <= 0:
            return None
        return self.bytes / self.seconds / 1e6

    @property
    def below_floor(self) -> bool:
        return self.floor_mbps is not None and self.mbps is not None and self.mbps < self.floor_mbps

    def to_dict(self) -> dict[str, Any]:
        return {"phase": self.phase, "instances": self.instances, "seconds": round(self.seconds, 3),
                "bytes": self.bytes, "mbps": None if self.mbps is None else round(self.mbps, 1),
                "floor_mbps": self.floor_mbps, "below_floor": self.below_floor}


@dataclass(frozen=True)
class IoSummary:
    phases: list[PhaseFigures]
    io_seconds: float
    step_seconds: float
    share_limit: float

    @property
    def share(self) -> float | None:
        total = self.io_seconds + self.step_seconds
        return self.io_seconds / total if total > 0 and self.phases else None

    @property
    def storage_bound(self) -> bool:
        """Much of the job's time in I/O, moving slower than the pool's storage floor."""
        share = self.share
        return share is not None and share > self.share_limit and any(p.below_floor for p in self.phases)

    def to_dict(self) -> dict[str, Any]:
        share = self.share
        return {"share": None if share is None else round(share, 4), "share_limit": self.share_limit,
                "io_seconds": round(self.io_seconds, 3), "step_seconds": round(self.step_seconds, 3),
                "storage_bound": self.storage_bound, "phases": [p.to_dict() for p in self.phases]}


def floor_mbps(pool: Pool, phase: str) -> float | None:
    b = pool.baseline
    base = b.storageWriteMBps if phase in WRITE_PHASES else b.storageReadMBps
    return None if base is None else base * b.floorFraction


MAX_INSTANCES = 200_000  # phase instances a tally keeps (a job checkpointing every step for 200k steps)


@dataclass
class IoTally:
    """A job's I/O phases and step times, added up as records arrive (``verify-job`` after the job, the
    controller's live reader while it runs): each phase instance (phase, step) keeps its slowest rank's seconds
    and its ranks' summed bytes; each step its slowest rank's seconds. Past ``MAX_INSTANCES`` instances or steps
    the oldest are folded into running totals (``folded``), so memory stays bounded and the figures stay whole."""

    instances: dict[tuple[str, int | None, int], tuple[float, int | None]] = field(default_factory=dict)
    steps: dict[int, float] = field(default_factory=dict)
    folded_phases: dict[str, tuple[int, float, int | None]] = field(default_factory=dict)
    folded_step_seconds: float = 0.0
    folded: int = 0
    _loose: int = 0

    def add_io(self, r: IoRecord) -> None:
        # Records without a step cannot be paired across ranks: each is its own instance.
        if r.step is None:
            self._loose += 1
        key = (r.phase, r.step, 0 if r.step is not None else self._loose)
        sec, size = self.instances.get(key, (0.0, 0))
        self.instances[key] = (max(sec, r.seconds), None if size is None or r.bytes is None else size + r.bytes)
        if len(self.instances) > MAX_INSTANCES:
            old = next(iter(self.instances))
            osec, osize = self.instances.pop(old)
            n, fsec, fsize = self.folded_phases.get(old[0], (0, 0.0, 0))
            self.folded_phases[old[0]] = (n + 1, fsec + osec, None if fsize is None or osize is None else fsize + osize)
            self.folded += 1

    def add_step(self, step: int, seconds: float) -> None:
        if seconds > self.steps.get(step, -1.0):
            self.steps[step] = seconds
        if len(self.steps) > MAX_INSTANCES:
            self.folded_step_seconds += self.steps.pop(next(iter(self.steps)))
            self.folded += 1

    @property
    def empty(self) -> bool:
        return not self.instances and not self.folded_phases

    def summary(self, pool: Pool) -> IoSummary | None:
        """The phases against the pool's storage floor, or None when the job logged no I/O phase."""
        if self.empty:
            return None
        per_phase = dict(self.folded_phases)
        for (phase, _step, _i), (sec, size) in self.instances.items():
            n, psec, psize = per_phase.get(phase, (0, 0.0, 0))
            per_phase[phase] = (n + 1, psec + sec, None if psize is None or size is None else psize + size)
        phases = [PhaseFigures(p, n, sec, size, floor_mbps(pool, p)) for p, (n, sec, size) in sorted(per_phase.items())]
        return IoSummary(phases, sum(p.seconds for p in phases), self.folded_step_seconds + sum(self.steps.values()),
                         pool.baseline.ioShareLimit)


def summarize(pool: Pool, steps: StepTimes) -> IoSummary | None:
    """The job's I/O phases against the pool's storage floor, or None when the job logged none."""
    if not steps.io:
        return None
    tally = IoTally()
    for r in steps.io:
        tally.add_io(r)
    s = tally.summary(pool)
    return None if s is None else IoSummary(s.phases, s.io_seconds, steps.total_seconds, s.share_limit)


def describe(s: IoSummary) -> tuple[str, str]:
    """(level, message) of the job's I/O: ``degraded`` when storage-bound, ``warning`` when a phase is below its
    floor but takes little of the job's time, ``info`` otherwise."""
    share = s.share or 0.0
    parts = []
    for p in s.phases:
        rate = f"{p.mbps:,.0f} MB/s" if p.mbps is not None else "rate unknown (no bytes logged)"
        floor = f", floor {p.floor_mbps:,.0f} MB/s" if p.floor_mbps is not None else ", no storage baseline"
        parts.append(f"{p.phase} {p.seconds:,.1f} s in {p.instances} at {rate}{floor}")
    figures = "; ".join(parts)
    head = f"{share:.0%} of the job's time in storage I/O ({figures})"
    if s.storage_bound:
        return "degraded", (f"storage-bound: {head}, above the {s.share_limit:.0%} the pool allows below its floor. "
                            "The slowdown is the file system, not the fabric: check the Lustre client's health on the "
                            "job's nodes and the file system's load")
    if any(p.below_floor for p in s.phases):
        return "warning", f"{head}: slower than the pool's storage floor, but too small a share to bound the job"
    if share > s.share_limit:
        return "info", f"I/O-heavy: {head}; the storage kept its floor, the job moves a lot of data"
    return "info", head
