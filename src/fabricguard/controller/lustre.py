"""The controller's Lustre edge: everything a reconcile pass needs from the claim, read before the pass.

The pass itself (``reconcile.py``) is pure: it gets the listed cluster, the profile, a clock and what this
module read, and returns actions. This module reads, from the controller's read-only mount of the claim:

- for each pool with a canary, the run directories its canaries left (``canary.runs_on_lustre``) and, for every
  run the pass may judge (a canary JobSet that is over, a run on Lustre that no status records, the run the
  status last named active), the judgement of its files (``outcome.judge_canary``) and when its results were
  last written;
- for every finished workload the webhook managed that has no verdict yet, ``verify-job``'s judgement of its
  NCCL logs (``verdict.job.judge_job``), or the error its files gave; within a time budget per pass
  (``VerdictReads``), least recently tried first, the rest counted as waiting.

What it read is handed over as values (``controller/facts.py``), so the pure pass imports nothing of this module.
What a tenant wrote is judged in isolation: a file that cannot be read is recorded as that run's or job's
error, and the pass goes on.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fabricguard import kinds, names
from fabricguard import objects as o
from fabricguard.controller.canaries import run_is_over
from fabricguard.controller.canary import RESULT_SUBDIR, job_dir, log_dir, runs_on_lustre
from fabricguard.controller.facts import CanaryFiles, JobFiles, LustreFacts
from fabricguard.controller.incremental import Incremental
from fabricguard.controller.jobs import verdict_pool
from fabricguard.controller.outcome import CanaryRun, judge_canary
from fabricguard.controller.reconcile import reconcile
from fabricguard.doctor.reference import Reference
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.profile.model import PlatformProfile, Pool
from fabricguard.userfiles import SourceError, no_link_below
from fabricguard.verdict.job import JobInputError, judge_job


def newest_mtime(d: Path, limit: int = 256) -> datetime | None:
    """When the newest of (at most ``limit``) files directly in ``d`` was last written."""
    newest = 0.0
    try:
        with os.scandir(d) as it:
            for n, entry in enumerate(it):
                if n >= limit:
                    break
                with contextlib.suppress(OSError):
                    newest = max(newest, entry.stat(follow_symlinks=False).st_mtime)
    except OSError:
        return None
    return datetime.fromtimestamp(newest, UTC) if newest else None


def read_canary(profile: PlatformProfile, pool: Pool, namespace: str, name: str, root: Path) -> CanaryFiles:
    run_dir = root / job_dir(profile, namespace, name)
    try:
        no_link_below(root, root / log_dir(profile, namespace, name))
        no_link_below(root, run_dir / RESULT_SUBDIR)
        judged = judge_canary(profile, pool, run_dir, root / log_dir(profile, namespace, name),
                              run_dir / RESULT_SUBDIR)
    except (OSError, ValueError, RecursionError, MemoryError) as exc:  # the run's files, not the controller
        return CanaryFiles(str(run_dir), error=f"{type(exc).__name__}: {exc}")
    return CanaryFiles(str(run_dir), judged, None, newest_mtime(run_dir / RESULT_SUBDIR))


def read_job(profile: PlatformProfile, pool: Pool, namespace: str, name: str, root: Path) -> JobFiles:
    logs = root / log_dir(profile, namespace, name)
    try:
        try:
            no_link_below(root, logs)
        except SourceError as exc:
            raise JobInputError(str(exc)) from None
        return JobFiles(str(logs), judge_job(logs, profile, pool.name))
    except Exception as exc:  # the tenant's files, whatever they raise (JobInputError is a ValueError): this job's
        return JobFiles(str(logs), error=exc)


def load_canaries(facts: LustreFacts, snapshot: Snapshot, profile: PlatformProfile, namespace: str,
                  history: int) -> None:
    """Read every canary run the pass may judge (a superset of what ``canaries.reconcile_pool`` asks for)."""
    root = facts.root
    if root is None:
        return
    fvs = {o.name_of(fv): fv for fv in snapshot.kind(names.FV_KIND)}
    pods: dict[str, list[dict[str, Any]]] = {}
    for p in snapshot.pods:
        js = o.labels_of(p).get(names.JOBSET_NAME)
        if js and o.namespace_of(p) == namespace:
            pods.setdefault(js, []).append(p)
    for pool in profile.spec.pools:
        canary = profile.canary(pool)
        if canary is None:
            continue
        status = (fvs.get(pool.name) or {}).get("status") or {}
        recorded = {r.name for r in (CanaryRun.from_dict(d) for d in status.get("runs") or () if isinstance(d, dict))
                    if r}
        listed = [js for js in snapshot.kind("JobSet") if o.labels_of(js).get(names.LABEL_CANARY_POOL) == pool.name
                  and o.namespace_of(js) == namespace]
        wanted = [o.name_of(js) for js in listed
                  if o.name_of(js) not in recorded and run_is_over(js, pods.get(o.name_of(js), []), canary)]
        facts.runs[pool.name] = on_lustre = runs_on_lustre(profile, pool, namespace, root)
        listed_names = {o.name_of(js) for js in listed}
        wanted += [n for n in on_lustre if n not in recorded and n not in listed_names][:history]
        active = status.get("active")
        if isinstance(active, dict) and active.get("jobSet") in on_lustre:
            wanted.append(str(active["jobSet"]))
        for name in dict.fromkeys(wanted):
            facts.canaries[(namespace, name)] = read_canary(profile, pool, namespace, name, root)
        if pool.proof is not None:
            # Pair tests the status lists as running: read those that are over, or whose JobSet is gone.
            pair_canary = canary.model_copy(update={"nodes": 2})
            jobsets = {o.name_of(js): js for js in snapshot.kind("JobSet")
                       if o.labels_of(js).get(names.LABEL_PROOF_POOL) == pool.name and o.namespace_of(js) == namespace}
            proof = status.get("proof")
            for a in (proof.get("active") or ()) if isinstance(proof, dict) else ():
                pair = a.get("name") if isinstance(a, dict) else None
                if not isinstance(pair, str):
                    continue
                pair_js = jobsets.get(pair)
                if pair_js is None or run_is_over(pair_js, pods.get(pair, []), pair_canary):
                    facts.canaries[(namespace, pair)] = read_canary(profile, pool, namespace, pair, root)


VERDICT_BUDGET_S = 20.0


@dataclass
class VerdictReads:
    """How long one pass may spend reading finished jobs' logs, and when each waiting job was last read.

    A mass finish (a preemption wave, a pool drained, a quota change) leaves thousands of jobs to judge at once:
    16,667 at 20,000 nodes and 50,000 jobs took 118 s to read here (7 ms a job on a local disk; on Lustre each
    open and stat is a metadata round trip more). Read in one pass, that holds every admission decision behind
    it for minutes and can outlast the stall limit (300 s), after which the replica gives its Lease up and the
    next leader starts the same read again. So a pass reads for at most ``budget_s`` (at least one job, so a
    backlog always drains) and the rest wait, counted (``fabricguard_job_verdicts_waiting``); the least
    recently read go first, so a job whose verdict could not be written does not keep the others waiting. The
    loop keeps one across passes; a job's entry is dropped once it no longer awaits a verdict."""

    budget_s: float = VERDICT_BUDGET_S
    clock: Callable[[], float] = time.monotonic
    last_read: dict[tuple[str, str], float] = field(default_factory=dict)  # (namespace, job) -> clock


def load_jobs(facts: LustreFacts, profile: PlatformProfile, by_kind: dict[str, list[dict[str, Any]]],
              reads: VerdictReads | None = None) -> None:
    """Read the NCCL logs of the finished managed workloads that have no verdict yet, within ``reads``' budget
    (None: a fresh one with the default budget); the jobs left are counted in ``facts.jobs_waiting``."""
    root = facts.root
    if root is None:
        return
    reads = reads if reads is not None else VerdictReads()
    todo: list[tuple[tuple[str, str], Pool, str]] = []
    for k in kinds.MANAGED:
        for obj in by_kind.get(k.kind, ()):
            pool = verdict_pool(profile, obj, k.kind)
            if pool is not None:
                ns, name = o.namespace_of(obj) or "default", o.name_of(obj)
                todo.append(((ns, name), pool, k.log_name(obj) or name))
    never = float("-inf")
    todo.sort(key=lambda t: reads.last_read.get(t[0], never))  # stable: never read first, in listing order
    deadline = reads.clock() + reads.budget_s
    done = 0
    for key, pool, log_name in todo:
        if done and reads.clock() >= deadline:
            break
        facts.jobs[key] = read_job(profile, pool, key[0], log_name, root)
        reads.last_read[key] = reads.clock()
        done += 1
    facts.jobs_waiting = len(todo) - done
    if len(reads.last_read) > len(todo):  # forget the jobs that got their verdict (or are gone)
        awaiting = {key for key, _pool, _name in todo}
        reads.last_read = {k: t for k, t in reads.last_read.items() if k in awaiting}


def load(snapshot: Snapshot, profile: PlatformProfile, lustre_root: Path | None, namespace: str,
         history: int, reads: VerdictReads | None = None) -> LustreFacts:
    facts = LustreFacts(lustre_root)
    load_canaries(facts, snapshot, profile, namespace, history)
    load_jobs(facts, profile, snapshot.by_kind, reads)
    return facts


def reconcile_reading_lustre(snapshot: Snapshot, profile: PlatformProfile, now: datetime, cfg: Any,
                             reference: Reference | None = None, stale: str = "",
                             incremental: Incremental | None = None, reads: VerdictReads | None = None) -> Any:
    """One pass at the edge: read what it needs from Lustre, then run the pure pass on those values
    (``incremental``: the loop's memory of the previous pass, controller/incremental.py; ``reads``: its
    budget for finished jobs' logs and what it read when)."""
    facts = load(snapshot, profile, cfg.lustre_root, cfg.namespace, cfg.history, reads)
    result = reconcile(snapshot, profile, now, cfg, reference, lustre=facts, stale=stale, incremental=incremental)
    result.counters.job_verdicts_waiting = facts.jobs_waiting
    return result
