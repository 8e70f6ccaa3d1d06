"""Every finished workload that the webhook managed gets a verdict, recorded once on the workload itself.

The webhook labels what it manages (``fabricguard.io/managed: "true"``, ``fabricguard.io/pool``) and points
``NCCL_DEBUG_FILE`` at the job's directory on Lustre. When such a JobSet, Job or TrainJob finishes, the
controller runs ``verify-job``'s judgement on that directory (as seen from its own read-only mount of the
claim) and writes the verdict as an annotation and an Event. A job whose logs are missing gets the verdict
``missing-logs``, never a pass. Each job is judged on its own: files the tenant wrote that cannot be used (JSON
nested too deep, an over-long line, a file that cannot be read) give that job the verdict ``input-unusable``
naming the file, and the pass goes on to the next job. The annotation is the record: a job that has one is
not judged again.
"""

from __future__ import annotations

import logging
from datetime import datetime
from functools import partial
from typing import Any

from fabricguard import kinds, names
from fabricguard import objects as o
from fabricguard.controller.actions import Action, Annotate, Counters, event
from fabricguard.controller.facts import LustreFacts
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.profile.model import PlatformProfile, Pool, UnknownPoolError
from fabricguard.verdict.claims import JobObjects
from fabricguard.verdict.job import JobInputError, Level, claim_reasons, verdict_of

MISSING = "missing-logs"
UNUSABLE = "input-unusable"
log = logging.getLogger("fabricguard.controller")


def finished(obj: dict[str, Any], kind: str) -> bool:
    """The kind's own finished predicate (fabricguard.kinds); a kind that never finishes (LeaderWorkerSet,
    RayCluster) gets no final verdict, only live ones."""
    return kinds.finished(obj, kind)


def _awaits_verdict(obj: dict[str, Any], kind: str) -> bool:
    labels = o.labels_of(obj)
    if labels.get(names.LABEL_MANAGED) != "true" or names.LABEL_CANARY_POOL in labels:
        return False
    return names.ANN_VERDICT not in o.annotations_of(obj) and finished(obj, kind)


def verdict_pool(profile: PlatformProfile, obj: dict[str, Any], kind: str) -> Pool | None:
    """The pool whose Lustre log directory holds this finished managed job's logs, when they are to be read."""
    if not _awaits_verdict(obj, kind):
        return None
    try:
        pool = profile.pool(o.labels_of(obj).get(names.LABEL_POOL))
    except UnknownPoolError:
        return None
    return pool if profile.spec.storage.lustre is not None and pool.lustre else None


def judge_finished(
    profile: PlatformProfile,
    kind: str,
    api_version: str,
    plural: str,
    obj: dict[str, Any],
    lustre: LustreFacts,
    now: datetime,
    counters: Counters,
    pods: list[dict[str, Any]] | None = None,
    claims: dict[tuple[str, str], dict[str, Any]] | None = None,
) -> list[Action]:
    """The verdict actions of one workload; pure: its logs were read by ``controller.lustre`` into ``lustre``.
    ``pods`` (the workload's pods the cache holds) and ``claims`` (ResourceClaims by namespace and name): on a DRA
    pool, a fabric claim never allocated or a device reported unhealthy degrades the verdict (``verdict.claims``)."""
    labels = o.labels_of(obj)
    if not _awaits_verdict(obj, kind):
        return []
    ns, name = o.namespace_of(obj) or "default", o.name_of(obj)
    try:
        pool = profile.pool(labels.get(names.LABEL_POOL))
    except UnknownPoolError as e:
        verdict, transport, detail = "unknown-pool", "unknown", f"fabricguard: cannot judge: {e}"
    else:
        if profile.spec.storage.lustre is None or not pool.lustre:
            return []  # no per-job log directory is injected on this pool: nothing to read
        files = lustre.jobs.get((ns, name))
        if files is None:
            return []  # its logs were not read this pass
        err = files.error
        if isinstance(err, JobInputError):
            verdict, transport = (MISSING if err.missing else UNUSABLE), "unknown"
            detail = (f"no verdict: the job's NCCL logs are missing ({err}); NCCL_DEBUG_FILE was not written "
                      "there, so nothing proves which transport the job used" if err.missing else
                      f"no verdict: the job's files cannot be used: {err}")
        elif err is not None or files.verdict is None:  # the tenant's files, judged in isolation
            verdict, transport = UNUSABLE, "unknown"
            detail = f"no verdict: the job's files in {files.log_dir} cannot be used: {type(err).__name__}: {err}"
        else:
            v = files.verdict
            found = claim_reasons(pool, JobObjects(pods or [], claims or {}))
            reasons = [*v.reasons, *found]
            verdict, transport = verdict_of(reasons).value, v.nccl.inter_node_transport.value
            worst = [r for r in reasons if r.level in (Level.failed, Level.degraded)]
            detail = f"verdict {verdict}: transport {transport}" + (
                "; " + "; ".join(r.message for r in worst[:3]) if worst else "")
        counters.job_verdicts.append((pool.name, verdict, transport))
        counters.job_verdict_of.append((ns, name, pool.name, verdict, transport))
        if files.verdict is not None and files.error is None and files.verdict.steps.median_seconds is not None:
            counters.job_steps.append((ns, name, pool.name, files.verdict.steps.median_seconds))
        return [
            Annotate(api_version, plural, ns, name,
                     {names.ANN_VERDICT: verdict, names.ANN_VERDICT_DETAIL: detail[:1000]}),
            event(obj, api_version, kind, "JobVerdict", detail, now, warning=verdict != "pass"),
        ]
    return [
        Annotate(api_version, plural, ns, name, {names.ANN_VERDICT: verdict, names.ANN_VERDICT_DETAIL: detail[:1000]}),
        event(obj, api_version, kind, "JobVerdict", detail, now, warning=True),
    ]


def judge_jobs(
    profile: PlatformProfile,
    by_kind: dict[str, list[dict[str, Any]]],
    lustre: LustreFacts,
    now: datetime,
    counters: Counters,
    snapshot: Snapshot | None = None,
) -> list[Action]:
    """``snapshot`` (whose ``by_kind`` this is): whether each job awaits its verdict is kept while it is the
    same object."""
    if lustre.root is None:
        return []
    todo = [(k, obj) for k in kinds.MANAGED
            for obj, _ in (snapshot.select(("awaits verdict", k.kind), by_kind.get(k.kind, []),
                                           partial(_may_await, kind=k.kind)) if snapshot is not None
                           else [(x, True) for x in by_kind.get(k.kind, ()) if _may_await(x, k.kind)])]
    if not todo:
        return []  # every managed job has its verdict or is still running: no pod index to build
    out: list[Action] = []
    pods: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for pod in by_kind.get("Pod", ()):
        job = o.labels_of(pod).get(names.LABEL_JOB)
        if job:
            pods.setdefault((o.namespace_of(pod) or "default", job), []).append(pod)
    claims = {(o.namespace_of(c) or "default", o.name_of(c)): c for c in by_kind.get("ResourceClaim", ())}
    for k, obj in todo:
        key = (o.namespace_of(obj) or "default", o.name_of(obj))
        try:
            out += judge_finished(profile, k.kind, k.api_version, k.plural, obj, lustre, now, counters,
                                  pods.get(key, []), claims)
        except Exception as exc:  # one job's data (or a bug on it) is that job's verdict, never the pass's end
            out += unusable(profile, k.kind, k.api_version, k.plural, obj, now, counters,
                            f"{type(exc).__name__}: {exc}")
    return out


def _may_await(obj: dict[str, Any], kind: str) -> bool:
    """Whether the job may await its verdict; one whose shape makes the question raise is judged (and gets the
    ``input-unusable`` verdict naming why), as before."""
    try:
        return _awaits_verdict(obj, kind)
    except Exception:
        return True


def unusable(profile: PlatformProfile, kind: str, api_version: str, plural: str, obj: dict[str, Any],
             now: datetime, counters: Counters, why: str) -> list[Action]:
    """The ``input-unusable`` verdict of a job whose judging raised: recorded (so it is logged and told once:
    a job with a verdict is not judged again), and the pass goes on to the next job."""
    ns, name = o.namespace_of(obj) or "default", o.name_of(obj)
    detail = f"no verdict: judging the job's files failed: {why}"[:1000]
    log.warning("%s %s/%s: %s", kind, ns, name, detail)
    pool = o.labels_of(obj).get(names.LABEL_POOL) or ""
    counters.job_verdicts.append((pool, UNUSABLE, "unknown"))
    counters.job_verdict_of.append((ns, name, pool, UNUSABLE, "unknown"))
    return [
        Annotate(api_version, plural, ns, name, {names.ANN_VERDICT: UNUSABLE, names.ANN_VERDICT_DETAIL: detail}),
        event(obj, api_version, kind, "JobVerdict", detail, now, warning=True),
    ]
