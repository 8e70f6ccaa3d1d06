"""A job's collective bus bandwidth from NCCL's Inspector, judged against its pool's floor: one rule for all.

``verify-job`` (after the fact), the controller (while the job runs) and the canary (the pool's own figure) read
the same Inspector records (:mod:`fabricguard.nccl.inspector`) and judge them here. The floor is the pool's
``baseline.allReduceBusBwGBps x floorFraction``. Bus bandwidth is normalised to the link rate (nccl-tests'
factors), so AllReduce, AllGather and ReduceScatter at large sizes are held to that one floor; other collectives
(Broadcast, Reduce, ...) are reported, not judged. Only communicators that span nodes count: an intra-node one
measures NVLink, not the fabric.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabricguard.nccl.inspector import FILE_NAME, JUDGED, CollectiveFigure, is_inspector_file, read_dir, summarize
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

    def message(self, large_bytes: int) -> str:
        f = self.figure
        what = (f"{f.collective} busbw {f.busbw_gbps:.1f} GB/s (median of {f.records} Inspector records at "
                f">= {_size(large_bytes)}, {f.nnodes} nodes, {f.nranks} ranks; min {f.min_gbps:.1f}, "
                f"max {f.max_gbps:.1f})")
        if not self.judged:
            return what + "; not judged (no bus-bandwidth floor for this collective)"
        if self.floor_gbps is None:
            return what + "; the pool has no baseline.allReduceBusBwGBps, so it is not judged"
        return what + (" is below" if self.below else " >=") + f" the pool's floor {self.floor_gbps:.1f} GB/s"

    def to_dict(self) -> dict[str, Any]:
        return {**self.figure.to_dict(), "floor_gbps": self.floor_gbps, "judged": self.judged, "below": self.below}


def _size(n: int) -> str:
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << k and n % (1 << k) == 0:
            return f"{n >> k} {unit}"
    return f"{n} B"


def large_bytes(profile: PlatformProfile) -> int:
    return profile.spec.inspector.large_bytes if profile.spec.inspector is not None else DEFAULT_LARGE


def rows(pool: Pool, figures: dict[str, CollectiveFigure]) -> list[BusbwRow]:
    floor = pool.baseline.busbw_floor_gbps
    return [BusbwRow(c, f, floor, c in JUDGED) for c, f in sorted(figures.items())]


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


def figures_of(paths: list[Path], dump_dir: Path | None, large: int, root: Path | None = None
               ) -> tuple[dict[str, CollectiveFigure], int]:
    """Per-collective figures over every record found, and how many records were read (files opened only
    within ``root``)."""
    recs = []
    dirs = {p.parent for p in paths}
    if dump_dir is not None:
        dirs.add(dump_dir)
    total = 0
    for d in sorted(dirs):
        got, st = read_dir(d, root=root)
        recs += got
        total += st.records
    return summarize(recs, large), total


def own_profiler(profilers: list[str]) -> str | None:
    """The profiler NCCL loaded when it is not the Inspector (the job kept its own NCCL_PROFILER_PLUGIN)."""
    for p in profilers:
        if p != INSPECTOR_NAME:
            return p
    return None


def where(path: Path | str) -> str:
    return posixpath.normpath(str(path))
