"""The controller's Lustre edge: everything a reconcile pass needs from the claim, read before the pass.

The pass itself (``reconcile.py``) is pure: it gets the listed cluster, the profile, a clock and what this
module read, and returns actions. This module reads, from the controller's read-only mount of the claim:

- for each pool with a canary, the run directories its canaries left (``canary.runs_on_lustre``) and, for every
  run the pass may judge (a canary JobSet that is over, a run on Lustre that no status records, the run the
  status last named active), the judgement of its files (``outcome.judge_canary``) and when its results were
  last written;
- for every finished workload the webhook managed that has no verdict yet, ``verify-job``'s judgement of its
  NCCL logs (``verdict.job.judge_job``), or the error its files gave.

What it read is handed over as values (``controller/facts.py``), so the pure pass imports nothing of this module.
What a tenant wrote is judged in isolation: a file that cannot be read is recorded as that run's or job's
error, and the pass goes on.
"""

from __future__ import annotations

import contextlib
import os
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


def load_jobs(facts: LustreFacts, profile: PlatformProfile, by_kind: dict[str, list[dict[str, Any]]]) -> None:
    """Read the NCCL logs of every finished managed workload that has no verdict yet."""
    root = facts.root
    if root is None:
        return
    for k in kinds.MANAGED:
        for obj in by_kind.get(k.kind, ()):
            pool = verdict_pool(profile, obj, k.kind)
            if pool is not None:
                ns, name = o.namespace_of(obj) or "default", o.name_of(obj)
                facts.jobs[(ns, name)] = read_job(profile, pool, ns, k.log_name(obj) or name, root)


def load(snapshot: Snapshot, profile: PlatformProfile, lustre_root: Path | None, namespace: str,
         history: int) -> LustreFacts:
    facts = LustreFacts(lustre_root)
    load_canaries(facts, snapshot, profile, namespace, history)
    load_jobs(facts, profile, snapshot.by_kind)
    return facts


def reconcile_reading_lustre(snapshot: Snapshot, profile: PlatformProfile, now: datetime, cfg: Any,
                             reference: Reference | None = None, stale: str = "",
                             incremental: Incremental | None = None) -> Any:
    """One pass at the edge: read what it needs from Lustre, then run the pure pass on those values
    (``incremental``: the loop's memory of the previous pass, controller/incremental.py)."""
    facts = load(snapshot, profile, cfg.lustre_root, cfg.namespace, cfg.history)
    return reconcile(snapshot, profile, now, cfg, reference, lustre=facts, stale=stale, incremental=incremental)
