"""The agent's checks for its own node: the host checks of ``probes.host``, what the Node advertises, and
(optionally) the GPU performance check against the pool's ceilings.

``fabric.allocatable`` is the check the 271-day incident lacked: the NICs were fine, the device plugin never
advertised the fabric, and nothing asked. It reads ``status.allocatable`` of the Node object, so it needs the
Node: without it the check fails, naming why (fail closed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fabricguard.probes.host import host_checks
from fabricguard.probes.result import Check, Status
from fabricguard.profile import PlatformProfile, Pool
from fabricguard.quantity import amount_or_zero


def allocatable_check(pool: Pool, node: dict[str, Any] | None, node_error: str | None = None) -> Check:
    """Every resource a pod of this pool requests (fabric resources and GPUs) is advertised in allocatable."""
    wanted: dict[str, float] = {pool.gpuResource: float(pool.gpusPerNode)}
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
    if short:
        what = "; ".join(
            f"{k} is {have} (pods of pool {pool.name} request {want:g})" for k, (have, want) in short.items()
        )
        return Check(
            "fabric.allocatable",
            Status.failed,
            f"not advertised in status.allocatable: {what}. The hardware may be fine: the device plugin that "
            "advertises it is not (is its DaemonSet running on this node?)",
            {"missing": {k: have for k, (have, _) in short.items()}},
        )
    return Check(
        "fabric.allocatable",
        Status.passed,
        "advertised: " + ", ".join(f"{k}={alloc[k]}" for k in wanted),
        {"allocatable": {k: alloc[k] for k in wanted}},
    )


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


def node_checks(
    profile: PlatformProfile,
    pool: Pool,
    *,
    root: Path,
    gpu_data: tuple[dict[str, Any] | None, str],
    node: dict[str, Any] | None,
    node_error: str | None = None,
    gpu_ceilings: Path | None = None,
) -> list[Check]:
    """Every check the agent reports, in order: host, allocatable, GPU performance."""
    return [
        *host_checks(profile, pool, root, gpu_data, require_gpus=True),
        allocatable_check(pool, node, node_error),
        *gpu_perf_checks(gpu_ceilings),
    ]
