"""A canary's outcome, with its evidence: passed, degraded, fallback, failed, unschedulable, not-created or skipped.

Nothing here re-derives a transport or a bandwidth judgement. The ranks' NCCL logs and each node's mountinfo
are judged by ``verify-job``'s rules (:func:`fabricguard.verdict.job.judge_job`, which reads the logs with the
``nccl`` scanner), and the probe's measurements by the collective probe's own judge
(:func:`fabricguard.probes.bw.judge`). This module only maps their reasons onto the canary's outcomes, in
order of severity: a failure beats a fallback, which beats a degradation.
"""

from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from fabricguard import objects as o
from fabricguard.controller.storage_proof import StorageProof, judge_storage
from fabricguard.nccl.inspector import summarize
from fabricguard.probes.bw import Row, SlowRail, expectation_for, judge, slow_rails
from fabricguard.probes.records import CollectiveRecord, RecordError, StorageRecord
from fabricguard.probes.result import Status
from fabricguard.profile.model import PlatformProfile, Pool
from fabricguard.userfiles import SourceError, open_in, read_text, walk_files
from fabricguard.verdict import busbw as inspector_busbw
from fabricguard.verdict.job import JobInputError, Level, judge_job

MAX_EVIDENCE = 6


class Outcome(StrEnum):
    passed = "passed"
    degraded = "degraded"
    fallback = "fallback"
    failed = "failed"
    unschedulable = "unschedulable"
    # No pod of the canary was ever created (no JobSet controller, pod creation refused by Pod Security, a
    # quota or a webhook): nothing reached the scheduler, so nothing here blames the fabric's device plugin.
    not_created = "not-created"
    skipped = "skipped"


# Outcomes that say something about the fabric; `skipped` says only that no canary could run.
JUDGED = frozenset(Outcome) - {Outcome.skipped}


@dataclass
class CanaryRun:
    """One canary run as the FabricValidation's status keeps it."""

    name: str
    outcome: Outcome
    started: str
    finished: str
    message: str
    evidence: list[str] = field(default_factory=list)
    transport: str | None = None
    busbwGBps: dict[str, float] = field(default_factory=dict)
    nodes: list[str] = field(default_factory=list)
    # NCCL's Inspector in the canary's ranks: the same instrument the pool's running jobs are measured with.
    inspectorBusbwGBps: dict[str, float] = field(default_factory=dict)
    # The storage probe's judgement (controller/storage_proof.py): the pool's storage, apart from its fabric.
    storage: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["outcome"] = str(self.outcome)
        return {k: v for k, v in d.items() if v not in (None, [], {})}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CanaryRun | None:
        try:
            outcome = Outcome(str(d.get("outcome")))
        except ValueError:
            return None
        return cls(
            name=str(d.get("name", "")),
            outcome=outcome,
            started=str(d.get("started", "")),
            finished=str(d.get("finished", "")),
            message=str(d.get("message", "")),
            evidence=[str(e) for e in d.get("evidence") or ()],
            transport=d.get("transport"),
            busbwGBps={str(k): float(v) for k, v in (d.get("busbwGBps") or {}).items()},
            nodes=[str(n) for n in d.get("nodes") or ()],
            inspectorBusbwGBps={str(k): float(v) for k, v in (d.get("inspectorBusbwGBps") or {}).items()},
            storage=sp.to_dict() if (sp := StorageProof.from_dict(d.get("storage"))) is not None else None,
        )


@dataclass
class Judged:
    outcome: Outcome
    message: str
    evidence: list[str]
    transport: str | None
    busbw: dict[str, float]
    inspector: dict[str, float] = field(default_factory=dict)
    storage: StorageProof | None = None
    rails: list[SlowRail] = field(default_factory=list)  # a pair test's slow rails (probe collective --rails)


def _inspector_figures(profile: PlatformProfile, log_dir: Path) -> dict[str, float]:
    """Median busbw per collective from the canary ranks' Inspector records (empty: the plugin was not there)."""
    d = inspector_busbw.inspector_dir(profile, log_dir)
    if d is None:
        return {}
    recs, _read = inspector_busbw.records_of([], d, inspector_busbw.job_root(profile, log_dir))
    figures = summarize(recs, inspector_busbw.large_bytes(profile))  # the canary's communicators: one shape
    return {c: round(f.busbw_gbps, 3) for c, f in figures.items()}


def _ev_line(e: dict[str, Any], base: Path) -> str:
    f = str(e.get("file") or "")
    try:
        f = str(Path(f).relative_to(base))
    except ValueError:
        f = Path(f).name
    where = f"{f}:{e['line']}" if e.get("line") else f
    why = str(e.get("why") or e.get("text") or "").strip()
    return f"{where} {why}".strip()


MAX_RESULT_BYTES = 16 * 1024**2  # one probe result document (a 64-rank collective sweep is ~100 KiB)
MAX_RESULT_FILES = 4096  # files directly in a canary's result folder looked at (one per rank and node)
STDERR_TAIL = 4096  # bytes of a rank's stderr read, from its end


def _tail(path: Path, within: Path) -> str:
    """The last :data:`STDERR_TAIL` bytes of ``path`` as text, opened inside ``within``; "" when it cannot be."""
    try:
        with open_in(within, path) as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - STDERR_TAIL))
            return fh.read(STDERR_TAIL).decode("utf-8", errors="replace")
    except (SourceError, OSError):
        return ""


def _load_results(result_dir: Path, pattern: str, record: Any) -> tuple[list[Any], list[str]]:
    """The probe result documents matching ``pattern``, read as ``record`` (``probes.records``); the files that
    are not the probe's document, each with why.

    The folder is on the Lustre claim every tenant writes to: it is listed bounded and without following a link
    out of it (``userfiles.walk_files``, files directly in it), and each file is opened inside it
    (``userfiles.open_in``: no link, a regular file, at most :data:`MAX_RESULT_BYTES`). A FIFO named like a
    result would otherwise block the controller's pass on its read; a link, a device or an over-large file is
    named in ``bad`` (the canary fails, saying which file)."""
    docs: list[Any] = []
    bad: list[str] = []
    walk = walk_files(result_dir, max_files=MAX_RESULT_FILES, max_depth=0) if result_dir.is_dir() else None
    if walk is None:
        return docs, bad
    bad += [f"{f.name}: {why}" for f, why in walk.refused if fnmatch.fnmatchcase(f.name, pattern)]
    for f in (f for f in walk.files if fnmatch.fnmatchcase(f.name, pattern)):
        try:
            text = read_text(f, max_bytes=MAX_RESULT_BYTES, within=result_dir).strip()
        except SourceError as exc:
            bad.append(f"{f.name}: {exc.problem}")
            continue
        try:
            doc = json.loads(text)
        except ValueError:
            said = _tail(f.with_suffix(".stderr"), result_dir).strip()
            said = " ".join(said.splitlines()[-3:])[-300:]
            bad.append(f"{f.name}: not the probe's JSON ({text[:120] or 'empty'})" + (f"; it said: {said}" if said
                                                                                         else ""))
            continue
        try:
            docs.append(record.from_dict(doc))
        except RecordError as e:
            bad.append(f"{f.name}: not the probe's result ({e})")
    return docs, bad


def _peaks(rows: list[Row]) -> dict[str, float]:
    out: dict[str, float] = {}
    for r in rows:
        out[r.collective] = max(out.get(r.collective, 0.0), r.busbw_gbps)
    return {k: round(v, 3) for k, v in out.items()}


def judge_canary(profile: PlatformProfile, pool: Pool, run_dir: Path, log_dir: Path, result_dir: Path) -> Judged:
    """Judge a finished canary from what its pods left on Lustre."""
    collective: list[CollectiveRecord]
    storage: list[StorageRecord]
    collective, bad = _load_results(result_dir, "collective.rank*.json", CollectiveRecord)
    storage, bad_storage = _load_results(result_dir, "storage.node*.json", StorageRecord)
    failed: list[str] = list(bad)
    fallback: list[str] = []
    degraded: list[str] = []
    evidence: list[str] = []
    transport: str | None = None

    rank0 = next((d for d in collective if d.world_size and d.rows), None)
    rows = rank0.rows if rank0 is not None else []
    if not collective and not bad:
        failed.append(f"no collective probe result in {result_dir} (the pods did not get to run the probe)")
    for d in collective:
        if d.failed:
            failed.append(f"collective probe failed: {d.error or 'no error text'}")

    # Bounded, and no link followed out of the folder: judge_job walks it again, whole, when there is a log.
    listed = walk_files(log_dir, max_files=64) if log_dir.is_dir() else None
    logs_present = listed is not None and (listed.truncated is not None or bool(listed.refused) or any(
        not p.name.startswith("mountinfo") for p in listed.files))
    if logs_present:
        try:
            verdict = judge_job(log_dir, profile, pool.name)
        except JobInputError as e:
            failed.append(str(e))
        else:
            transport = verdict.nccl.inter_node_transport.value
            for r in verdict.reasons:
                lines = [_ev_line(e, run_dir) for e in r.evidence[:3]]
                if r.level is Level.failed:
                    failed.append(r.message)
                    evidence += lines
                elif r.level is Level.degraded and r.check == "transport" and transport == "socket":
                    fallback.append(r.message)
                    evidence += lines
                elif r.level is Level.degraded and r.check == "transport":
                    failed.append(r.message)  # not proven on a fabric pool: the canary cannot pass
                    evidence += lines
                elif r.level is Level.degraded:
                    degraded.append(r.message)
                    evidence += lines
    elif rank0 is not None and rank0.backend == "gloo":
        # gloo writes no NCCL log; it moves tensors over TCP by construction (the probe says so).
        transport = rank0.transport if rank0.transport != "unknown" else "socket"
        if pool.fabric.has_fabric:
            fallback.append(f"the probe ran on gloo ({rank0.transport_why}); pool {pool.name} has a fabric")
    elif collective:
        failed.append(f"no NCCL log in {log_dir}: NCCL_DEBUG_FILE was not written, so the transport is unproven")

    expect = expectation_for(pool)
    slow = slow_rails(rank0.rails, expect.floor_gbps) if rank0 is not None else []
    for rail in slow:
        degraded.append(f"slow rail: {rail.text()}")
    if rows:
        j = judge(rows, transport or "unknown", "", expect)
        for c in j.checks:
            if c.name == "collective.correct" and c.status is Status.failed:
                failed.append(f"collective results were wrong: {c.detail}")
            if c.name == "collective.busbw" and c.status is Status.degraded:
                degraded.append(f"busbw below the floor: {c.detail}")
    # The storage probe's results are the pool's storage proof, judged apart: a slow file system is the file
    # system's, not the fabric's (controller/storage_proof.py). A run whose pods never started left neither.
    canary = profile.canary(pool)
    sp = (judge_storage(pool, storage, bad_storage, canary.nodes if canary else len(storage))
          if storage or bad_storage or collective or bad else None)

    busbw = _peaks(rows)
    ins = _inspector_figures(profile, log_dir)
    if failed:
        return Judged(Outcome.failed, failed[0], (failed[1:] + evidence)[:MAX_EVIDENCE], transport, busbw, ins, sp,
                      slow)
    if fallback:
        return Judged(Outcome.fallback, fallback[0], (evidence + fallback[1:])[:MAX_EVIDENCE], transport, busbw, ins,
                      sp, slow)
    if degraded:
        return Judged(Outcome.degraded, degraded[0], (degraded[1:] + evidence)[:MAX_EVIDENCE], transport, busbw, ins,
                      sp, slow)
    peak = ", ".join(f"{k} {v:g} GB/s" for k, v in busbw.items())
    if ins:
        peak += "; Inspector " + ", ".join(f"{k} {v:g} GB/s" for k, v in ins.items())
    return Judged(Outcome.passed, f"transport {transport}; {peak}", evidence[:MAX_EVIDENCE], transport, busbw, ins,
                  sp, slow)


def scheduler_reason(pods: list[dict[str, Any]], events: list[dict[str, Any]]) -> str:
    """The scheduler's own words for why the canary's pods are Pending (latest FailedScheduling event)."""
    names = {o.name_of(p) for p in pods}
    best: tuple[str, str] | None = None
    for e in events:
        inv = e.get("involvedObject") or e.get("regarding") or {}
        if inv.get("kind") != "Pod" or inv.get("name") not in names or e.get("reason") != "FailedScheduling":
            continue
        when = str(e.get("lastTimestamp") or e.get("eventTime")
                   or (e.get("metadata") or {}).get("creationTimestamp") or "")
        msg = str(e.get("message") or e.get("note") or "")
        if best is None or when >= best[0]:
            best = (when, msg)
    if best is not None:
        return best[1]
    for p in pods:
        c = o.find_condition(p, "PodScheduled")
        if c and c.get("status") == "False" and c.get("message"):
            return str(c["message"])
    return "no FailedScheduling event and no PodScheduled message (is a scheduler running for these pods?)"


def creation_reason(jobset: str, namespace: str, events: list[dict[str, Any]], jobs_seen: bool) -> str:
    """Why no pod of the canary JobSet ``jobset`` exists: the newest refusal its Jobs (or the JobSet) got
    (``FailedCreate``: Pod Security, a quota, a webhook), else what the missing controller means."""
    best: tuple[str, str, str] | None = None
    for e in events:
        inv = e.get("involvedObject") or e.get("regarding") or {}
        name = str(inv.get("name") or "")
        if inv.get("namespace", namespace) != namespace or not (name == jobset or name.startswith(jobset + "-")):
            continue
        if inv.get("kind") not in ("Job", "JobSet") or str(e.get("type", "Warning")) != "Warning":
            continue
        when = str(e.get("lastTimestamp") or e.get("eventTime")
                   or (e.get("metadata") or {}).get("creationTimestamp") or "")
        msg = f"{inv.get('kind')} {namespace}/{name}: {e.get('reason')}: {e.get('message') or e.get('note') or ''}"
        if best is None or when >= best[0]:
            best = (when, str(e.get("reason")), msg)
    if best is not None:
        return f"pod creation was refused: {best[2]}"
    if not jobs_seen:
        return (f"the JobSet made no Job: is the JobSet controller running (kubectl get jobset -n {namespace} "
                f"{jobset} -o yaml shows no status)?")
    return (f"its Jobs created no pod and no event says why (kubectl describe jobs -n {namespace} -l "
            f"jobset.sigs.k8s.io/jobset-name={jobset})")
