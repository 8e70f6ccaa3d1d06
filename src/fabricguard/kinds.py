"""Workload kinds: one record per kind fabricguard admits, follows and judges, and the only list of them.

Each :class:`WorkloadKind` says where the kind lives in the API (group, version, plural), what Kueue calls its
integration (``integrations.frameworks``), which pod label names its job (the ``{job}`` of its Lustre directory),
where its pod templates are and how many pods each runs at once, when it is finished, whether it is suspended,
how to stop it, and, for a kind made of replica groups (LeaderWorkerSet), which pod label tells the groups apart.
The webhook's rules, the Kueue configuration, preflight's API list, the controller's lists and permissions, the
finished predicate, the stop path and the root-cause "is this a workload" question all read :data:`KINDS`.

A new kind is one entry here plus its ``templates``/``finished``/``stop`` functions (see CONTRIBUTING.md), and
tests with its stored form (tests/kinds/).

Pure: reading objects as the API server stores them, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from fabricguard import names
from fabricguard import objects as o

# Bounds on one object: far above any real training workload, far below what costs seconds to patch.
MAX_TEMPLATES = 64

Path = tuple[str | int, ...]


class TemplateError(ValueError):
    """The object cannot be read as the kind it claims to be; the message names the field."""


class TooManyTemplates(TemplateError):
    """More pod templates than one review handles; the message says the limit."""


@dataclass(frozen=True)
class TemplateRef:
    """One pod template inside a workload: where it is, what a message calls it, how many pods run it at once."""

    path: Path
    where: str
    template: dict[str, Any]
    pods: int


Stop = Literal["suspend", "run-policy-suspend", "scale-to-zero", "none"]


@dataclass(frozen=True)
class WorkloadKind:
    kind: str
    group: str  # "" for the core group
    version: str
    plural: str
    kueue_framework: str | None  # Kueue's integrations.frameworks name; None: Kueue does not manage it alone
    job_label: str  # the pod label whose value is the job's name
    templates: Callable[[dict[str, Any]], list[TemplateRef]]
    finished: Callable[[dict[str, Any]], bool]
    suspended: Callable[[dict[str, Any]], bool]
    stop: Stop  # how onFallback: stop stops it when Kueue does not manage it
    group_label: str | None = None  # pods of one replica group share it: each group is a job of its own
    # The {job} its pods' job label holds, read from the object (None: not known yet). Its name, except where
    # the pods belong to an object it makes (a RayJob's pods are its RayCluster's, named in its status).
    log_name: Callable[[dict[str, Any]], str | None] = o.name_of
    managed: bool = True  # the controller follows its logs and judges it (False: only admitted)
    optional: bool = True  # preflight warns, not fails, when its API is not served

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def stop_patch(self) -> dict[str, Any] | None:
        """The merge patch that stops a running object of this kind (None: it cannot be stopped by a patch)."""
        if self.stop == "suspend":
            return {"spec": {"suspend": True}}
        if self.stop == "run-policy-suspend":
            return {"spec": {"runPolicy": {"suspend": True}}}
        if self.stop == "scale-to-zero":
            return {"spec": {"replicas": 0}}
        return None


# --------------------------------------------------------------------------------------------- readers


def dict_at(obj: dict[str, Any], path: Path, where: str) -> dict[str, Any]:
    cur: Any = obj
    for p in path:
        if isinstance(p, int):
            if not isinstance(cur, list) or p >= len(cur):
                raise TemplateError(f"{where}: missing")
            cur = cur[p]
        else:
            if not isinstance(cur, dict):
                raise TemplateError(f"{where}: expected an object")
            cur = cur.get(p)
    if not isinstance(cur, dict):
        raise TemplateError(f"{where}: missing or not an object")
    return cur


def count(value: Any, default: int, where: str) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TemplateError(f"{where} must be a non-negative integer, got {value!r}")
    return value


def _spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec")
    if spec is None:
        return {}
    if not isinstance(spec, dict):
        raise TemplateError("spec is not an object")
    return spec


def concurrent(job_spec: dict[str, Any], where: str) -> int:
    """Pods a batch Job runs at once: parallelism (default 1), capped by completions when set."""
    par = count(job_spec.get("parallelism"), 1, f"{where}.parallelism")
    comp = job_spec.get("completions")
    if comp is not None:
        par = min(par, count(comp, 1, f"{where}.completions"))
    return par


def _bounded(n: int, what: str) -> None:
    if n > MAX_TEMPLATES:
        raise TooManyTemplates(f"{n} {what} is more than the {MAX_TEMPLATES} fabricguard reviews in one object; "
                               "split the workload")


def _conditions(*types: str) -> Callable[[dict[str, Any]], bool]:
    def finished(obj: dict[str, Any]) -> bool:
        return any(o.condition_true(obj, t) for t in types)
    finished.__doc__ = f"True when a condition {' or '.join(types)} is True."
    return finished


def _never(obj: dict[str, Any]) -> bool:
    """A serving kind: it runs until it is deleted."""
    return False


def _spec_suspend(obj: dict[str, Any]) -> bool:
    return bool((obj.get("spec") or {}).get("suspend"))


def _run_policy_suspend(obj: dict[str, Any]) -> bool:
    return bool(((obj.get("spec") or {}).get("runPolicy") or {}).get("suspend"))


def _zero_replicas(obj: dict[str, Any]) -> bool:
    return (obj.get("spec") or {}).get("replicas") == 0


# ------------------------------------------------------------------------------------------- templates


def jobset_templates(obj: dict[str, Any]) -> list[TemplateRef]:
    rjobs = _spec(obj).get("replicatedJobs")
    if not isinstance(rjobs, list):
        raise TemplateError("spec.replicatedJobs must be a list")
    _bounded(len(rjobs), "replicated jobs")
    out = []
    for i, rj in enumerate(rjobs):
        w = f"spec.replicatedJobs[{i}]"
        if not isinstance(rj, dict):
            raise TemplateError(f"{w} is not an object")
        job_spec = dict_at(rj, ("template", "spec"), f"{w}.template.spec")
        tpl = dict_at(job_spec, ("template",), f"{w}.template.spec.template")
        replicas = count(rj.get("replicas"), 1, f"{w}.replicas")
        out.append(TemplateRef(("spec", "replicatedJobs", i, "template", "spec", "template"),
                               f"replicatedJob {rj.get('name', i)!s}", tpl, replicas * concurrent(job_spec, w)))
    return out


def job_templates(obj: dict[str, Any]) -> list[TemplateRef]:
    spec = _spec(obj)
    tpl = dict_at(spec, ("template",), "spec.template")
    return [TemplateRef(("spec", "template"), "the pod template", tpl, concurrent(spec, "spec"))]


def trainjob_templates(obj: dict[str, Any]) -> list[TemplateRef]:
    """None: a TrainJob's pods come from its runtime; the webhook patches ``spec.trainer`` and a runtime patch."""
    trainer = _spec(obj).get("trainer") or {}
    if not isinstance(trainer, dict):
        raise TemplateError("spec.trainer is not an object")
    count(trainer.get("numNodes"), 1, "spec.trainer.numNodes")
    patches = _spec(obj).get("runtimePatches")
    if isinstance(patches, list):
        _bounded(len(patches), "runtimePatches")
    return []


def pod_templates(obj: dict[str, Any]) -> list[TemplateRef]:
    return [TemplateRef((), "the pod", obj, 1)]


def lws_templates(obj: dict[str, Any]) -> list[TemplateRef]:
    """A LeaderWorkerSet runs ``replicas`` groups of ``size`` pods: one leader (``leaderTemplate``, or the worker
    template when there is none) and ``size - 1`` workers (leaderworkerset.x-k8s.io/v1 API: replicas and size
    default to 1)."""
    spec = _spec(obj)
    groups = count(spec.get("replicas"), 1, "spec.replicas")
    lwt = dict_at(spec, ("leaderWorkerTemplate",), "spec.leaderWorkerTemplate")
    size = count(lwt.get("size"), 1, "spec.leaderWorkerTemplate.size")
    if size < 1:
        raise TemplateError("spec.leaderWorkerTemplate.size must be at least 1")
    worker = dict_at(lwt, ("workerTemplate",), "spec.leaderWorkerTemplate.workerTemplate")
    base = ("spec", "leaderWorkerTemplate")
    if isinstance(lwt.get("leaderTemplate"), dict):
        return [TemplateRef((*base, "leaderTemplate"), "the leader template", lwt["leaderTemplate"], groups),
                TemplateRef((*base, "workerTemplate"), "the worker template", worker, groups * (size - 1))]
    return [TemplateRef((*base, "workerTemplate"), "the worker template (leaders too)", worker, groups * size)]


def _ray_cluster(spec: dict[str, Any], base: Path, where: str) -> list[TemplateRef]:
    head = dict_at(spec, ("headGroupSpec", "template"), f"{where}.headGroupSpec.template")
    out = [TemplateRef((*base, "headGroupSpec", "template"), "the Ray head", head, 1)]
    groups = spec.get("workerGroupSpecs") or []
    if not isinstance(groups, list):
        raise TemplateError(f"{where}.workerGroupSpecs must be a list")
    _bounded(len(groups) + 1, "Ray groups")
    for i, g in enumerate(groups):
        w = f"{where}.workerGroupSpecs[{i}]"
        if not isinstance(g, dict):
            raise TemplateError(f"{w} is not an object")
        tpl = dict_at(g, ("template",), f"{w}.template")
        # KubeRay: replicas defaults to 1 (bounded by maxReplicas); a multi-host group runs numOfHosts pods each
        replicas = count(g.get("replicas"), 1, f"{w}.replicas")
        if g.get("maxReplicas") is not None:
            replicas = min(replicas, count(g.get("maxReplicas"), replicas, f"{w}.maxReplicas"))
        hosts = max(1, count(g.get("numOfHosts"), 1, f"{w}.numOfHosts"))
        out.append(TemplateRef((*base, "workerGroupSpecs", i, "template"),
                               f"Ray worker group {g.get('groupName', i)!s}", tpl, replicas * hosts))
    return out


def raycluster_templates(obj: dict[str, Any]) -> list[TemplateRef]:
    return _ray_cluster(_spec(obj), ("spec",), "spec")


def rayjob_templates(obj: dict[str, Any]) -> list[TemplateRef]:
    spec = _spec(obj)
    if spec.get("clusterSelector") and not spec.get("rayClusterSpec"):
        return []  # submits to a running RayCluster: that cluster's pods were admitted with it
    cluster = dict_at(spec, ("rayClusterSpec",), "spec.rayClusterSpec")
    return _ray_cluster(cluster, ("spec", "rayClusterSpec"), "spec.rayClusterSpec")


def _replica_specs(field: str, roles: tuple[str, ...]) -> Callable[[dict[str, Any]], list[TemplateRef]]:
    """Kubeflow's ``spec.<field>.<Role>.{replicas, template}`` (MPIJob's mpiReplicaSpecs, PyTorchJob's
    pytorchReplicaSpecs); replicas default to 1."""

    def templates(obj: dict[str, Any]) -> list[TemplateRef]:
        specs = _spec(obj).get(field)
        if not isinstance(specs, dict):
            raise TemplateError(f"spec.{field} must be an object")
        _bounded(len(specs), "replica specs")
        out = []
        for role in [r for r in roles if r in specs] + sorted(r for r in specs if r not in roles):
            rs = specs[role]
            w = f"spec.{field}.{role}"
            if not isinstance(rs, dict):
                raise TemplateError(f"{w} is not an object")
            tpl = dict_at(rs, ("template",), f"{w}.template")
            out.append(TemplateRef(("spec", field, role, "template"), f"the {role} replicas", tpl,
                                   count(rs.get("replicas"), 1, f"{w}.replicas")))
        return out

    return templates


def _rayjob_finished(obj: dict[str, Any]) -> bool:
    """KubeRay v1: ``status.jobDeploymentStatus`` is Complete or Failed once the job is over."""
    return (obj.get("status") or {}).get("jobDeploymentStatus") in ("Complete", "Failed")


def _rayjob_cluster(obj: dict[str, Any]) -> str | None:
    """KubeRay names the RayCluster a RayJob runs on in ``status.rayClusterName``; its pods carry that name."""
    name = (obj.get("status") or {}).get("rayClusterName")
    return name if isinstance(name, str) and name else None


def _pod_finished(obj: dict[str, Any]) -> bool:
    return (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed")


# ------------------------------------------------------------------------------------------------ kinds

KINDS: tuple[WorkloadKind, ...] = (
    WorkloadKind("JobSet", names.JOBSET_GROUP, "v1alpha2", "jobsets", "jobset.x-k8s.io/jobset", names.JOBSET_NAME,
                 jobset_templates, _conditions("Completed", "Failed"), _spec_suspend, "suspend", optional=False),
    WorkloadKind("Job", "batch", "v1", "jobs", "batch/job", names.LABEL_JOB_NAME,
                 job_templates, _conditions("Complete", "Failed"), _spec_suspend, "suspend", optional=False),
    WorkloadKind("TrainJob", names.TRAINER_GROUP, "v1alpha1", "trainjobs", "trainer.kubeflow.org/trainjob",
                 names.JOBSET_NAME, trainjob_templates, _conditions("Complete", "Failed"), _spec_suspend, "suspend"),
    WorkloadKind("LeaderWorkerSet", names.LWS_GROUP, "v1", "leaderworkersets",
                 "leaderworkerset.x-k8s.io/leaderworkerset", names.LWS_NAME, lws_templates, _never, _zero_replicas,
                 "scale-to-zero", group_label=names.LWS_GROUP_INDEX),
    WorkloadKind("RayJob", names.RAY_GROUP, "v1", "rayjobs", "ray.io/rayjob", names.RAY_CLUSTER,
                 rayjob_templates, _rayjob_finished, _spec_suspend, "suspend", log_name=_rayjob_cluster),
    WorkloadKind("RayCluster", names.RAY_GROUP, "v1", "rayclusters", "ray.io/raycluster", names.RAY_CLUSTER,
                 raycluster_templates, _never, _spec_suspend, "suspend"),
    WorkloadKind("MPIJob", names.KUBEFLOW_GROUP, "v2beta1", "mpijobs", "kubeflow.org/mpijob", names.PYTORCHJOB_NAME,
                 _replica_specs("mpiReplicaSpecs", ("Launcher", "Worker")), _conditions("Succeeded", "Failed"),
                 _run_policy_suspend, "run-policy-suspend"),
    WorkloadKind("PyTorchJob", names.KUBEFLOW_GROUP, "v1", "pytorchjobs", "kubeflow.org/pytorchjob",
                 names.PYTORCHJOB_NAME, _replica_specs("pytorchReplicaSpecs", ("Master", "Worker")),
                 _conditions("Succeeded", "Failed"), _run_policy_suspend, "run-policy-suspend"),
    # Plain pods (Kueue's pod integration): admitted one by one, never followed as a job of their own.
    WorkloadKind("Pod", "", "v1", "pods", "pod", names.LABEL_JOB, pod_templates, _pod_finished,
                 lambda obj: False, "none", managed=False, optional=False),
)

BY_KIND: dict[str, WorkloadKind] = {k.kind: k for k in KINDS}
BY_GROUP_KIND: dict[tuple[str, str], WorkloadKind] = {(k.group, k.kind): k for k in KINDS}
MANAGED: tuple[WorkloadKind, ...] = tuple(k for k in KINDS if k.managed)

# What a doctor finding may name that is one tenant's workload, not the pool's infrastructure: every kind above,
# and Kueue's Workload (the pod-group label names one).
WORKLOAD_KINDS: frozenset[str] = frozenset({*BY_KIND, "Workload"})


def kind_of(group: str, kind: str) -> WorkloadKind | None:
    return BY_GROUP_KIND.get((group, kind))


def is_workload(kind: str) -> bool:
    """Whether an object of ``kind`` is one tenant's workload (a finding about it is the job's to fix)."""
    return kind in WORKLOAD_KINDS


def finished(obj: dict[str, Any], kind: str) -> bool:
    k = BY_KIND.get(kind)
    return k is not None and k.finished(obj)


def suspended(obj: dict[str, Any], kind: str) -> bool:
    k = BY_KIND.get(kind)
    return k is not None and k.suspended(obj)


def kueue_frameworks() -> list[str]:
    return [k.kueue_framework for k in KINDS if k.kueue_framework]
