"""The storage canary: whether a pool's Lustre is proven, kept apart from whether its fabric is.

Every canary pod runs ``probe storage`` on the pool's Lustre path right after the collective probe (the
collective ends on all ranks together, so the nodes write at the same time). The controller judges what the
nodes left as the pool's **storage proof**, separately from the fabric's outcome, so a slow file system is said
to be the file system's ("storage degraded") and a broken fabric the fabric's:

- ``failed``: a node's path is not on Lustre (``storage.fstype``), read back different data
  (``storage.checksum``), could not run the workload, saw the Lustre client unhealthy (``lustre.*``), or left no
  result a probe writes;
- ``degraded``: the nodes' summed write or read rate is under the pool's storage floor (``baseline.
  storageWriteMBps``/``storageReadMBps`` × ``floorFraction``, the same floor ``verify-job`` holds jobs' I/O to);
- ``passed``: otherwise. A phase too short to mean anything (``probe storage``'s ``meaningful``) is not held to
  the floor; the proof says so (``floorJudged: false``) instead of failing the pool for the canary's own size.

A pool's storage is **ready** when the newest run that judged storage passed within two canary intervals: the
pool's one standing (``PoolState.ready``, the Kueue check, the exit code) then needs both. Pure logic: records in,
values out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fabricguard import times
from fabricguard.probes.records import PhaseRate, StorageRecord
from fabricguard.probes.result import Status
from fabricguard.profile.model import Canary, Pool
from fabricguard.verdict.io import floor_mbps

OUTCOMES = ("passed", "degraded", "failed")
# Checks of ``probe storage`` whose failure means the path cannot hold a job's data. ``storage.throughput`` is not
# one: the floor is judged here, on the nodes' summed rate.
_FAILING = ("storage.fstype", "storage.checksum", "storage.workload", "lustre.")


@dataclass(frozen=True)
class StorageProof:
    """One canary run's judgement of the pool's storage."""

    outcome: str  # one of OUTCOMES
    message: str
    nodes: int = 0  # nodes whose probe left a result
    writeMBps: float | None = None  # summed over the nodes
    readMBps: float | None = None
    floorWriteMBps: float | None = None
    floorReadMBps: float | None = None
    floorJudged: bool = False

    def to_dict(self) -> dict[str, Any]:
        d = {"outcome": self.outcome, "message": self.message[:1000], "nodes": self.nodes,
             "writeMBps": _round(self.writeMBps), "readMBps": _round(self.readMBps),
             "floorWriteMBps": _round(self.floorWriteMBps), "floorReadMBps": _round(self.floorReadMBps),
             "floorJudged": self.floorJudged}
        return {k: v for k, v in d.items() if v is not None}

    @classmethod
    def from_dict(cls, d: Any) -> StorageProof | None:
        if not isinstance(d, dict) or d.get("outcome") not in OUTCOMES:
            return None
        return cls(str(d["outcome"]), str(d.get("message") or ""), _int(d.get("nodes")), _num(d.get("writeMBps")),
                   _num(d.get("readMBps")), _num(d.get("floorWriteMBps")), _num(d.get("floorReadMBps")),
                   d.get("floorJudged") is True)


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 1)


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0


def _sum(rates: list[PhaseRate | None]) -> tuple[float | None, bool]:
    """(the nodes' summed rate, whether every node's phase lasted long enough to mean anything)."""
    got = [r for r in rates if r is not None]
    if not got:
        return None, False
    return sum(r.mbps for r in got), all(r.meaningful for r in got)


def judge_storage(pool: Pool, records: list[StorageRecord], unusable: list[str], expected_nodes: int) -> StorageProof:
    """The pool's storage as one canary run's nodes found it."""
    failed: list[str] = [f"storage probe gave no result: {b}" for b in unusable]
    for n, rec in enumerate(records):
        for c in rec.checks:
            if c.status is Status.failed and c.name.startswith(_FAILING):
                failed.append(f"{c.name}: {c.detail}")
        if not rec.checks and rec.status is Status.failed:
            failed.append(f"storage probe of node {n} failed without a check")
    if len(records) + len(unusable) < expected_nodes:
        failed.append(f"{expected_nodes - len(records) - len(unusable)} of the canary's {expected_nodes} nodes left "
                      "no storage probe result (storage.node<i>.json)")
    write, write_ok = _sum([r.write for r in records])
    read, read_ok = _sum([r.read for r in records])
    fw, fr = floor_mbps(pool, "checkpoint-write"), floor_mbps(pool, "checkpoint-read")
    phases = (("write", write, fw, write_ok), ("read", read, fr, read_ok))
    judged = [(what, got, floor) for what, got, floor, ok in phases if floor is not None and got is not None and ok]
    short = [what for what, got, floor, ok in phases if floor is not None and got is not None and not ok]
    below = [f"{what} {got:,.0f} MB/s < floor {floor:,.0f}" for what, got, floor in judged if got < floor]
    rates = ", ".join(f"{what} {got:,.0f} MB/s" for what, got, _, _ in phases if got is not None)
    on = f"{len(records)} node(s)" + (f", {rates} summed" if rates else "")

    def proof(outcome: str, message: str) -> StorageProof:
        return StorageProof(outcome, message, len(records), write, read, fw, fr, bool(judged) and not short)

    if failed:
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        return proof("failed", f"storage failed on {on}: {failed[0]}{more}")
    if below:
        return proof("degraded", f"storage below the pool's floor on {on}: {'; '.join(below)} "
                     "(baseline.storage*MBps x floorFraction): check the file system's load and the Lustre "
                     "clients' health")
    if fw is None and fr is None:
        note = "no storage baseline in the profile, so the floor is not judged"
    elif write is None and read is None:
        note = "the results carry no write or read rate, so the floor is not judged"
    elif short:
        note = (f"{' and '.join(short)} too short to judge against the floor (raise canary.storageSize): "
                "the path is proven on Lustre, its rate is not")
    else:
        note = "at the pool's floor"
    return proof("passed", f"storage on Lustre on {on}; {note}")


@dataclass
class StorageStanding:
    """A pool's storage after this pass: ready or not, why, and the proof it stands on."""

    ready: bool
    message: str
    proof: StorageProof | None = None
    run: str | None = None
    last_proven: str | None = None

    def to_status(self) -> dict[str, Any]:
        return {"ready": self.ready, "message": self.message[:1024], "run": self.run,
                "lastProven": self.last_proven, "proof": self.proof.to_dict() if self.proof else None}


def standing(pool: Pool, canary: Canary, runs: list[tuple[str, str, StorageProof | None]], previous: str | None,
             now: datetime) -> StorageStanding:
    """The pool's storage from its canary runs (``(name, finished, proof)``, newest first) and the last time it
    was proven (``previous``, kept in the status beyond the run history)."""
    proven = next((finished for _, finished, p in runs if p is not None and p.outcome == "passed"), previous)
    latest = next(((name, finished, p) for name, finished, p in runs if p is not None), None)
    if latest is None:
        return StorageStanding(False, f"pool {pool.name}: storage not proven yet: no canary has run the storage probe",
                               last_proven=proven)
    name, finished, proof = latest
    assert proof is not None
    done = times.parse_time(finished)
    fresh = done is not None and (now - done).total_seconds() <= 2 * canary.interval_s
    if proof.outcome == "passed" and fresh:
        return StorageStanding(True, f"pool {pool.name}: {proof.message} (canary {name} at {finished})", proof, name,
                               proven)
    if proof.outcome == "passed":
        return StorageStanding(False, f"pool {pool.name}: storage not proven within two canary intervals "
                               f"({2 * canary.interval_s} s); last proven {proven}", proof, name, proven)
    return StorageStanding(False, f"pool {pool.name}: {proof.message} (canary {name} at {finished})", proof, name,
                           proven)
