"""While a job runs: the bus bandwidth of its collectives across nodes, from NCCL's Inspector, against its pool.

The webhook loads the Inspector into every managed job of a pool that gets it (``spec.inspector``) and points its
dump directory at ``<job dir>/<dumpDir>`` on Lustre. ``JobBusbw`` follows that directory the way the log followers
follow NCCL's logs (``nccl.inspector.InspectorFollower``: incremental, bounded, nothing read twice) and keeps a
per-minute series of the large-message busbw of communicators spanning nodes. The controller exports it as
``fabricguard_job_busbw_gbps{namespace,job,collective}`` beside the floor that applies to the job; a job whose
AllReduce, AllGather or ReduceScatter stays below its pool's floor for ``belowFloorFor`` (by the records' own dump
times) is annotated with the figures and told in a Warning Event; the alert ``FabricguardJobBusBwBelowFloor``
fires from the same series. A job back above the floor is told once too.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from fabricguard import objects as o
from fabricguard import times
from fabricguard.controller.actions import Action, Annotate, event
from fabricguard.controller.canary import job_dir
from fabricguard.nccl.inspector import InspectorFollower, MinuteFigure, ReadStats, Series, ShapeKey, shape_text
from fabricguard.nccl.ranks import Attribution, AttributionView
from fabricguard.profile.model import Inspector, PlatformProfile, Pool
from fabricguard.times import from_epoch_us
from fabricguard.verdict.busbw import INSPECTOR_NAME, floor_of

if TYPE_CHECKING:
    from fabricguard.controller.facts import RunningJob

ANN_BUSBW = "fabricguard.io/busbw"
ANN_BUSBW_STATE = "fabricguard.io/busbw-state"  # below | ok: what was last told
TAIL_BYTES = 64 << 10  # ~150 records: about ten 60-s dumps of a full ring of 8 on two communicators


def dump_dir(profile: PlatformProfile, ins: Inspector, namespace: str, job: str) -> str:
    """The job's Inspector directory relative to the Lustre claim root (where NCCL_INSPECTOR_DUMP_DIR writes)."""
    return posixpath.join(job_dir(profile, namespace, job), ins.dumpDir.strip("/"))


@dataclass
class JobBusbw:
    """One running job's Inspector follower and its per-minute busbw series."""

    directory: Path
    settings: Inspector
    root: Path | None = None  # the job's directory: nothing is read through a link out of it
    follower: InspectorFollower = field(init=False)
    series: Series = field(init=False)
    ranks: Attribution = field(init=False)  # the late rank and the slow node (nccl/ranks.py)
    ranks_view: AttributionView | None = None

    def __post_init__(self) -> None:
        # A controller that starts (or restarts) while the job runs reads each file's last 64 KiB, not its history.
        self.follower = InspectorFollower(self.directory, tail_bytes=TAIL_BYTES, root=self.root)
        keep = max(15, 2 * self.settings.below_floor_s // 60)
        self.series = Series(self.settings.large_bytes, keep_minutes=keep)
        self.ranks = Attribution(self.settings.large_bytes, rounds=self.settings.suspectRounds)

    def poll(self) -> ReadStats:
        records, stats = self.follower.poll()
        self.series.add(records)
        if records or self.ranks_view is None:
            self.ranks.add(records)
            self.ranks_view = self.ranks.judge()  # judged only when records came: an idle job costs nothing
        return stats


@dataclass(frozen=True)
class BusbwView:
    """What a poll concluded about one job: figures per collective and communicator shape (each judged against
    the floor of its shape, ``verdict.busbw.shape_floor``), the pool's floor, and the threshold for acting."""

    figures: dict[ShapeKey, MinuteFigure]
    floor_gbps: float | None
    below_for_s: int
    ranks: AttributionView | None = None  # per rank and per node (nccl/ranks.py)
    progress: int = 0  # collective instances seen to start: stops growing when the job stalls

    @property
    def below(self) -> list[MinuteFigure]:
        """Collectives below their shape's floor for at least the threshold, longest first."""
        out = [f for f in self.figures.values() if f.below_minutes * 60 >= self.below_for_s]
        return sorted(out, key=lambda f: (-f.below_minutes, f.collective, f.per_node))

    def text(self) -> str:
        parts = []
        shapes = len({f.per_node for f in self.figures.values()}) > 1
        for f in self.below or self.figures.values():
            s = f"{f.collective} {f.busbw_gbps:.1f} GB/s"
            if shapes:
                s += f" ({shape_text(f.per_node)}" + (f", floor {f.floor_gbps:.1f})" if f.floor_gbps is not None
                                                      else ", no floor)")
            if f.below_minutes:
                s += f" below for {f.below_minutes} min"
            parts.append(s)
        floor = f"pool floor {self.floor_gbps:.1f} GB/s" if self.floor_gbps is not None else "no floor"
        return "; ".join(parts) + f" ({floor}; NCCL Inspector, communicators across nodes)"


def view_of(jb: JobBusbw, pool: Pool) -> BusbwView:
    return BusbwView(jb.series.figures(floor_of(pool)), pool.baseline.busbw_floor_gbps, jb.settings.below_floor_s,
                     jb.ranks_view, jb.ranks.progress)


def busbw_actions(job: RunningJob, view: BusbwView, reported: str | None, now: datetime) -> list[Action]:
    """Annotation and Event when a job has been below its pool's floor long enough, and when it is back."""
    if view.floor_gbps is None or not view.figures:
        return []
    state = "below" if view.below else "ok"
    current = o.annotations_of(job.obj).get(ANN_BUSBW_STATE)
    told = reported if reported is not None else current
    if state == told or (state == "ok" and told is None):
        return []  # a healthy job is not written to; a state is told once
    if state == "below":
        worst = view.below[0]
        at = from_epoch_us(worst.below_since_us or 0, now.tzinfo)  # range-checked where read; checked here too
        since = times.format_time(at) if at is not None else "an unreadable time"  # ...Z, as every Event says
        detail = (f"collective bus bandwidth below pool {job.pool}'s floor since {since}: {view.text()}; "
                  "the job runs but its collectives are slow (see its Inspector records and the dashboard's job view)")
        reason, warning = "FabricBusBwBelowFloor", True
    else:
        detail = f"collective bus bandwidth back at or above pool {job.pool}'s floor: {view.text()}"
        reason, warning = "FabricBusBwRecovered", False
    return [
        Annotate(job.api_version, job.plural, job.namespace, job.name,
                 {ANN_BUSBW: view.text()[:1000], ANN_BUSBW_STATE: state}),
        event(job.obj, job.api_version, job.kind, reason, detail[:1000], now, warning=warning),
    ]


def own_profiler_actions(job: RunningJob, profilers: list[str], reported: str | None, now: datetime) -> list[Action]:
    """A job on an Inspector pool whose NCCL logs say it loaded another profiler plugin: told once, quietly."""
    own = next((p for p in profilers if p != INSPECTOR_NAME), None)
    told = reported if reported is not None else o.annotations_of(job.obj).get(ANN_BUSBW_STATE)
    if own is None or told == "own-profiler":
        return []
    text = (f"not measured: the job loads its own NCCL profiler plugin {own} (NCCL loads one), so fabricguard's "
            "Inspector is not there")
    return [
        Annotate(job.api_version, job.plural, job.namespace, job.name,
                 {ANN_BUSBW: text[:1000], ANN_BUSBW_STATE: "own-profiler"}),
        event(job.obj, job.api_version, job.kind, "FabricBusBwNotMeasured", text, now, warning=False),
    ]
