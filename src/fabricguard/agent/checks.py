"""The agent's checks for its own node: the host checks of ``probes.host``, what the Node advertises, and
(optionally) the GPU performance check against the pool's ceilings.

``fabric.allocatable`` is the check the 271-day incident lacked: the NICs were fine, the device plugin never
advertised the fabric, and nothing asked. It reads ``status.allocatable`` of the Node object, so it needs the
Node: without it the check fails, naming why (fail closed). On a pool whose fabric DRA offers (``fabric.dra``)
the fabric is never in allocatable (KEP-5004 included); the check then reads this node's ResourceSlices from the
pool's driver and counts the usable fabric devices (for DRANET: RDMA devices whose ``dra.net/state`` is up, or
that a pod holds), failing when they cannot be read.

GPUs may be offered through DRA too: GPU Operator's ``GPUCluster`` mode runs the NVIDIA DRA driver, the GPUs are
then ``gpu.nvidia.com`` devices in the node's ResourceSlices and (KEP-5004) never in allocatable. When the GPU
resource is short in allocatable the check counts this node's usable ``gpu.nvidia.com`` GPUs instead, as
NVSentinel's validation does; only when neither offers ``gpusPerNode`` does it fail, naming both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fabricguard import objects
from fabricguard.probes.host import CheckGroup, host_check_groups
from fabricguard.probes.lustre_client import Lnetctl
from fabricguard.probes.result import Check, Status
from fabricguard.profile import PlatformProfile, Pool
from fabricguard.profile.dra import gpu_offer, node_offer
from fabricguard.quantity import amount_or_zero


def allocatable_check(pool: Pool, node: dict[str, Any] | None, node_error: str | None = None,
                      slices: list[dict[str, Any]] | None = None, slices_error: str | None = None) -> Check:
    """Every resource a pod of this pool requests is offered: GPUs and device-plugin fabric resources in
    ``status.allocatable``, a DRA fabric (``fabric.dra``) in this node's ResourceSlices from the pool's driver."""
    d = pool.fabric.dra
    wanted: dict[str, float] = {} if d is not None and d.alignWithGpus else {pool.gpuResource: float(pool.gpusPerNode)}
    if d is None:
        wanted |= {k: float(v) for k, v in pool.fabric.resources.items()}
    if node is None:
        return Check(
            "fabric.allocatable",
            Status.failed,
            f"cannot read the Node object ({node_error or 'no Node given'}): whether the device plugins advertise "
            f"{', '.join(wanted)} is unknown",
            {"error": True},
        )
    alloc = ((node.get("status") or {}).get("allocatable") or {})
    short = {k: (alloc.get(k, "absent"), v) for k, v in wanted.items() if amount_or_zero(alloc.get(k)) < v}
    gpu_note = ""
    if pool.gpuResource in short:
        offered, why = dra_gpus(pool, node, slices, slices_error)
        if offered is not None:
            del short[pool.gpuResource]
            wanted.pop(pool.gpuResource)
            gpu_note = offered
        else:
            gpu_note = why
    if d is not None and pool.fabric.has_fabric and not short:
        check = _dra_check(pool, node, alloc, wanted, slices, slices_error)
        return _with_gpus(check, gpu_note) if pool.gpuResource not in wanted and gpu_note else check
    if short:
        what = "; ".join(
            f"{k} is {have} (pods of pool {pool.name} request {want:g})" for k, (have, want) in short.items()
        )
        return Check(
            "fabric.allocatable",
            Status.failed,
            f"not advertised in status.allocatable: {what}. The hardware may be fine: the device plugin that "
            "advertises it is not (is its DaemonSet running on this node?)"
            + (f"; nor are the GPUs offered through DRA: {gpu_note}" if gpu_note else ""),
            {"missing": {k: have for k, (have, _) in short.items()}},
        )
    check = Check(
        "fabric.allocatable",
        Status.passed,
        "advertised: " + ", ".join(f"{k}={alloc[k]}" for k in wanted),
        {"allocatable": {k: alloc[k] for k in wanted}},
    )
    return _with_gpus(check, gpu_note) if gpu_note else check


def dra_gpus(pool: Pool, node: dict[str, Any], slices: list[dict[str, Any]] | None,
             slices_error: str | None) -> tuple[str | None, str]:
    """(what passes, None when the node's ``gpu.nvidia.com`` ResourceSlices do not offer ``gpusPerNode`` usable
    GPUs; why not)."""
    name = objects.name_of(node)
    if slices is None:
        return None, f"cannot read this node's ResourceSlices ({slices_error or 'not listed'})"
    offer = gpu_offer(name, slices)
    if offer.usable >= pool.gpusPerNode:
        return f"{pool.gpuResource} offered through DRA: {offer.describe(name)} (pods need {pool.gpusPerNode})", ""
    return None, f"{offer.describe(name)} (pods need {pool.gpusPerNode})"


def _with_gpus(check: Check, note: str) -> Check:
    if check.status is not Status.passed:
        return check
    return Check(check.name, check.status, f"{check.detail}; {note}" if check.detail != "advertised: " else note,
                 {**(check.data or {}), "gpus": note})


def _dra_check(pool: Pool, node: dict[str, Any], alloc: dict[str, Any], wanted: dict[str, float],
               slices: list[dict[str, Any]] | None, slices_error: str | None) -> Check:
    d = pool.fabric.dra
    assert d is not None
    name = objects.name_of(node)
    if slices is None:
        return Check("fabric.allocatable", Status.failed,
                     f"cannot read this node's ResourceSlices ({slices_error or 'not listed'}): whether driver "
                     f"{d.driver} offers DeviceClass {d.deviceClassName}'s devices is unknown", {"error": True})
    offer = node_offer(pool, name, slices)
    data: dict[str, Any] = {"resourceSlices": offer.slices, "devices": offer.listed, "matching": offer.matching,
                            "usable": offer.usable, "wanted": offer.wanted}
    if not offer.ok:
        plugin = (f"DaemonSet {d.driverDaemonSet.namespace}/{d.driverDaemonSet.daemonSet}" if d.driverDaemonSet
                  else f"the {d.driver} DRA driver")
        return Check("fabric.allocatable", Status.failed,
                     f"not offered through DRA: {offer.describe(d, name)}. Is {plugin} running on this node?",
                     data | {"down": offer.down[:16]})
    gpus = ", ".join(f"{k}={alloc[k]}" for k in wanted)
    return Check("fabric.allocatable", Status.passed,
                 f"offered through DRA: {offer.describe(d, name)}" + (f"; advertised: {gpus}" if gpus else ""), data)


def gpu_perf_checks(ceilings: Path | None) -> list[Check]:
    """The short GPU performance check, only where the operator gave ceilings (it takes the GPUs for seconds)."""
    if ceilings is None:
        return [Check("gpu.perf", Status.skipped, "no --gpu-ceilings: GPU performance is not checked by the agent")]
    from fabricguard.probes.gpu import gpu_check

    try:
        checks, _ = gpu_check(ceilings)
    except Exception as e:  # fail closed: a broken CUDA stack is a failed check, not a crash
        return [Check("gpu.perf", Status.failed, f"check could not run: {type(e).__name__}: {e}", {"error": True})]
    # Asked for and not run (no torch, no CUDA) is not a pass: the operator required this check.
    return [
        Check(c.name, Status.failed, f"check could not run: {c.detail}", {"error": True})
        if c.status is Status.skipped and c.name == "gpu.perf"
        else c
        for c in checks
    ]


def node_check_groups(
    profile: PlatformProfile,
    pool: Pool,
    *,
    root: Path,
    gpu_data: tuple[dict[str, Any] | None, str],
    node: dict[str, Any] | None,
    node_error: str | None = None,
    gpu_ceilings: Path | None = None,
    slices: list[dict[str, Any]] | None = None,
    slices_error: str | None = None,
    lnetctl: Lnetctl | None = None,
) -> list[CheckGroup]:
    """Every check the agent reports as (group, run) pairs, in order: host, allocatable (or the DRA offer), GPU
    performance. The agent runs them one by one on a worker it can abandon (``agent.deadline``)."""
    return [
        *host_check_groups(profile, pool, root, gpu_data, require_gpus=True, lnetctl=lnetctl),
        ("fabric.allocatable", lambda: [allocatable_check(pool, node, node_error, slices, slices_error)]),
        ("gpu.perf", lambda: gpu_perf_checks(gpu_ceilings)),
    ]


def node_checks(
    profile: PlatformProfile,
    pool: Pool,
    *,
    root: Path,
    gpu_data: tuple[dict[str, Any] | None, str],
    node: dict[str, Any] | None,
    node_error: str | None = None,
    gpu_ceilings: Path | None = None,
    slices: list[dict[str, Any]] | None = None,
    slices_error: str | None = None,
    lnetctl: Lnetctl | None = None,
) -> list[Check]:
    """Every check the agent reports, in order: host, allocatable (or the DRA offer), GPU performance."""
    groups = node_check_groups(profile, pool, root=root, gpu_data=gpu_data, node=node, node_error=node_error,
                               gpu_ceilings=gpu_ceilings, slices=slices, slices_error=slices_error,
                               lnetctl=lnetctl)
    return [c for _, run in groups for c in run()]
