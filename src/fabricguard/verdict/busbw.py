"""A job's collective bus bandwidth from NCCL's Inspector, judged against its pool's floor: one rule for all.

``verify-job`` (after the fact), the controller (while the job runs) and the canary (the pool's own figure) read
the same Inspector records (:mod:`fabricguard.nccl.inspector`) and judge them here. The floor is the pool's
``baseline.allReduceBusBwGBps x floorFraction``, measured by the canary with every GPU of each node. Bus bandwidth
is normalised to the link rate (nccl-tests' factors), so AllReduce, AllGather and ReduceScatter at large sizes are
held to a floor; other collectives (Broadcast, Reduce, ...) are reported, not judged. Only communicators that span
nodes count: an intra-node one measures NVLink, not the fabric.

Each communicator is judged by its *shape* (:func:`shape_floor`): one with every GPU of each node (the canary's
shape) against the pool's floor; one with k of the node's G GPUs (a hybrid-sharded job's one-GPU-per-node replicate
groups, a rail-aligned split) against the floor x k/G, since with one NIC per GPU it can use only k of the node's
NICs (a healthy H200 RoCE replicate group runs near one NIC's ~48 GB/s, far below the node's 284 floor, by
design); one whose ranks do not divide evenly over its nodes is not held to a floor at all, only compared with
the job's other communicators (``nccl.ranks``).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabricguard.nccl.inspector import (
    FILE_NAME,
    JUDGED,
    CollectiveFigure,
    CollRecord,
    ShapeKey,
    is_inspector_file,
    read_dir,
    shape_text,
    summarize_by_shape,
)
from fabricguard.profile.model import PlatformProfile, Pool
from fabricguard.userfiles import walk_files

INSPECTOR_NAME = "Inspector"  # the name the plugin gives NCCL ("PROFILER/Plugin: Loaded Inspector (v5)")
DEFAULT_LARGE = 64 << 20


@dataclass(frozen=True)
class BusbwRow:
    collective: str
    figure: CollectiveFigure
    floor_gbps: float | None
    judged: bool

    @property
    def below(self) -> bool:
        return self.judged and self.floor_gbps is not None and self.figure.busbw_gbps < self.floor_gbps

    floor_why: str = "the pool's floor"

    def message(self, large_bytes: int) -> str:
        f = self.figure
        shape = f", {shape_text(f.per_node)} communicators" if f.per_node is not None else ""
        what = (f"{f.collective} busbw {f.busbw_gbps:.1f} GB/s (median of {f.records} Inspector records at "
                f">= {_size(large_bytes)}{shape}, up to {f.nnodes} nodes, {f.nranks} ranks; min {f.min_gbps:.1f}, "
                f"max {f.max_gbps:.1f})")
        if not self.judged:
            return what + "; not judged (no bus-bandwidth floor for this collective)"
        if self.floor_gbps is None:
            if f.per_node == 0:
                return what + "; ranks uneven over nodes: compared with the job's other communicators, no floor"
            return what + "; the pool has no baseline.allReduceBusBwGBps, so it is not judged"
        return what + (" is below" if self.below else " >=") + f" {self.floor_why} {self.floor_gbps:.1f} GB/s"

    def to_dict(self) -> dict[str, Any]:
        return {**self.figure.to_dict(), "floor_gbps": self.floor_gbps, "judged": self.judged, "below": self.below}


def _size(n: int) -> str:
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << k and n % (1 << k) == 0:
            return f"{n >> k} {unit}"
    return f"{n} B"


def large_bytes(profile: PlatformProfile) -> int:
    return profile.spec.inspector.large_bytes if profile.spec.inspector is not None else DEFAULT_LARGE


def shape_floor(pool: Pool, ranks_per_node: int) -> tuple[float | None, str]:
    """(floor, what it is) for communicators with ``ranks_per_node`` ranks on each node (0: uneven): the pool's
    floor for the canary's shape (every GPU of the node), floor x k/G for k of G GPUs per node (one NIC per GPU),
    none for an uneven one."""
    floor = pool.baseline.busbw_floor_gbps
    g = pool.gpusPerNode
    if floor is None or ranks_per_node <= 0:
        return None, "no floor"
    if ranks_per_node >= g:
        return floor, "the pool's floor"
    return floor * ranks_per_node / g, f"the pool's floor x {ranks_per_node}/{g} ({ranks_per_node} NIC(s) per node)"


def floor_of(pool: Pool) -> Callable[[int], float | None]:
    """The floor per ranks-per-node shape, for ``nccl.inspector.Series.figures``."""
    return lambda k: shape_floor(pool, k)[0]


def rows(pool: Pool, figures: dict[ShapeKey, CollectiveFigure]) -> list[BusbwRow]:
    out = []
    for (c, k), f in sorted(figures.items()):
        floor, why = shape_floor(pool, k)
        out.append(BusbwRow(c, f, floor, c in JUDGED, why))
    return out


def job_root(profile: PlatformProfile, directory: Path) -> Path:
    """The job's own directory: ``directory`` itself, or its parent when it is the NCCL log directory
    ``<job>/<logDir>`` (then the Inspector's ``<job>/<dumpDir>`` is its sibling)."""
    lustre = profile.spec.storage.lustre
    if lustre is not None:
        log = lustre.logDir.strip("/")
        if directory.as_posix().rstrip("/").endswith("/" + log):
            return directory.parents[len(log.split("/")) - 1]
    return directory


def inspector_dir(profile: PlatformProfile, directory: Path) -> Path | None:
    """Where a job's Inspector records are, given the directory ``verify-job`` was pointed at (the job's own
    directory, or its NCCL log directory)."""
    ins = profile.spec.inspector
    dump = (ins.dumpDir if ins is not None else ".fabricguard/inspector").strip("/")
    for c in dict.fromkeys((job_root(profile, directory) / dump, directory / dump)):
        if c.is_dir():
            return c
    return None


def find_records(profile: PlatformProfile, directory: Path) -> tuple[list[Path], Path | None]:
    """(Inspector files inside ``directory``'s tree, the job's dump directory if there is one). The tree is the
    tenant's: listed with ``userfiles.walk_files`` (bounded, never through a link out of it)."""
    inside = [p for p in walk_files(directory, hidden=True).files
              if FILE_NAME.match(p.name) and is_inspector_file(p, directory)]
    return inside, inspector_dir(profile, directory)


def records_of(paths: list[Path], dump_dir: Path | None, root: Path | None = None
               ) -> tuple[list[CollRecord], int]:
    """Every record of communicators spanning nodes found, and how many records were read (files opened only
    within ``root``)."""
    recs: list[CollRecord] = []
    dirs = {p.parent for p in paths}
    if dump_dir is not None:
        dirs.add(dump_dir)
    total = 0
    for d in sorted(dirs):
        got, st = read_dir(d, root=root)
        recs += got
        total += st.records
    return recs, total


def figures_of(paths: list[Path], dump_dir: Path | None, large: int, root: Path | None = None
               ) -> tuple[dict[ShapeKey, CollectiveFigure], int]:
    """Per collective and communicator shape, figures over every record found, and how many records were read."""
    recs, total = records_of(paths, dump_dir, root)
    return summarize_by_shape(recs, large), total


def own_profiler(profilers: list[str]) -> str | None:
    """The profiler NCCL loaded when it is not the Inspector (the job kept its own NCCL_PROFILER_PLUGIN)."""
    for p in profilers:
        if p != INSPECTOR_NAME:
            return p
    return None


def where(path: Path | str) -> str:
    return posixpath.normpath(str(path))
