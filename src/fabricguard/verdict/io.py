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

from collections import defaultdict
from dataclasses import dataclass
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


def summarize(pool: Pool, steps: StepTimes) -> IoSummary | None:
    """The job's I/O phases against the pool's storage floor, or None when the job logged none."""
    if not steps.io:
        return None
    instances: dict[tuple[str, int | None, int], list[IoRecord]] = defaultdict(list)
    for i, r in enumerate(steps.io):
        # Records without a step cannot be paired across ranks: each is its own instance.
        instances[(r.phase, r.step, 0 if r.step is not None else i)].append(r)
    per_phase: dict[str, tuple[int, float, int | None]] = {}
    for (phase, _step, _i), recs in instances.items():
        n, sec, size = per_phase.get(phase, (0, 0.0, 0))
        sizes = [r.bytes for r in recs]
        add = None if any(b is None for b in sizes) else sum(b for b in sizes if b is not None)
        per_phase[phase] = (n + 1, sec + max(r.seconds for r in recs),
                            None if size is None or add is None else size + add)
    phases = [PhaseFigures(p, n, sec, size, floor_mbps(pool, p)) for p, (n, sec, size) in sorted(per_phase.items())]
    return IoSummary(phases, sum(p.seconds for p in phases), steps.total_seconds, pool.baseline.ioShareLimit)


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
