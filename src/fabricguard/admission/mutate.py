"""Build the minimal, idempotent JSONPatch that gives a multi-node GPU workload its fabric, storage and placement.

The object is changed on a copy by small "put" helpers that never overwrite what the user wrote: a different
user value is a *conflict*, which rejects the workload with a message naming the key, unless the key is listed
in annotation ``fabricguard.io/allow-override`` (then the user's value is kept). Every change goes through the
mutation's ``patching.Recorder``, which notes its JSON Patch operation as it is made (no diff of the copy
against the object afterwards): absent maps and lists are added whole, keys are escaped per RFC 6901
(``jsonpointer``), and a second run over an already patched object changes nothing, so its patch is empty.

Values are compared as the API server stores them (:func:`fabricguard.patching.stored`): defaults it fills in
(``fieldRef.apiVersion: v1``), empty fields it drops, quantities in canonical form (``8.0`` is ``8``). So the
stored form of an object this webhook patched, reviewed again (reinvocation after another webhook, or
``kubectl get -o yaml`` applied back), gets an empty patch instead of a conflict. For env, the last entry of a
name is the one compared, because it is the one the kubelet uses.

What goes where (docs/admission.md has the table): the Kueue queue-name label on the workload's own metadata;
everything else on the pod templates; for a TrainJob, whose ``runtimePatches`` cannot carry container resources,
the fabric resources go to ``spec.trainer.resourcesPerNode``, the env to ``spec.trainer.env`` (the Trainer API
owns the ``node`` container's env) and the rest into a ``runtimePatches`` entry with manager
``fabricguard.io/admission``.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field
from typing import Any

from fabricguard import fabrics, names, objects, quantity
from fabricguard.admission import claims as dra_claims
from fabricguard.admission import inspector as insp
from fabricguard.admission import runtime
from fabricguard.admission import workloads as wl
from fabricguard.admission.workloads import Workload
from fabricguard.patching import Recorder
from fabricguard.patching import diff as diff  # re-exported
from fabricguard.patching import escape as escape
from fabricguard.patching import pointer as pointer
from fabricguard.patching import stored as stored
from fabricguard.profile.model import PlatformProfile, Pool
from fabricguard.socket_ifname import IfnameList
from fabricguard.storage import jobdir, layout

MANAGER = names.ADMISSION_MANAGER
SHM_VOLUME = "fabricguard-shm"
LUSTRE_VOLUME = "fabricguard-lustre"
SHM_PATH = "/dev/shm"
KUEUE_QUEUE = names.KUEUE_QUEUE_NAME
TAS_REQUIRED = names.TAS_REQUIRED
TAS_PREFERRED = names.TAS_PREFERRED
TAS_UNCONSTRAINED = names.TAS_UNCONSTRAINED
TAS_SLICE = names.TAS_SLICE
TAS_SLICE_SIZE = names.TAS_SLICE_SIZE
# Kueue's multi-layer slices (TASMultiLayerTopology, beta in 0.19): mutually exclusive with the slice pair.
TAS_SLICE_LAYERS = names.TAS_SLICE_LAYERS
TAS_KEYS = (TAS_REQUIRED, TAS_PREFERRED, TAS_UNCONSTRAINED)
GKE_DEFAULT_IF = names.GKE_DEFAULT_IF
GKE_INTERFACES = names.GKE_INTERFACES
MULTUS_NETWORKS = names.MULTUS_NETWORKS
ENV_NS = layout.ENV_NS
ENV_JOB = layout.ENV_JOB
ENV_WORKLOAD = layout.ENV_WORKLOAD
ENV_GROUP = layout.ENV_GROUP


def _same_toleration(a: Any, b: Any) -> bool:
    if not isinstance(a, dict) or not isinstance(b, dict):
        return False
    sa, sb = stored(a), stored(b)
    for t in (sa, sb):
        t.setdefault("operator", "Equal")  # an absent operator means Equal
    return bool(sa == sb)




# ---------------------------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Plan:
    """What a pool asks of a multi-node workload, computed once per (profile, pool, opt-out)."""

    pool: Pool
    fabric: bool
    resources: dict[str, str]
    annotations: dict[str, str]
    env: tuple[tuple[str, str], ...]
    debug_file: str | None
    node_selector: dict[str, str]
    tolerations: tuple[dict[str, Any], ...]
    tas: dict[str, str]
    queue: str | None
    lustre_claim: str | None
    lustre_mount: str | None
    lustre_subpath_expr: str | None
    shm: dict[str, Any]
    # The fabric's userspace from the host and the cluster's pod additions (admission/runtime.py).
    extras: runtime.PodExtras = runtime.NO_EXTRAS
    inspector: insp.InspectorPlan | None = None
    # The init container that makes the job's directory the workload's (storage/jobdir.py): its image, and the
    # directories under the job's it makes as well; None where the job's directory is not mounted or it is off.
    job_dir_image: str | None = None
    job_dir_subdirs: tuple[str, ...] = ()
    # Where that init container mounts the claim and the path it walks below (storage/layout.JobDirMount).
    job_dir_mount: layout.JobDirMount | None = None


def socket_ifname(fabric: str, configured: str | None) -> str | None:
    """NCCL_SOCKET_IFNAME for a fabric: the profile's value, never matching an interface the fabric excludes
    (``FabricSpec.socket_ifname_exclude``: on EFA, EKS Pod Identity's link-local pod-id-link0, over which an EFA
    init failure falling back to sockets hangs instead of failing)."""
    excluded = fabrics.spec_of(fabric).socket_ifname_exclude
    if not excluded:
        return configured
    if configured is None:
        return "^lo,docker," + ",".join(excluded)  # NCCL's own default exclusions, plus the fabric's
    ifs = IfnameList.parse(configured)
    if not ifs.exclude:
        return configured  # an include list (the profile refuses one that picks an excluded interface)
    for ex in excluded:
        if not ifs.excludes(f"{ex}0"):
            ifs = ifs.excluding(f"{ex}0", ex)
    return str(ifs)


def _below(path: str) -> str:
    """A directory under the job's as the init container makes it (``a//b/`` is ``a/b``); "" for none or one
    that leaves the job's directory (the webhook's NCCL_DEBUG_FILE then points at what the user made)."""
    norm = posixpath.normpath("/" + path).lstrip("/")
    return "" if not norm or ".." in path.split("/") else norm


def make_plan(profile: PlatformProfile, pool: Pool, opted_out: bool, job_dir_image: str | None = None,
              namespace: str | None = None) -> Plan:
    """What the pool injects; ``job_dir_image``: the job directory's init container image when the profile names
    none (the webhook's ``--job-dir-image``, the node agent's image in an install). ``namespace``: where the
    workload is; a training namespace whose claim is rooted at its own directory gets the job's directory
    relative to that (``storage/layout.py``), anywhere else (or None) relative to the file system's root."""
    f = pool.fabric
    fabric = f.has_fabric and not opted_out
    annotations: dict[str, str] = {}
    env: list[tuple[str, str]] = []
    resources: dict[str, str] = {}
    if fabric:
        resources = {k: str(v) for k, v in f.resources.items()}
        style = f.network_annotation_style
        if style == "gke":
            ifaces = [{"interfaceName": "eth0", "network": "default"}]
            ifaces += [{"interfaceName": f"eth{i + 2}", "network": n} for i, n in enumerate(f.networks)]
            annotations[GKE_DEFAULT_IF] = "eth0"
            annotations[GKE_INTERFACES] = json.dumps(ifaces, separators=(",", ":"))
        elif style == "multus":
            annotations[MULTUS_NETWORKS] = ",".join(f.networks)
        if f.effective_nccl_net:
            env.append(("NCCL_NET", f.effective_nccl_net))
        if f.hcas:
            env.append(("NCCL_IB_HCA", "=" + ",".join(f.hcas)))
        ifname = socket_ifname(f.type, f.socketIfname)
        if ifname:
            env.append(("NCCL_SOCKET_IFNAME", ifname))
        if f.ibGidIndex is not None:
            env.append(("NCCL_IB_GID_INDEX", str(f.ibGidIndex)))
        # NCCL 2.30+: init fails when some ranks see fewer NICs than others instead of running on the
        # common subset (older NCCL ignores the variable).
        if "NCCL_IGNORE_NET_MISMATCH" not in f.env:
            env.append(("NCCL_IGNORE_NET_MISMATCH", "0"))
        env += sorted(f.env.items())
    env += [("NCCL_DEBUG", "INFO"), ("NCCL_DEBUG_SUBSYS", "INIT,NET")]
    lustre = profile.spec.storage.lustre if pool.lustre else None
    debug_file = None
    if lustre is not None:
        # The mount below is already the job's {namespace}/{job} directory, so on the file system the logs
        # land in <claim>/<namespace>/<job>/<logDir>/<host>.<pid>, where verify-job reads every rank.
        debug_file = f"{lustre.mountPath.rstrip('/')}/{lustre.logDir.strip('/')}/%h.%p"
    tas: dict[str, str] = {}
    queue = pool.queue.name if pool.queue else None
    topo = pool.queue.topology if pool.queue else None
    if topo is not None:
        if topo.mode == "required":
            tas[TAS_REQUIRED] = topo.level
        elif topo.mode == "preferred":
            tas[TAS_PREFERRED] = topo.level
        else:
            tas[TAS_UNCONSTRAINED] = "true"
        if topo.sliceLevel and topo.sliceSize:
            tas[TAS_SLICE] = topo.sliceLevel
            tas[TAS_SLICE_SIZE] = str(topo.sliceSize)
    inspector = insp.inspector_plan(profile, pool, fabric)
    dir_image = None
    subdirs: tuple[str, ...] = ()
    if lustre is not None and lustre.jobDirectory.enabled:
        dir_image = lustre.jobDirectory.image or job_dir_image
        ins = profile.inspector_for(pool) if inspector is not None else None
        subdirs = tuple(d for d in (_below(lustre.logDir), _below(ins.dumpDir) if ins else "") if d)
    return Plan(
        pool=pool,
        fabric=fabric,
        resources=resources,
        annotations=annotations,
        env=tuple(env),
        debug_file=debug_file,
        node_selector=dict(pool.nodeSelector),
        tolerations=tuple(t.to_k8s() for t in pool.tolerations),
        tas=tas,
        queue=queue,
        lustre_claim=lustre.claimName if lustre else None,
        lustre_mount=lustre.mountPath if lustre else None,
        lustre_subpath_expr=(layout.job_dir_expr(profile, namespace or "") if lustre else None),
        shm=shm_volume(pool),
        extras=runtime.extras(profile, pool, fabric=fabric),
        inspector=inspector,
        job_dir_image=dir_image,
        job_dir_subdirs=subdirs,
        job_dir_mount=layout.job_dir_mount(profile, namespace or "") if lustre is not None else None,
    )


# ---------------------------------------------------------------------------------------------- puts


@dataclass
class Injector:
    """Adds values to a copy of the object, recording conflicts with what the user already set."""

    allow: frozenset[str]
    strict: bool = True
    conflicts: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    patch: Recorder = field(default_factory=Recorder)  # every change goes through it: the operations it notes

    def child_map(self, mapping: dict[str, Any], key: str) -> dict[str, Any]:
        """``mapping[key]``, put in as an empty map when it is not one."""
        cur = mapping.get(key)
        return cur if isinstance(cur, dict) else self.patch.set(mapping, key, {})

    def child_list(self, mapping: dict[str, Any], key: str) -> list[Any]:
        """``mapping[key]``, put in as an empty list when it is not one."""
        cur = mapping.get(key)
        return cur if isinstance(cur, list) else self.patch.set(mapping, key, [])

    def conflict(self, key: str, message: str) -> None:
        if key in self.allow:
            return
        if self.strict:
            self.conflicts.append(message)
        else:
            self.warnings.append(f"kept the user's value: {message}")

    def put(self, mapping: dict[str, Any], key: str, value: Any, what: str, where: str) -> None:
        cur = mapping.get(key)
        if cur is None:
            self.patch.set(mapping, key, value)
        elif not _same(key, cur, value):
            self.conflict(key, f"{what} {key} in {where} is {_show(cur)} but the pool needs {_show(value)}")

    def put_env(self, container: dict[str, Any], entry: dict[str, Any], where: str) -> None:
        env = self.child_list(container, "env")
        last = None
        for e in env:  # the kubelet uses the last entry of a name
            if isinstance(e, dict) and e.get("name") == entry["name"]:
                last = e
        if last is None:
            self.patch.append(env, entry)
        elif not _same_env(last, entry):
            want = entry.get("value", entry.get("valueFrom"))
            have = last.get("value", last.get("valueFrom"))
            self.conflict(entry["name"], f"env {entry['name']} in {where} is {_show(have)} but the "
                                         f"pool needs {_show(want)}")

    def put_resource(self, resources: dict[str, Any], name: str, qty: str, where: str) -> None:
        for part in ("requests", "limits"):
            m = self.child_map(resources, part)
            cur = m.get(name)
            if cur is None:
                self.patch.set(m, name, qty)
            elif not quantity.same(cur, qty):
                self.conflict(name, f"resource {part}.{name} in {where} is {_show(cur)} but the pool needs "
                                    f"{_show(qty)}")
                return

    def put_item(self, items: list[Any], item: Any) -> None:
        if item not in items:
            self.patch.append(items, item)

    def put_toleration(self, items: list[Any], item: dict[str, Any]) -> None:
        if not any(_same_toleration(t, item) for t in items):
            self.patch.append(items, item)

    def put_volume(self, spec: dict[str, Any], volume: dict[str, Any], where: str) -> None:
        vols = self.child_list(spec, "volumes")
        for v in vols:
            if isinstance(v, dict) and v.get("name") == volume["name"]:
                if stored(v) != stored(volume):
                    self.conflict(volume["name"], f"volume {volume['name']} in {where} is not the one "
                                                  f"fabricguard mounts ({_show(volume)}); rename it")
                return
        self.patch.append(vols, volume)

    def put_mount(self, spec: dict[str, Any], container: dict[str, Any], mount: dict[str, Any],
                  volume: dict[str, Any], where: str, accept: Any = None) -> None:
        mounts = self.child_list(container, "volumeMounts")
        for m in mounts:
            if isinstance(m, dict) and m.get("mountPath") == mount["mountPath"]:
                if stored(m) == stored(mount):
                    return
                theirs = _volume(spec, m.get("name"))
                if accept is not None and theirs is not None and accept(theirs):
                    return
                self.conflict(mount["mountPath"], f"mount {mount['mountPath']} in {where} uses volume "
                                                  f"{m.get('name')!r}, not {_show(volume)}")
                return
        self.put_volume(spec, volume, where)
        self.patch.append(mounts, mount)


def _same(key: str, cur: Any, value: Any) -> bool:
    if cur == value:
        return True
    if key == GKE_INTERFACES and isinstance(cur, str):
        try:
            return bool(json.loads(cur) == json.loads(value))
        except ValueError:
            return False
    return False


def _same_env(have: dict[str, Any], want: dict[str, Any]) -> bool:
    if stored(have) == stored(want):
        return True
    # NCCL matches network names case-insensitively: NCCL_NET=gib is NCCL_NET=gIB.
    hv, wv = have.get("value"), want.get("value")
    return want["name"] == "NCCL_NET" and isinstance(hv, str) and isinstance(wv, str) and hv.lower() == wv.lower()


def _show(v: Any) -> str:
    s = json.dumps(v, separators=(",", ":")) if not isinstance(v, str) else repr(v)
    return s if len(s) <= 160 else s[:157] + "..."


def _volume(spec: dict[str, Any], name: Any) -> dict[str, Any] | None:
    for v in spec.get("volumes") or []:
        if isinstance(v, dict) and v.get("name") == name:
            return v
    return None


def _is_memory_emptydir(v: dict[str, Any]) -> bool:
    ed = v.get("emptyDir")
    return isinstance(ed, dict) and ed.get("medium") == "Memory"


def shm_volume(pool: Pool) -> dict[str, Any]:
    """The memory-backed /dev/shm volume; NCCL and data loaders need far more than the 64 MiB default."""
    empty_dir: dict[str, Any] = {"medium": "Memory"}
    if pool.shmSize:
        empty_dir["sizeLimit"] = pool.shmSize
    return {"name": SHM_VOLUME, "emptyDir": empty_dir}


def env_entries(plan: Plan, job_label: str, with_storage: bool, group_label: str | None = None) -> list[dict[str, Any]]:
    """The env a GPU container gets: downward-API FG_* first, so later values can use $(FG_JOB). For a kind of
    replica groups (LeaderWorkerSet) each group is a job of its own: FG_JOB is ``<name>/<group index>``, made by
    the kubelet from the two labels (a value may name variables defined before it)."""
    out: list[dict[str, Any]] = []
    if with_storage and plan.lustre_claim:
        out += job_env(job_label, group_label)
        # The Lustre client tags each request with this value where jobid_var names it (docs/storage.md).
        out.append({"name": names.LUSTRE_JOBID_ENV, "value": f"$({ENV_NS}).$({ENV_JOB})"})
    out += [{"name": k, "value": v} for k, v in plan.env]
    if with_storage and plan.debug_file:
        out.append({"name": "NCCL_DEBUG_FILE", "value": plan.debug_file})
    return out


def job_env(job_label: str, group_label: str | None = None) -> list[dict[str, Any]]:
    """FG_NAMESPACE and FG_JOB (from the pod's namespace and job label), which the job directory's
    ``subPathExpr`` names."""
    out: list[dict[str, Any]] = [{"name": ENV_NS, "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}]
    if group_label:
        out.append({"name": ENV_WORKLOAD, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{job_label}']"}}})
        out.append({"name": ENV_GROUP, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{group_label}']"}}})
        out.append({"name": ENV_JOB, "value": f"$({ENV_WORKLOAD})/$({ENV_GROUP})"})
    else:
        out.append({"name": ENV_JOB, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{job_label}']"}}})
    return out


def lustre_parts(plan: Plan) -> tuple[dict[str, Any], dict[str, Any]] | None:
    if not plan.lustre_claim or not plan.lustre_mount:
        return None
    vol = {"name": LUSTRE_VOLUME, "persistentVolumeClaim": {"claimName": plan.lustre_claim}}
    mount = {"name": LUSTRE_VOLUME, "mountPath": plan.lustre_mount, "subPathExpr": plan.lustre_subpath_expr}
    return vol, mount


def inject_container(inj: Injector, plan: Plan, spec: dict[str, Any], c: dict[str, Any], job_label: str,
                     where: str, *, resources: bool = True, group_label: str | None = None) -> None:
    cwhere = f"{wl.container_label(spec, c)} of {where}"
    if resources and plan.resources:
        res = inj.child_map(c, "resources")
        for name, qty in plan.resources.items():
            inj.put_resource(res, name, qty, cwhere)
    for e in env_entries(plan, job_label, True, group_label):
        inj.put_env(c, e, cwhere)
    if plan.fabric:
        caps = inj.child_map(inj.child_map(c, "securityContext"), "capabilities")
        inj.put_item(inj.child_list(caps, "add"), "IPC_LOCK")
    inj.put_mount(spec, c, {"name": SHM_VOLUME, "mountPath": SHM_PATH}, plan.shm, cwhere, accept=_is_memory_emptydir)
    parts = lustre_parts(plan)
    if parts:
        inj.put_mount(spec, c, parts[1], parts[0], cwhere)
    inject_extras_container(inj, plan.extras, spec, c, cwhere)


def inject_extras_container(inj: Injector, extras: runtime.PodExtras, spec: dict[str, Any], c: dict[str, Any],
                            where: str) -> None:
    """The fabric userspace's and the cluster's env and mounts (with their volumes) in one GPU container."""
    for k, v in extras.env:
        inj.put_env(c, {"name": k, "value": v}, where)
    volumes = {v["name"]: v for v in extras.volumes}
    for m in extras.mounts:
        inj.put_mount(spec, c, dict(m), volumes[m["name"]], where)


def inject_extras_pod(inj: Injector, extras: runtime.PodExtras, spec: dict[str, Any]) -> None:
    """The cluster's pull secrets and tolerations on one pod spec."""
    if extras.pull_secrets:
        secrets = inj.child_list(spec, "imagePullSecrets")
        for name in extras.pull_secrets:
            inj.put_item(secrets, {"name": name})
    if extras.tolerations:
        tols = inj.child_list(spec, "tolerations")
        for t in extras.tolerations:
            inj.put_toleration(tols, dict(t))


def inject_pod_level(inj: Injector, plan: Plan, template: dict[str, Any], w: Workload, where: str,
                     *, tas: bool) -> None:
    """Metadata, placement and network of one pod template (or pod)."""
    meta = inj.child_map(template, "metadata")
    spec = inj.child_map(template, "spec")
    labels = inj.child_map(meta, "labels")
    anns = inj.child_map(meta, "annotations")
    inj.put(labels, names.LABEL_MANAGED, "true", "label", where)
    inj.put(labels, names.LABEL_POOL, plan.pool.name, "label", where)
    if w.job and w.kind == "Pod":
        # Pods only: a template's pods carry their controller's job label already, and a template label
        # written from metadata.name would differ between a generateName create and its stored form.
        inj.put(labels, names.LABEL_JOB, w.job, "label", where)
    if w.opted_out:
        inj.put(anns, names.ANN_FABRIC, "none", "annotation", where)
    allow = w.annotation(names.ANN_ALLOW_OVERRIDE)
    if allow:
        # Copied so that pod-level checks see the same opt-outs as the workload.
        inj.put(anns, names.ANN_ALLOW_OVERRIDE, allow, "annotation", where)
    for k, v in plan.annotations.items():
        inj.put(anns, k, v, "annotation", where)
    if tas and plan.tas:
        theirs = [k for k in TAS_KEYS if k in anns and k not in plan.tas]
        for k in theirs:
            inj.conflict(k, f"annotation {k} in {where} asks for another topology than the pool's "
                            f"({', '.join(f'{a}={b}' for a, b in plan.tas.items())})")
        if not theirs:
            layered = TAS_SLICE_LAYERS in anns  # the user's multi-layer slices replace the pool's slice pair
            if layered and (TAS_SLICE in anns or TAS_SLICE_SIZE in anns):
                inj.warnings.append(
                    f"{where}: {TAS_SLICE_LAYERS} cannot be combined with {TAS_SLICE}/{TAS_SLICE_SIZE}; "
                    "Kueue will reject the workload: keep one of them"
                )
            for k, v in plan.tas.items():
                if layered and k in (TAS_SLICE, TAS_SLICE_SIZE):
                    continue
                inj.put(anns, k, v, "annotation", where)
    sel = inj.child_map(spec, "nodeSelector")
    for k, v in plan.node_selector.items():
        inj.put(sel, k, v, "nodeSelector", where)
    if plan.tolerations:
        tols = inj.child_list(spec, "tolerations")
        for t in plan.tolerations:
            inj.put_toleration(tols, dict(t))
    inject_extras_pod(inj, plan.extras, spec)
    for k in ("labels", "annotations"):
        if not meta.get(k):
            inj.patch.pop(meta, k)
    for k in ("nodeSelector",):
        if not spec.get(k):
            inj.patch.pop(spec, k)


def inject_template(inj: Injector, plan: Plan, template: dict[str, Any], w: Workload, where: str,
                    job_label: str, *, tas: bool = True, resolve: dra_claims.Resolver | None = None) -> None:
    spec = inj.child_map(template, "spec")
    gpu_resource = plan.pool.gpuResource
    inject_pod_level(inj, plan, template, w, where, tas=tas)
    gpu = objects.gpu_containers(spec, gpu_resource)
    for c in gpu:
        inject_container(inj, plan, spec, c, job_label, where, group_label=w.group_label)
    if plan.fabric:  # a DRA pool's claim (admission/claims.py); nothing for device-plugin pools
        dra_claims.inject(inj, plan.pool, spec, gpu, where, w.namespace, resolve)
    insp.inject(plan.inspector, spec, gpu, where, inj.warnings, inj.patch)  # admission/inspector.py
    inject_job_dir(inj, plan, spec, gpu, job_label, w.group_label)  # last: it goes first in initContainers


def inject_job_dir(inj: Injector, plan: Plan, spec: dict[str, Any], gpu: list[dict[str, Any]], job_label: str,
                   group_label: str | None) -> None:
    """The init container that makes the job's directory the workload's (``storage/jobdir.py``), first in the
    pod's init containers. One of its name already there is ours: left alone when it is the one this pod needs
    (a reinvocation, a stored form), brought up to date when not (another webhook changed the pod's user)."""
    parts = lustre_parts(plan)
    if not (plan.job_dir_image and parts and plan.lustre_subpath_expr and gpu):
        return
    # Only where the job's directory is mounted: a user's own volume kept at its mountPath (allow-override, an
    # owned Pod) leaves the claim out of the pod, and an init container naming it would make the pod invalid.
    volume, mount = parts
    if stored(_volume(spec, LUSTRE_VOLUME)) != stored(volume) or not any(
            isinstance(m, dict) and stored(m) == stored(mount) for c in gpu for m in c.get("volumeMounts") or ()):
        return
    at = plan.job_dir_mount
    assert at is not None  # set with the claim (make_plan)
    want = jobdir.init_container(plan.job_dir_image, LUSTRE_VOLUME, at.mount_expr, at.path_expr,
                                 plan.job_dir_subdirs, jobdir.owner_for(spec, gpu), job_env(job_label, group_label),
                                 at.expect_root)
    inits = inj.child_list(spec, "initContainers")
    for i, c in enumerate(inits):
        if isinstance(c, dict) and c.get("name") == jobdir.INIT_CONTAINER:
            # Compared on what it sets: the API server fills in terminationMessagePath and the like.
            if any(stored(c.get(k), k) != stored(v, k) for k, v in want.items()):
                inj.patch.replace(inits, i, want)
            return
    inj.patch.insert(inits, 0, want)


# ---------------------------------------------------------------------------------------------- per kind


def _inject_workload_meta(inj: Injector, plan: Plan, obj: dict[str, Any], w: Workload) -> None:
    meta = inj.child_map(obj, "metadata")
    labels = inj.child_map(meta, "labels")
    where = f"{w.kind} metadata"
    if plan.queue:
        inj.put(labels, KUEUE_QUEUE, plan.queue, "label", where)
    inj.put(labels, names.LABEL_MANAGED, "true", "label", where)
    inj.put(labels, names.LABEL_POOL, plan.pool.name, "label", where)


def _trainjob(inj: Injector, plan: Plan, obj: dict[str, Any], w: Workload) -> None:
    spec = inj.child_map(obj, "spec")
    trainer = inj.child_map(spec, "trainer")
    where = "spec.trainer"
    if plan.resources:
        res = inj.child_map(trainer, "resourcesPerNode")
        for name, qty in plan.resources.items():
            inj.put_resource(res, name, qty, where)
    for e in env_entries(plan, w.job_label, True):
        inj.put_env(trainer, e, where)
    for k, v in plan.extras.env:
        inj.put_env(trainer, {"name": k, "value": v}, where)
    with_inspector = plan.inspector is not None and insp.trainer_env(plan.inspector, trainer, inj.warnings, inj.patch)
    # Everything runtimePatches may carry, in one entry that fabricguard owns.
    pod: dict[str, Any] = {"metadata": {}, "spec": {}}
    inject_pod_level(Injector(frozenset(), strict=False), plan, pod, w, "runtime patch", tas=True)
    pspec = pod["spec"]
    node: dict[str, Any] = {"name": wl.TRAINER_CONTAINER}
    if plan.fabric:
        node["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
    mounts = [{"name": SHM_VOLUME, "mountPath": SHM_PATH}]
    vols = [dict(plan.shm)]
    parts = lustre_parts(plan)
    if parts:
        vols.append(parts[0])
        mounts.append(parts[1])
    mounts += [dict(m) for m in plan.extras.mounts]
    vols += [dict(v) for v in plan.extras.volumes]
    if with_inspector and plan.inspector is not None:
        vols.append(dict(plan.inspector.volume))
        mounts.append(dict(plan.inspector.mount))
    node["volumeMounts"] = mounts
    pspec["volumes"] = vols
    pspec["containers"] = [node]
    entry = {
        "manager": MANAGER,
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
            {"name": wl.TRAINER_REPLICATED_JOB, "template": {"spec": {"template": pod}}},
        ]}}},
    }
    patches = inj.child_list(spec, "runtimePatches")
    for i, p in enumerate(patches):
        if isinstance(p, dict) and p.get("manager") == MANAGER:
            # Ours: the Trainer webhook stamps `time`; anything else that differs is brought up to date.
            mine = {k: v for k, v in p.items() if k != "time"}
            if stored(mine) != stored(entry):
                inj.patch.replace(patches, i, {**entry, **({"time": p["time"]} if "time" in p else {})})
            return
    inj.patch.append(patches, entry)


@dataclass
class Mutation:
    allowed: bool
    patch: list[dict[str, Any]]
    message: str = ""
    warnings: list[str] = field(default_factory=list)


def mutate_workload(w: Workload, profile: PlatformProfile, pool: Pool, plan: Plan | None = None,
                    resolve: dra_claims.Resolver | None = None) -> Mutation:
    """Inject into a multi-node workload; the caller has already checked that it is one. ``plan`` is
    ``make_plan(profile, pool, w.opted_out)``, which a long-lived caller (the webhook) keeps per pool; ``resolve``
    looks up ResourceClaimTemplates and ResourceClaims for a DRA pool (admission/claims.py)."""
    if plan is None:
        plan = make_plan(profile, pool, w.opted_out, namespace=w.namespace)
    # The changes are made on a copy, each noted as a patch operation as it is made (patching.Recorder).
    obj, rec = Recorder.copy_of(w.obj)
    # Pods made by a controller are filled in, never refused: the workload was admitted before the webhook.
    inj = Injector(w.allow_override, strict=not (w.kind == "Pod" and w.owned), patch=rec)
    if w.kind == "Pod" and w.job is None:
        return Mutation(False, [], "cannot tell which job this pod belongs to; label every pod of the group "
                                   f"with {names.LABEL_JOB}=<job name> (or {names.KUEUE_POD_GROUP})")
    if plan.fabric and dra_claims.claims_pool(pool) and not (w.kind == "Pod" and w.owned):
        refusal, note = dra_claims.template_problem(pool, w.namespace, resolve)
        if refusal:
            return Mutation(False, [], f"fabricguard (pool {pool.name}): {refusal}")
        if note:
            inj.warnings.append(note)
    if w.kind == "TrainJob":
        _inject_workload_meta(inj, plan, obj, w)
        _trainjob(inj, plan, obj, w)
        if plan.fabric and dra_claims.claims_pool(pool):
            inj.warnings.append(dra_claims.trainjob_note(pool))
    elif w.kind == "Pod":
        inject_template(inj, plan, obj, w, "the pod", w.job_label, tas=not w.owned, resolve=resolve)
        if not w.owned:
            labels = obj["metadata"]["labels"]
            anns = inj.child_map(obj["metadata"], "annotations")
            if plan.queue:
                inj.put(labels, KUEUE_QUEUE, plan.queue, "label", "the pod")
                inj.put(labels, names.KUEUE_POD_GROUP, w.job, "label", "the pod")
                inj.put(anns, names.KUEUE_GROUP_COUNT, str(wl.pod_group_size(w)), "annotation", "the pod")
    else:
        _inject_workload_meta(inj, plan, obj, w)
        gpu = pool.gpuResource
        for t in w.templates:
            if t.gpus(gpu) > 0:
                target: Any = obj
                for p in t.path:
                    target = target[p]
                inject_template(inj, plan, target, w, t.where, w.job_label, resolve=resolve)
    if inj.conflicts:
        msg = (f"fabricguard (pool {pool.name}): " + "; ".join(inj.conflicts)
               + f". Remove these values so the pool's are used, or list their keys in annotation "
                 f"{names.ANN_ALLOW_OVERRIDE} (comma-separated) to keep yours")
        return Mutation(False, [], msg)
    return Mutation(True, rec.ops, warnings=inj.warnings)
