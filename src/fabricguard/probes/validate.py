"""``fabricguard validate``: run the host, collective, storage and GPU probes for one pool and write one report.

Local mode (the default without a profile) validates this machine with the embedded ``local`` profile: two
gloo ranks over loopback, a temporary directory for storage, GPUs not required. There is no RDMA here, so the
only honest expected transport is sockets; the report says so.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabricguard import __version__
from fabricguard.console import envelope
from fabricguard.probes.bw import expectation_for
from fabricguard.probes.collective import CollectiveConfig, run_probe
from fabricguard.probes.host import probe_host
from fabricguard.probes.report import render_html
from fabricguard.probes.result import Check, Status, overall, worst
from fabricguard.probes.storage import StorageConfig, StorageRefused, probe_storage
from fabricguard.profile import PlatformProfile, Pool
from fabricguard.userfiles import output_dir, write_text

LOCAL_NOTE = (
    "Local mode: this machine only, with the embedded 'local' profile. There is no RDMA here, so the expected "
    "transport is sockets (gloo over loopback TCP); these figures say nothing about a GPU fabric."
)


@dataclass
class ValidateOptions:
    profile: PlatformProfile
    pool: Pool
    local: bool
    out_dir: Path
    sizes: list[int]
    collectives: list[str] = field(default_factory=lambda: ["all_reduce", "all_gather", "reduce_scatter"])
    warmup: int = 2
    iters: int = 5
    local_ranks: int | None = 2
    backend: str = "auto"
    force_net: bool | None = None
    storage_path: str | None = None
    storage_ranks: int = 2
    storage_size: int = 32 * 1024 * 1024
    small_files: int = 200
    storage_engine: str = "auto"
    root: Path = Path("/")
    nvml_json: Path | None = None
    gpu_ceilings: Path | None = None
    skip: set[str] = field(default_factory=set)


Step = Callable[[str], None]

# The probes ``validate`` runs, in order; ``--skip`` names some of them (never all: nothing would be judged).
PROBES = ("host", "collective", "storage", "gpu")


def _net_to_force(opts: ValidateOptions) -> str | None:
    force = opts.pool.fabric.has_fabric if opts.force_net is None else opts.force_net
    return opts.pool.fabric.effective_nccl_net if force else None


def run_validate(opts: ValidateOptions, step: Step = lambda _s: None) -> dict[str, Any]:
    """Run every probe and write report.json and report.html into ``opts.out_dir``; returns the report."""
    t0 = time.monotonic()
    output_dir(opts.out_dir)
    expect = expectation_for(opts.pool)
    report: dict[str, Any] = {
        "apiVersion": "fabricguard.io/v1",
        "kind": "ValidationReport",
        "fabricguard": __version__,
        "mode": "local" if opts.local else "profile",
        "profile": opts.profile.metadata.name,
        "pool": opts.pool.name,
        "fabric": str(opts.pool.fabric.type),
        "hostname": socket.gethostname(),
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "notes": [LOCAL_NOTE] if opts.local else [],
        "expect": expect.__dict__,
    }
    statuses: list[Status] = []

    step("host")
    if "host" not in opts.skip:
        host = probe_host(
            opts.profile, opts.pool, root=opts.root, nvml_json=opts.nvml_json, require_gpus=not opts.local
        )
        report["host"] = host.to_dict()
        statuses.append(host.status)

    step("collective")
    if "collective" not in opts.skip:
        cfg = CollectiveConfig(
            collectives=opts.collectives,
            sizes=opts.sizes,
            warmup=opts.warmup,
            iters=opts.iters,
            backend=opts.backend,
            log_dir=str(opts.out_dir / "nccl"),
            nccl_net=_net_to_force(opts),
        )
        res = run_probe(cfg, local_ranks=opts.local_ranks, expect=expect)
        report["collective"] = res.to_dict()
        assert res.judgement is not None
        statuses.append(res.judgement.status)

    step("storage")
    if "storage" not in opts.skip:
        report["storage"] = _storage(opts)
        statuses.append(Status(report["storage"]["status"]))

    step("gpu")
    if "gpu" not in opts.skip:
        from fabricguard.probes.gpu import gpu_check

        checks, measured = gpu_check(opts.gpu_ceilings)
        st = worst([c.status for c in checks])  # every check skipped (no CUDA) is a skipped probe, not a pass
        report["gpu"] = {"status": str(st), "checks": [c.to_dict() for c in checks], "measured": measured}
        statuses.append(st)

    if not statuses:
        raise ValueError(f"every probe was skipped ({', '.join(sorted(opts.skip))}): nothing was validated")
    # Probes that ran but judged nothing (every check skipped) make a "skipped" verdict, never a pass.
    status = Status.skipped if worst(statuses) is Status.skipped else overall(statuses)
    report["verdict"] = str(status)
    report["seconds"] = time.monotonic() - t0
    step("report")
    report = envelope("ValidationReport", report)  # the verdict first, as every command's JSON
    write_text(opts.out_dir / "report.json", json.dumps(report, indent=2, default=str) + "\n")
    write_text(opts.out_dir / "report.html", render_html(report))
    return report


def _storage(opts: ValidateOptions) -> dict[str, Any]:
    lustre = opts.profile.spec.storage.lustre if opts.pool.lustre else None
    tmp: tempfile.TemporaryDirectory[str] | None = None
    path = opts.storage_path or (lustre.mountPath if lustre else None)
    if path is None:
        tmp = tempfile.TemporaryDirectory(prefix="fabricguard-validate-")
        path = tmp.name
    cfg = StorageConfig(
        path=path,
        ranks=opts.storage_ranks,
        file_size=opts.storage_size,
        small_files=opts.small_files,
        engine=opts.storage_engine,
        expect_fstype="lustre" if lustre else None,
        baseline_write_mbps=opts.pool.baseline.storageWriteMBps,
        baseline_read_mbps=opts.pool.baseline.storageReadMBps,
        floor_fraction=opts.pool.baseline.floorFraction,
    )
    try:
        return probe_storage(cfg).to_dict()
    except StorageRefused as e:
        c = Check("storage.refused", Status.failed, str(e))
        return {"path": path, "status": str(Status.failed), "checks": [c.to_dict()], "metrics": {}}
    finally:
        if tmp is not None:
            tmp.cleanup()


def default_out_dir() -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path(tempfile.gettempdir()) / f"fabricguard-validate-{stamp}-{os.getpid()}"
