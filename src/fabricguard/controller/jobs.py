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

from datetime import datetime
from pathlib import Path
from typing import Any

from fabricguard import names
from fabricguard import objects as o
from fabricguard.controller.actions import Action, Annotate, Counters, event
from fabricguard.controller.canary import log_dir
from fabricguard.profile.model import PlatformProfile, UnknownPoolError
from fabricguard.verdict.job import JobInputError, Level, judge_job

MISSING = "missing-logs"
UNUSABLE = "input-unusable"
FINISHED_CONDITIONS = {"JobSet": ("Completed", "Failed"), "Job": ("Complete", "Failed"),
                       "TrainJob": ("Complete", "Failed")}


def finished(obj: dict[str, Any], kind: str) -> bool:
    return any(o.condition_true(obj, c) for c in FINISHED_CONDITIONS.get(kind, ()))


def judge_finished(
    profile: PlatformProfile,
    kind: str,
    api_version: str,
    plural: str,
    obj: dict[str, Any],
    lustre_root: Path,
    now: datetime,
    counters: Counters,
) -> list[Action]:
    labels = o.labels_of(obj)
    if labels.get(names.LABEL_MANAGED) != "true" or names.LABEL_CANARY_POOL in labels:
        return []
    if names.ANN_VERDICT in o.annotations_of(obj) or not finished(obj, kind):
        return []
    ns, name = o.namespace_of(obj) or "default", o.name_of(obj)
    try:
        pool = profile.pool(labels.get(names.LABEL_POOL))
    except UnknownPoolError as e:
        verdict, transport, detail = "unknown-pool", "unknown", f"fabricguard: cannot judge: {e}"
    else:
        if profile.spec.storage.lustre is None or not pool.lustre:
            return []  # no per-job log directory is injected on this pool: nothing to read
        logs = lustre_root / log_dir(profile, ns, name)
        try:
            v = judge_job(logs, profile, pool.name)
        except JobInputError as e:
            verdict, transport = (MISSING if e.missing else UNUSABLE), "unknown"
            detail = (f"no verdict: the job's NCCL logs are missing ({e}); NCCL_DEBUG_FILE was not written "
                      "there, so nothing proves which transport the job used" if e.missing else
                      f"no verdict: the job's files cannot be used: {e}")
        except (OSError, ValueError, RecursionError, MemoryError) as e:  # the tenant's files, judged in isolation
            verdict, transport = UNUSABLE, "unknown"
            detail = f"no verdict: the job's files in {logs} cannot be used: {type(e).__name__}: {e}"
        else:
            verdict, transport = v.verdict.value, v.nccl.inter_node_transport.value
            worst = [r for r in v.reasons if r.level in (Level.failed, Level.degraded)]
            detail = f"verdict {verdict}: transport {transport}" + (
                "; " + "; ".join(r.message for r in worst[:3]) if worst else "")
        counters.job_verdicts.append((pool.name, verdict, transport))
        if verdict not in (MISSING, UNUSABLE, "unknown-pool") and v.steps.median_seconds is not None:
            counters.job_steps.append((ns, name, pool.name, v.steps.median_seconds))
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
    lustre_root: Path | None,
    now: datetime,
    counters: Counters,
) -> list[Action]:
    if lustre_root is None:
        return []
    out: list[Action] = []
    for api_version, plural, kind in names.MANAGED_KINDS:
        for obj in by_kind.get(kind, ()):
            out += judge_finished(profile, kind, api_version, plural, obj, lustre_root, now, counters)
    return out
