"""Where the pods of a training workload are described, how many there are, and what the job is called.

The kinds understood are those of ``fabricguard.kinds`` (JobSet, TrainJob, Job, LeaderWorkerSet, RayJob,
RayCluster, MPIJob, PyTorchJob, Pod). For each, :func:`locate` returns a :class:`Workload` with the JSON paths
of its pod templates (the kind's ``templates`` reader), how many pods each template runs at once and the job name
``{job}`` that names its directory on Lustre: the workload's name; for a kind of replica groups (LeaderWorkerSet),
``<name>/<group index>``, one directory per group; for a pod, the name of the workload that owns it, read from
the labels its controller set (never the pod's own name).

Multi-node rule (documented in docs/admission.md): a workload is multi-node when its GPU pods together ask for
more GPUs than one node of the pool has, when more than one GPU pod runs at once, or when a GPU container's
command line or env says it launches on several nodes (``torchrun --nnodes=2``, ``PET_NNODES``, ``WORLD_SIZE``
above ``--nproc-per-node``). Two pods that could share a node may still be placed apart, and then NCCL between
them crosses the network.

GPU containers are every container that asks for the pool's GPU resource: app containers, init containers and
native sidecars (init containers with ``restartPolicy: Always``) alike. One object holds at most
:data:`MAX_TEMPLATES` pod templates and :data:`MAX_CONTAINERS` containers in all, so the work (and the patch)
for one request stays bounded.
"""

from __future__ import annotations

import functools
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from fabricguard import kinds, names, objects
from fabricguard import workload_identity as wid

# Bounds on one object: far above any real training workload, far below what costs seconds to patch.
MAX_TEMPLATES = kinds.MAX_TEMPLATES
MAX_CONTAINERS = 256

# The Trainer runtimes' replicated job and container that run the training processes.
TRAINER_REPLICATED_JOB = "node"
TRAINER_CONTAINER = "node"

Kind = str  # a kind of fabricguard.kinds.KINDS
KINDS: dict[tuple[str, str], Kind] = {(k.group, k.kind): k.kind for k in kinds.KINDS}

Path = tuple[str | int, ...]


WorkloadError = kinds.TemplateError  # the object cannot be read as its kind; the message names the field


class WorkloadTooLarge(WorkloadError):
    """The object has more pod templates or containers than one review handles; the message says the limit."""


@dataclass
class PodTemplate:
    """One pod template (``metadata`` + ``spec``) inside a workload."""

    path: Path
    where: str
    template: dict[str, Any]
    pods: int
    # GPU counts per GPU resource name, computed once: the template is read, never changed, by a review.
    _gpus: dict[str, tuple[int, list[dict[str, Any]]]] = field(default_factory=dict, repr=False)

    @property
    def spec(self) -> dict[str, Any]:
        return self.template.get("spec") or {}

    def _count(self, gpu_resource: str) -> tuple[int, list[dict[str, Any]]]:
        found = self._gpus.get(gpu_resource)
        if found is None:
            spec = self.spec
            found = self._gpus[gpu_resource] = (objects.pod_gpus(spec, gpu_resource),
                                                objects.gpu_containers(spec, gpu_resource))
        return found

    def gpus(self, gpu_resource: str) -> int:
        """GPUs one pod of this template holds at its peak (see :func:`pod_gpus`)."""
        return self._count(gpu_resource)[0]

    def gpu_containers(self, gpu_resource: str) -> list[dict[str, Any]]:
        return self._count(gpu_resource)[1]

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
    # A kind of replica groups (LeaderWorkerSet): the pod label whose value tells the groups apart.
    group_label: str | None = None

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
            value = m.get(key)
            if isinstance(value, str):
                return value
        return None

    def annotation(self, key: str) -> str | None:
        for m in self._meta_maps("annotations"):
            value = m.get(key)
            if isinstance(value, str):
                return value
        return None

    @property
    def pool_name(self) -> str | None:
        return self.label(names.LABEL_POOL)

    @functools.cached_property
    def opted_out(self) -> bool:
        return (self.annotation(names.ANN_FABRIC) or "").strip().lower() == "none"

    @functools.cached_property
    def allow_override(self) -> frozenset[str]:
        keys: set[str] = set()
        for m in self._meta_maps("annotations"):
            raw = m.get(names.ANN_ALLOW_OVERRIDE)
            if isinstance(raw, str):
                keys.update(k.strip() for k in raw.replace("\n", ",").split(",") if k.strip())
        return frozenset(keys)


def kind_of(group: str, kind: str) -> Kind | None:
    return KINDS.get((group, kind))


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [c for c in value if isinstance(c, dict)] if isinstance(value, list) else []


def container_label(spec: dict[str, Any], container: dict[str, Any]) -> str:
    """``container 'x'``, ``init container 'x'`` or ``sidecar 'x'``, as a message names it."""
    if any(c is container for c in _dicts(spec.get("initContainers"))):
        kind = "sidecar" if objects.is_sidecar(container) else "init container"
    else:
        kind = "container"
    return f"{kind} {container.get('name')!r}"


# ---------------------------------------------------------------------------------------------- launchers

_LAUNCHERS = ("torchrun", "torch.distributed.run", "torch.distributed.launch")
_NNODES = ("--nnodes",)
_NPROC = ("--nproc-per-node", "--nproc_per_node")
_REF = re.compile(r"^\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)$|^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$")


def _literal_env(container: dict[str, Any]) -> dict[str, str]:
    """The container's env with literal values; the last entry of a name wins, as in the kubelet."""
    out: dict[str, str] = {}
    for e in _dicts(container.get("env")):
        name = e.get("name")
        if isinstance(name, str):
            value = e.get("value")
            if isinstance(value, str) and "valueFrom" not in e:
                out[name] = value
            else:
                out.pop(name, None)
    return out


def _resolve(text: str, env: dict[str, str]) -> str:
    m = _REF.match(text.strip())
    if m:
        return env.get(m.group(1) or m.group(2), text)
    return text


def _max_count(text: str | None, env: dict[str, str]) -> int:
    """The largest node count a value allows: ``2`` is 2, ``2:4`` (elastic min:max) is 4; unreadable is 0."""
    if text is None:
        return 0
    text = _resolve(text, env)
    parts = text.split(":")
    try:
        return max(int(_resolve(p, env)) for p in parts)
    except ValueError:
        return 0


def _tokens(container: dict[str, Any]) -> list[str]:
    words: list[str] = []
    for key in ("command", "args"):
        for arg in container.get(key) or []:
            if not isinstance(arg, str):
                continue
            if any(ch in arg for ch in " \t\n;&|"):  # a shell script passed to `sh -c`
                try:
                    words += shlex.split(arg, comments=True)
                except ValueError:
                    words += arg.split()
            else:
                words.append(arg)
    return words


def _option(words: list[str], i: int, names: tuple[str, ...]) -> str | None:
    w = words[i]
    for n in names:
        if w == n and i + 1 < len(words):
            return words[i + 1]
        if w.startswith(n + "="):
            return w[len(n) + 1:]
    return None


def declared_nodes(container: dict[str, Any]) -> int:
    """How many nodes the container's own launcher says it runs on (0 when it does not say).

    Read from ``torchrun`` / ``python -m torch.distributed.run`` (``--nnodes=2``, ``--nnodes 2:4``), from
    ``PET_NNODES`` (the Trainer's torchrun env), and from ``WORLD_SIZE`` over ``--nproc-per-node``.
    ``$(VAR)`` and ``$VAR`` are resolved from the container's literal env.
    """
    env = _literal_env(container)
    words = _tokens(container)
    nodes = _max_count(env.get("PET_NNODES"), env)
    launched = any(w.rsplit("/", 1)[-1] in _LAUNCHERS for w in words)
    nproc = _max_count(env.get("PET_NPROC_PER_NODE"), env)
    if launched:
        for i in range(len(words)):
            n = _option(words, i, _NNODES)
            if n is not None:
                nodes = max(nodes, _max_count(n, env))
            p = _option(words, i, _NPROC)
            if p is not None:
                nproc = max(nproc, _max_count(p, env))
    world = _max_count(env.get("WORLD_SIZE"), env)
    if world and nproc and world > nproc:
        nodes = max(nodes, -(-world // nproc))
    return nodes


_OWNER_KINDS = frozenset(k.kind for k in kinds.KINDS if k.kind != "Pod")


def pod_job(meta: dict[str, Any]) -> tuple[str | None, str]:
    """The job name of a pod and the label it was read from (order: fabricguard.workload_identity)."""
    found = wid.job_of(meta.get("labels"))
    if found:
        return found[1], found[0]
    for ref in meta.get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("kind") in _OWNER_KINDS and ref.get("name"):
            return str(ref["name"]), names.LABEL_JOB
    return None, names.LABEL_JOB


def _check_size(templates: list[PodTemplate]) -> None:
    if len(templates) > MAX_TEMPLATES:
        raise WorkloadTooLarge(f"{len(templates)} pod templates is more than the {MAX_TEMPLATES} fabricguard "
                               "reviews in one object; split the workload")
    n = 0
    for t in templates:
        spec = t.spec
        for key in ("initContainers", "containers"):
            cs = spec.get(key)
            n += len(cs) if isinstance(cs, list) else 0
    if n > MAX_CONTAINERS:
        raise WorkloadTooLarge(f"{n} containers is more than the {MAX_CONTAINERS} fabricguard reviews in one "
                               "object; split the workload")


def locate(obj: dict[str, Any], kind: Kind, namespace: str | None = None) -> Workload:
    """Find the pod templates of ``obj``; raise :class:`WorkloadError` naming the field that is wrong."""
    w = _locate(obj, kind, namespace)
    _check_size(w.templates)
    return w


def _locate(obj: dict[str, Any], kind: Kind, namespace: str | None = None) -> Workload:
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
    k = kinds.BY_KIND.get(kind)
    if k is None:
        raise WorkloadError(f"kind {kind!r} is not one fabricguard admits ({', '.join(kinds.BY_KIND)})")
    try:
        refs = k.templates(obj)
    except kinds.TooManyTemplates as exc:
        raise WorkloadTooLarge(str(exc)) from None
    templates = [PodTemplate(r.path, r.where, r.template, r.pods) for r in refs]

    if kind == "TrainJob":
        nodes = kinds.count((spec.get("trainer") or {}).get("numNodes"), 1, "spec.trainer.numNodes")
        return Workload("TrainJob", obj, ns, name, k.job_label, [], num_nodes=nodes)
    if kind != "Pod":
        return Workload(kind, obj, ns, name, k.job_label, templates, group_label=k.group_label)

    # Pod
    job, label = pod_job(meta)
    labels = meta.get("labels") or {}
    owned = bool(meta.get("ownerReferences")) or any(k in labels for k in wid.CONTROLLER_LABELS)
    if not owned:
        # A bare pod carries fabricguard.io/job once patched; FG_JOB reads that label whatever named the group.
        label = names.LABEL_JOB
    return Workload("Pod", obj, ns, job, label, templates, owned=owned)


def trainjob_gpus_per_node(obj: dict[str, Any], gpu_resource: str) -> int:
    trainer = (obj.get("spec") or {}).get("trainer") or {}
    return objects.container_gpus({"resources": trainer.get("resourcesPerNode") or {}}, gpu_resource)


def _int_label(value: Any) -> int:
    return int(value) if isinstance(value, str) and value.isdigit() and len(value) < 10 else 0


def pod_group_size(w: Workload) -> int:
    """How many pods a plain or controller-made pod says it runs with (1 when it does not say).

    A count written on the pod (Kueue's group count, ``fabricguard.io/group-size``, JobSet's replicas) is
    the number of pods really created, so it wins; otherwise the launcher's node count is the best guess.
    """
    meta = w.metadata
    labels = meta.get("labels") or {}
    anns = meta.get("annotations") or {}
    written = max(_int_label(anns.get(names.KUEUE_GROUP_COUNT)), _int_label(anns.get(names.ANN_GROUP_SIZE)),
                  _int_label(labels.get(names.JOBSET_REPLICAS)))
    if written:
        return written
    return max([1, *(declared_nodes(c) for c in objects.containers(w.obj.get("spec") or {}))])


def gpu_footprint(w: Workload, gpu_resource: str) -> tuple[int, int]:
    """(GPU pods running at once, GPUs they ask for in total)."""
    if w.kind == "TrainJob":
        per = trainjob_gpus_per_node(w.obj, gpu_resource)
        return (w.num_nodes, w.num_nodes * per) if per else (0, 0)
    if w.kind == "Pod":
        g = w.templates[0].gpus(gpu_resource)
        n = pod_group_size(w)
        return (n, n * g) if g else (0, 0)
    pods = total = 0
    for t in w.templates:
        g = t.gpus(gpu_resource)
        if g:
            pods += t.pods
            total += t.pods * g
    return pods, total


def is_multi_node(w: Workload, gpu_resource: str, gpus_per_node: int) -> bool:
    """True when the workload's GPU pods span, or may span, more than one node (see module docstring)."""
    if w.kind == "Pod" and (w.metadata.get("labels") or {}).get(names.LABEL_MANAGED) == "true":
        return w.templates[0].gpus(gpu_resource) > 0
    pods, total = gpu_footprint(w, gpu_resource)
    if pods > 1 or total > gpus_per_node:
        return True
    # A launcher that says it spans nodes (an indexed Job of one pod per node, say) is believed.
    return any(declared_nodes(c) > 1 for t in w.templates for c in t.gpu_containers(gpu_resource))
