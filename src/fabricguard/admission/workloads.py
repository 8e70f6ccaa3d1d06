"""Where the pods of a training workload are described, how many there are, and what the job is called.

Four kinds are understood: JobSet (``jobset.x-k8s.io``), Kubeflow TrainJob (``trainer.kubeflow.org``),
batch/v1 Job and plain Pod. For each, :func:`locate` returns a :class:`Workload` with the JSON paths of its
pod templates, how many pods each template runs at once and the job name ``{job}`` that names its directory on
Lustre: the JobSet or TrainJob name, or the batch Job name; for a pod, the name of the workload that owns it,
read from the labels its controller set (never the pod's own name).

Multi-node rule (documented in docs/admission.md): a workload is multi-node when its GPU pods together ask for
more GPUs than one node of the pool has, or when more than one GPU pod runs at once. Two pods that could share
a node may still be placed apart, and then NCCL between them crosses the network.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

# Keys fabricguard reads from workloads.
LABEL_POOL = "fabricguard.io/pool"
LABEL_JOB = "fabricguard.io/job"
LABEL_MANAGED = "fabricguard.io/managed"
ANN_FABRIC = "fabricguard.io/fabric"
ANN_ALLOW_OVERRIDE = "fabricguard.io/allow-override"
ANN_GROUP_SIZE = "fabricguard.io/group-size"

# Keys set by the controllers that create pods.
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
JOBSET_REPLICAS = "jobset.sigs.k8s.io/replicatedjob-replicas"
TRAINJOB_NAME = "trainer.kubeflow.org/trainjob-name"
JOB_NAME = "batch.kubernetes.io/job-name"
LEGACY_JOB_NAME = "job-name"
KUEUE_POD_GROUP = "kueue.x-k8s.io/pod-group-name"
KUEUE_GROUP_COUNT = "kueue.x-k8s.io/pod-group-total-count"

# The Trainer runtimes' replicated job and container that run the training processes.
TRAINER_REPLICATED_JOB = "node"
TRAINER_CONTAINER = "node"

Kind = Literal["JobSet", "TrainJob", "Job", "Pod"]
KINDS: dict[tuple[str, str], Kind] = {
    ("jobset.x-k8s.io", "JobSet"): "JobSet",
    ("trainer.kubeflow.org", "TrainJob"): "TrainJob",
    ("batch", "Job"): "Job",
    ("", "Pod"): "Pod",
}

Path = tuple[str | int, ...]


class WorkloadError(ValueError):
    """The object cannot be read as the kind it claims to be; the message names the field."""


@dataclass
class PodTemplate:
    """One pod template (``metadata`` + ``spec``) inside a workload."""

    path: Path
    where: str
    template: dict[str, Any]
    pods: int

    @property
    def spec(self) -> dict[str, Any]:
        return self.template.get("spec") or {}

    @property
    def metadata(self) -> dict[str, Any]:
        return self.template.get("metadata") or {}


@dataclass
class Workload:
    kind: Kind
    obj: dict[str, Any]
    namespace: str
    job: str | None
    # Label on the pods whose value is {job}; the downward API reads FG_JOB from it.
    job_label: str
    templates: list[PodTemplate] = field(default_factory=list)
    # For a Pod: created by a controller (Job, JobSet) rather than submitted bare.
    owned: bool = False
    # TrainJob only: nodes and GPUs per node as the TrainJob states them.
    num_nodes: int = 1

    @property
    def metadata(self) -> dict[str, Any]:
        return self.obj.get("metadata") or {}

    def _meta_maps(self, key: str) -> list[dict[str, Any]]:
        maps = [self.metadata.get(key) or {}]
        maps += [t.metadata.get(key) or {} for t in self.templates]
        return [m for m in maps if isinstance(m, dict)]

    def label(self, key: str) -> str | None:
        """A label from the workload's metadata, else from its first template that has it."""
        for m in self._meta_maps("labels"):
            if isinstance(m.get(key), str):
                return m[key]
        return None

    def annotation(self, key: str) -> str | None:
        for m in self._meta_maps("annotations"):
            if isinstance(m.get(key), str):
                return m[key]
        return None

    @property
    def pool_name(self) -> str | None:
        return self.label(LABEL_POOL)

    @property
    def opted_out(self) -> bool:
        return (self.annotation(ANN_FABRIC) or "").strip().lower() == "none"

    @property
    def allow_override(self) -> frozenset[str]:
        keys: set[str] = set()
        for m in self._meta_maps("annotations"):
            raw = m.get(ANN_ALLOW_OVERRIDE)
            if isinstance(raw, str):
                keys.update(k.strip() for k in raw.replace("\n", ",").split(",") if k.strip())
        return frozenset(keys)


def kind_of(group: str, kind: str) -> Kind | None:
    return KINDS.get((group, kind))


def kind_of_object(obj: dict[str, Any]) -> Kind | None:
    api = str(obj.get("apiVersion") or "")
    group = api.rsplit("/", 1)[0] if "/" in api else ""
    return kind_of(group, str(obj.get("kind") or ""))


def parse_quantity(value: Any) -> int:
    """An integer count from a resource quantity (``8``, ``"8"``, ``"1k"``); non-integers count as 0."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str):
        s = value.strip()
        mult = {"k": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
        for suffix in ("Ki", "Mi", "Gi", "k", "M", "G"):
            if s.endswith(suffix) and s[: -len(suffix)].isdigit():
                return int(s[: -len(suffix)]) * mult[suffix]
        if s.isdigit():
            return int(s)
    return 0


def container_gpus(container: dict[str, Any], gpu_resource: str) -> int:
    res = container.get("resources") or {}
    if not isinstance(res, dict):
        return 0
    counts = [parse_quantity((res.get(k) or {}).get(gpu_resource)) for k in ("limits", "requests")
              if isinstance(res.get(k), dict)]
    return max(counts, default=0)


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    cs = spec.get("containers") or []
    return [c for c in cs if isinstance(c, dict)] if isinstance(cs, list) else []


def pod_gpus(spec: dict[str, Any], gpu_resource: str) -> int:
    return sum(container_gpus(c, gpu_resource) for c in containers(spec))


def _dict_at(obj: dict[str, Any], path: Path, where: str) -> dict[str, Any]:
    cur: Any = obj
    for p in path:
        if isinstance(p, int):
            if not isinstance(cur, list) or p >= len(cur):
                raise WorkloadError(f"{where}: missing")
            cur = cur[p]
        else:
            if not isinstance(cur, dict):
                raise WorkloadError(f"{where}: expected an object")
            cur = cur.get(p)
    if not isinstance(cur, dict):
        raise WorkloadError(f"{where}: missing or not an object")
    return cur


def _int(value: Any, default: int, where: str) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise WorkloadError(f"{where} must be a non-negative integer, got {value!r}")
    return value


def _concurrent(job_spec: dict[str, Any], where: str) -> int:
    """Pods a batch Job runs at once: parallelism (default 1), capped by completions when set."""
    par = _int(job_spec.get("parallelism"), 1, f"{where}.parallelism")
    comp = job_spec.get("completions")
    if comp is not None:
        par = min(par, _int(comp, 1, f"{where}.completions"))
    return par


def pod_job(meta: dict[str, Any]) -> tuple[str | None, str]:
    """The job name of a pod and the label it was read from (JobSet first: its child Jobs have other names)."""
    labels = meta.get("labels") or {}
    for key in (JOBSET_NAME, TRAINJOB_NAME, JOB_NAME, LEGACY_JOB_NAME, KUEUE_POD_GROUP, LABEL_JOB):
        v = labels.get(key)
        if isinstance(v, str) and v:
            return v, key
    for ref in meta.get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("kind") in ("Job", "JobSet", "TrainJob") and ref.get("name"):
            return str(ref["name"]), LABEL_JOB
    return None, LABEL_JOB


def locate(obj: dict[str, Any], kind: Kind, namespace: str | None = None) -> Workload:
    """Find the pod templates of ``obj``; raise :class:`WorkloadError` naming the field that is wrong."""
    if not isinstance(obj, dict):
        raise WorkloadError("object is not a JSON object")
    meta = obj.get("metadata") or {}
    if not isinstance(meta, dict):
        raise WorkloadError("metadata is not an object")
    ns = namespace or meta.get("namespace") or "default"
    name = meta.get("name") or None
    spec = obj.get("spec") or {}
    if not isinstance(spec, dict):
        raise WorkloadError("spec is not an object")

    if kind == "JobSet":
        rjobs = spec.get("replicatedJobs")
        if not isinstance(rjobs, list):
            raise WorkloadError("spec.replicatedJobs must be a list")
        templates = []
        for i, rj in enumerate(rjobs):
            w = f"spec.replicatedJobs[{i}]"
            if not isinstance(rj, dict):
                raise WorkloadError(f"{w} is not an object")
            job_spec = _dict_at(rj, ("template", "spec"), f"{w}.template.spec")
            tpl = _dict_at(job_spec, ("template",), f"{w}.template.spec.template")
            replicas = _int(rj.get("replicas"), 1, f"{w}.replicas")
            templates.append(PodTemplate(
                ("spec", "replicatedJobs", i, "template", "spec", "template"),
                f"replicatedJob {rj.get('name', i)!s}", tpl, replicas * _concurrent(job_spec, w)))
        return Workload("JobSet", obj, ns, name, JOBSET_NAME, templates)

    if kind == "Job":
        tpl = _dict_at(spec, ("template",), "spec.template")
        return Workload("Job", obj, ns, name, JOB_NAME,
                        [PodTemplate(("spec", "template"), "the pod template", tpl, _concurrent(spec, "spec"))])

    if kind == "TrainJob":
        trainer = spec.get("trainer") or {}
        if not isinstance(trainer, dict):
            raise WorkloadError("spec.trainer is not an object")
        nodes = _int(trainer.get("numNodes"), 1, "spec.trainer.numNodes")
        return Workload("TrainJob", obj, ns, name, JOBSET_NAME, [], num_nodes=nodes)

    # Pod
    job, label = pod_job(meta)
    labels = meta.get("labels") or {}
    owned = bool(meta.get("ownerReferences")) or any(
        k in labels for k in (JOBSET_NAME, TRAINJOB_NAME, JOB_NAME, LEGACY_JOB_NAME))
    if not owned:
        # A bare pod carries fabricguard.io/job once patched; FG_JOB reads that label whatever named the group.
        label = LABEL_JOB
    return Workload("Pod", obj, ns, job, label, [PodTemplate((), "the pod", obj, 1)], owned=owned)


def trainjob_gpus_per_node(obj: dict[str, Any], gpu_resource: str) -> int:
    trainer = (obj.get("spec") or {}).get("trainer") or {}
    return container_gpus({"resources": trainer.get("resourcesPerNode") or {}}, gpu_resource)


def _int_label(value: Any) -> int:
    return int(value) if isinstance(value, str) and value.isdigit() else 0


def pod_group_size(w: Workload) -> int:
    """How many pods a plain or controller-made pod says it runs with (1 when it does not say)."""
    meta = w.metadata
    labels = meta.get("labels") or {}
    anns = meta.get("annotations") or {}
    size = max(_int_label(anns.get(KUEUE_GROUP_COUNT)), _int_label(anns.get(ANN_GROUP_SIZE)),
               _int_label(labels.get(JOBSET_REPLICAS)), 1)
    for c in containers(w.obj.get("spec") or {}):
        for e in c.get("env") or []:
            if isinstance(e, dict) and e.get("name") == "PET_NNODES":
                size = max(size, _int_label(e.get("value")))
    return size


def gpu_footprint(w: Workload, gpu_resource: str) -> tuple[int, int]:
    """(GPU pods running at once, GPUs they ask for in total)."""
    if w.kind == "TrainJob":
        per = trainjob_gpus_per_node(w.obj, gpu_resource)
        return (w.num_nodes, w.num_nodes * per) if per else (0, 0)
    if w.kind == "Pod":
        g = pod_gpus(w.obj.get("spec") or {}, gpu_resource)
        n = pod_group_size(w)
        return (n, n * g) if g else (0, 0)
    pods = total = 0
    for t in w.templates:
        g = pod_gpus(t.spec, gpu_resource)
        if g:
            pods += t.pods
            total += t.pods * g
    return pods, total


def is_multi_node(w: Workload, gpu_resource: str, gpus_per_node: int) -> bool:
    """True when the workload's GPU pods span, or may span, more than one node (see module docstring)."""
    if w.kind == "Pod" and (w.metadata.get("labels") or {}).get(LABEL_MANAGED) == "true":
        return pod_gpus(w.obj.get("spec") or {}, gpu_resource) > 0
    pods, total = gpu_footprint(w, gpu_resource)
    return pods > 1 or total > gpus_per_node
