"""Inject NCCL's Inspector profiler plugin into a workload's GPU containers, the way the profile delivers it.

The profile's ``spec.inspector`` says how the plugin reaches the pod: an OCI image volume (the image holds the
``.so``; GA in Kubernetes 1.36), an init container that copies it from an image into an emptyDir, or a host
directory. Every GPU container gets the volume read-only at ``mountPath`` and::

    NCCL_PROFILER_PLUGIN=<mountPath>/<plugin file>   NCCL_INSPECTOR_ENABLE=1
    NCCL_INSPECTOR_DUMP_DIR=<Lustre mount>/<dumpDir> (the job's directory, beside its NCCL logs)
    NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS, NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES,
    NCCL_INSPECTOR_DUMP_COLL_RING_SIZE, NCCL_INSPECTOR_ENABLE_P2P=0

The interval, the minimum size and the ring size keep the bytes small: a dump writes at most ``ringSize`` records
per communicator (2.30; 2.28/2.29 write one), each about 450 bytes. Without an interval the plugin writes nothing
at all (its default -1 starts no dump thread, and there is no dump at teardown).

NCCL loads one profiler plugin. A container that sets ``NCCL_PROFILER_PLUGIN`` itself keeps its own and gets none
of this (the admission response says so, and ``verify-job`` names the plugin NCCL loaded). The Inspector is
observability: a value the user set for one of the other variables is kept with a warning, never a refusal.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

from fabricguard.patching import Recorder
from fabricguard.profile.model import PlatformProfile, Pool

VOLUME = "fabricguard-inspector"
INIT_CONTAINER = "fabricguard-inspector"
INIT_RESOURCES = {"cpu": "100m", "memory": "64Mi"}  # a copy of one shared library
INIT_MOUNT = "/fabricguard-inspector"
PLUGIN_ENV = "NCCL_PROFILER_PLUGIN"


@dataclass(frozen=True)
class InspectorPlan:
    plugin_path: str
    env: tuple[tuple[str, str], ...]
    volume: dict[str, Any]
    mount: dict[str, Any]
    init_container: dict[str, Any] | None


def inspector_plan(profile: PlatformProfile, pool: Pool, fabric: bool) -> InspectorPlan | None:
    """What a pool's GPU containers get; None when the pool's jobs do not get the plugin."""
    ins = profile.inspector_for(pool)
    lustre = profile.spec.storage.lustre
    if ins is None or lustre is None or not fabric:
        return None
    base = posixpath.basename(ins.pluginFile)
    init = None
    if ins.delivery == "image":
        volume: dict[str, Any] = {"name": VOLUME, "image": {"reference": ins.image, "pullPolicy": "IfNotPresent"}}
        plugin = posixpath.join(ins.mountPath, ins.pluginFile)
    elif ins.delivery == "hostPath":
        volume = {"name": VOLUME, "hostPath": {"path": ins.hostPath, "type": "Directory"}}
        plugin = posixpath.join(ins.mountPath, ins.pluginFile)
    else:
        volume = {"name": VOLUME, "emptyDir": {"sizeLimit": "64Mi"}}
        plugin = posixpath.join(ins.mountPath, base)
        init = {"name": INIT_CONTAINER, "image": ins.image,
                "command": ["cp", "/" + ins.pluginFile, posixpath.join(INIT_MOUNT, base)],
                "volumeMounts": [{"name": VOLUME, "mountPath": INIT_MOUNT}],
                # Requests equal to limits: an init container counts toward the pod's QoS class, and one that is
                # not Guaranteed turns a Guaranteed GPU pod Burstable (no exclusive cores from the CPU manager).
                "resources": {"requests": dict(INIT_RESOURCES), "limits": dict(INIT_RESOURCES)}}
    env = (
        (PLUGIN_ENV, plugin),
        ("NCCL_INSPECTOR_ENABLE", "1"),
        ("NCCL_INSPECTOR_DUMP_DIR", posixpath.join(lustre.mountPath, ins.dumpDir.strip("/"))),
        ("NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS", str(ins.interval_us)),
        ("NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES", str(ins.min_bytes)),
        ("NCCL_INSPECTOR_DUMP_COLL_RING_SIZE", str(ins.ringSize)),
        ("NCCL_INSPECTOR_ENABLE_P2P", "0"),
    )
    mount = {"name": VOLUME, "mountPath": ins.mountPath, "readOnly": True}
    return InspectorPlan(plugin, env, volume, mount, init)


def _env_of(container: dict[str, Any], name: str) -> dict[str, Any] | None:
    last = None
    for e in container.get("env") or ():
        if isinstance(e, dict) and e.get("name") == name:
            last = e  # the kubelet uses the last entry of a name
    return last


def own_profiler(container: dict[str, Any], plan: InspectorPlan) -> str | None:
    """The container's own NCCL_PROFILER_PLUGIN (its value, or 'valueFrom'), when it is not fabricguard's."""
    e = _env_of(container, PLUGIN_ENV)
    if e is None or e.get("value") == plan.plugin_path:
        return None
    return str(e.get("value")) if "value" in e else "valueFrom"


def _put_env(container: dict[str, Any], name: str, value: str, where: str, warnings: list[str],
             patch: Recorder) -> None:
    cur = _env_of(container, name)
    if cur is None:
        env = container.get("env")
        if not isinstance(env, list):
            env = patch.set(container, "env", [])
        patch.append(env, {"name": name, "value": value})
    elif cur.get("value") != value:
        warnings.append(f"kept the user's {name}={cur.get('value', 'valueFrom')!r} in {where} "
                        f"(fabricguard's Inspector would set {value!r})")


def _put_named(items: list[Any], item: dict[str, Any], patch: Recorder) -> bool:
    """Add ``item`` unless an entry of its name exists; False when that entry is of another kind (a volume with
    another source). Defaults the API server adds to a stored entry do not make it another one."""
    for v in items:
        if isinstance(v, dict) and v.get("name") == item["name"]:
            return set(v) == set(item)
    patch.append(items, item)
    return True


def inject(plan: InspectorPlan | None, spec: dict[str, Any], containers: list[dict[str, Any]], where: str,
           warnings: list[str], patch: Recorder, *, init: bool = True) -> None:
    """Give the GPU ``containers`` of a pod ``spec`` the plugin; warnings say what was kept or left out. Every
    change goes through ``patch`` (the mutation's recorder)."""
    if plan is None:
        return
    chosen = []
    for c in containers:
        cwhere = f"container {c.get('name')!r} of {where}"
        own = own_profiler(c, plan)
        if own is not None:
            warnings.append(f"{cwhere} sets its own {PLUGIN_ENV}={own!r}: kept, so fabricguard's NCCL Inspector is "
                            "not loaded there (NCCL loads one profiler plugin) and its busbw is not measured")
            continue
        chosen.append((c, cwhere))
    if not chosen:
        return
    if plan.init_container is not None and not init:
        warnings.append(f"{where}: the Inspector's initContainer delivery cannot be patched in here; use delivery "
                        "image or hostPath for this kind, the job runs without the Inspector")
        return
    vols = spec.get("volumes")
    if not isinstance(vols, list):
        vols = patch.set(spec, "volumes", [])
    if not _put_named(vols, plan.volume, patch):
        warnings.append(f"{where} has its own volume {VOLUME!r}: the Inspector is not injected")
        return
    if plan.init_container is not None:
        inits = spec.get("initContainers")
        if not isinstance(inits, list):
            inits = patch.set(spec, "initContainers", [])
        _put_named(inits, plan.init_container, patch)
    for c, cwhere in chosen:
        for name, value in plan.env:
            _put_env(c, name, value, cwhere, warnings, patch)
        mounts = c.get("volumeMounts")
        if not isinstance(mounts, list):
            mounts = patch.set(c, "volumeMounts", [])
        if not any(isinstance(m, dict) and m.get("mountPath") == plan.mount["mountPath"] for m in mounts):
            patch.append(mounts, dict(plan.mount))


def trainer_env(plan: InspectorPlan | None, trainer: dict[str, Any], warnings: list[str], patch: Recorder) -> bool:
    """A TrainJob's ``spec.trainer.env``: True when the runtime patch should carry the volume and mount."""
    if plan is None:
        return False
    own = own_profiler(trainer, plan)
    if own is not None:
        warnings.append(f"spec.trainer sets its own {PLUGIN_ENV}={own!r}: kept, so fabricguard's NCCL Inspector is "
                        "not loaded (NCCL loads one profiler plugin) and its busbw is not measured")
        return False
    if plan.init_container is not None:
        warnings.append("TrainJob: the Inspector's initContainer delivery cannot go into runtimePatches; use "
                        "delivery image or hostPath, the job runs without the Inspector")
        return False
    for name, value in plan.env:
        _put_env(trainer, name, value, "spec.trainer", warnings, patch)
    return True
