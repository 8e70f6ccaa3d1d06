"""A verdict while the job runs: follow every running managed job's NCCL logs and act within minutes on sockets.

The webhook sends each managed job's NCCL logs (``NCCL_DEBUG_FILE``, one file per rank) to the job's directory
on Lustre; NCCL writes the lines that prove the transport during communicator init. ``LiveJobs`` keeps one
``nccl.follow.LogFollower`` per running job (never rereading a byte), and :func:`live_actions` turns what the
logs prove into the record a person sees: the annotation ``fabricguard.io/transport``, an Event on the job, and
the metrics behind the job-on-sockets alert. A pool's ``onFallback: stop`` also stops the job through its own API:
a Kueue-managed job's Workload is deactivated (``spec.active: false``, so Kueue suspends the job and nothing is
lost), any other job is suspended (``spec.suspend: true``). The default, ``warn``, only tells.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from fabricguard import descriptors, fabrics, kinds, names
from fabricguard import objects as o
from fabricguard.controller.actions import Action, Annotate, MergePatch, event
from fabricguard.controller.busbw import BusbwView, JobBusbw, dump_dir, view_of
from fabricguard.controller.canary import job_dir, log_dir
from fabricguard.controller.facts import RunningJob as RunningJob  # re-exported: live.RunningJob
from fabricguard.controller.hang import HangWatch
from fabricguard.controller.live_io import JobIo, live_bound
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.nccl.follow import LiveVerdict, LogFollower
from fabricguard.nccl.report import Evidence, NcclReport
from fabricguard.profile.model import PlatformProfile, Transport
from fabricguard.userfiles import LinkFreeFolder
from fabricguard.verdict.io import IoSummary

log = logging.getLogger("fabricguard.controller")

ANN_TRANSPORT = names.ANN_TRANSPORT
ANN_TRANSPORT_DETAIL = names.ANN_TRANSPORT_DETAIL
KUEUE_QUEUE = names.KUEUE_QUEUE_NAME
# Transports worth writing down: the others say the logs do not prove anything yet.
_KNOWN = fabrics.wire_transports() | {Transport.socket, Transport.mixed}  # every proven answer


def running_jobs(profile: PlatformProfile, by_kind: dict[str, list[dict[str, Any]]],
                 snapshot: Snapshot | None = None) -> list[RunningJob]:
    """Managed jobs that run now on a fabric pool whose logs land on Lustre (canaries have their own judge): one
    per object, or one per replica group for a kind made of groups (a LeaderWorkerSet's groups each write their
    own directory, ``<name>/<group index>``). With ``snapshot`` (whose ``by_kind`` this is), each object's jobs
    are kept while it is the same object."""
    followed = frozenset(p.name for p in profile.spec.pools if p.fabric.has_fabric and p.lustre
                         and profile.spec.storage.lustre is not None)
    # A job without the pool label runs on the default pool (PlatformProfile.pool).
    pools = profile.spec.pools
    default = profile.spec.defaultPool or (pools[0].name if len(pools) == 1 else None)
    out: list[RunningJob] = []
    for k in kinds.MANAGED:
        view = partial(_running, k, followed, default)
        objs = by_kind.get(k.kind, [])
        seen = (snapshot.select(("running jobs", k.kind), objs, view) if snapshot is not None
                else [(obj, v) for obj in objs if (v := view(obj))])
        for _, jobs in seen:
            out += jobs
    return out


def _running(k: kinds.WorkloadKind, followed: frozenset[str], default: str | None,
             obj: dict[str, Any]) -> tuple[RunningJob, ...]:
    """The jobs one managed object runs now on a pool of ``followed`` (those whose logs are followed; ``default``:
    the pool of a job that names none)."""
    labels = o.labels_of(obj)
    if labels.get(names.LABEL_MANAGED) != "true" or names.LABEL_CANARY_POOL in labels:
        return ()
    if k.finished(obj) or k.suspended(obj):
        return ()
    pool = labels.get(names.LABEL_POOL) or default
    if pool not in followed:
        return ()
    ns, name = o.namespace_of(obj) or "default", o.name_of(obj)
    if k.group_label:
        groups = (obj.get("spec") or {}).get("replicas", 1)
        logs = [f"{name}/{i}" for i in range(groups if isinstance(groups, int) and groups > 0 else 0)]
    else:
        log = k.log_name(obj)
        logs = [log] if log else []  # a RayJob before its RayCluster exists has no logs yet
    return tuple(RunningJob(k.kind, k.api_version, k.plural, ns, name, str(pool), obj, "" if log == name else log)
                 for log in logs)


@dataclass
class Observation:
    job: RunningJob
    verdict: LiveVerdict
    busbw: BusbwView | None = None  # the pool's jobs get NCCL's Inspector (profile spec.inspector)
    hang: dict[str, Any] | None = None  # a hang NCCL's RAS confirmed (controller/hang.py): what was written
    io: IoSummary | None = None  # the job's I/O phases so far against the storage floor (controller/live_io.py)
    bound: str = "none"  # fabric | storage | fabric+storage | none, so far (live_io.live_bound)


@dataclass
class LiveCost:
    jobs: int = 0  # running managed jobs to follow (all of them: there is no cap)
    followed: int = 0  # ... whose logs were read within their bound (``LiveJobs.bound_s``)
    unfollowed: int = 0  # ... whose logs were not: the poll could not keep up, an alert fires
    lag_s: float = 0.0  # age of the least recently read job's latest read
    polled: int = 0  # jobs read by the latest poll
    files: int = 0
    bytes_total: int = 0
    last_poll_s: float = 0.0
    descriptor_shortages: int = 0  # opens refused for want of a descriptor, by this process so far
    inspector_files: int = 0
    inspector_bytes_total: int = 0
    inspector_records_total: int = 0
    io_bytes_total: int = 0  # bytes of running jobs' step-timing JSONL read for their I/O records


@dataclass
class _Followed:
    job: RunningJob
    follower: LogFollower
    since: float  # monotonic time the job was first seen running
    read_at: float | None = None  # monotonic time of its latest read
    latest: Observation | None = None
    # Its folders under the Lustre root, each proven free of links once and re-proven when it changes.
    folders: dict[Path, LinkFreeFolder] = field(default_factory=dict)
    key: tuple[str, str, str] = ("", "", "")  # RunningJob.key, as LiveJobs keys it
    logs: LinkFreeFolder | None = None  # folders[follower.directory]
    io: JobIo | None = None  # LiveJobs._io[key]
    busbw: JobBusbw | None = None  # LiveJobs._busbw[key]

    # What the latest observation's I/O summary and bound were drawn from (profile, pool, transport, below the
    # floor): a quiet poll keeps them instead of drawing them again for each of tens of thousands of jobs.
    drawn: tuple[object, ...] = ()

    def no_link(self, lustre_root: Path, directory: Path) -> os.stat_result | None:
        """Never another tenant's folder through a link (``userfiles.LinkFreeFolder``); the folder's ``stat``."""
        if directory is self.follower.directory:  # every poll of every job: no Path hash per poll
            if self.logs is None:
                self.logs = self.folders[directory] = LinkFreeFolder(lustre_root, directory)
            return self.logs.check()
        folder = self.folders.get(directory)
        if folder is None:
            folder = self.folders[directory] = LinkFreeFolder(lustre_root, directory)
        return folder.check()


def _due_order(f: _Followed) -> float:
    return -1.0 if f.read_at is None else f.read_at


@dataclass
class LiveJobs:
    """The followers of every running managed job, kept between passes (each reads only what its files gained).

    There is no cap on the number of jobs. A poll reads the jobs that are due (not read for ``interval_s``),
    least recently read first, for at most ``budget_s``; a job it had no time for is read first by the next.
    A job not read for ``bound_s`` is counted as unfollowed (``fabricguard_live_jobs_unfollowed`` and its
    alert). ``workers`` reads run at once: on Lustre each ``stat`` is a round trip that leaves the GIL free,
    and each reader holds at most one descriptor, so the followers never hold more than ``workers``."""

    profile: PlatformProfile
    lustre_root: Path
    interval_s: float = 0.0  # 0: every poll reads every job, without a budget (--once, tests, benches)
    budget_s: float | None = None  # default: 0.8 x interval_s
    workers: int = 1
    _followers: dict[tuple[str, str, str], _Followed] = field(default_factory=dict)
    _busbw: dict[tuple[str, str, str], JobBusbw] = field(default_factory=dict)
    _io: dict[tuple[str, str, str], JobIo] = field(default_factory=dict)
    reported_io: dict[tuple[str, str, str], str] = field(default_factory=dict)
    reported: dict[tuple[str, str, str], str] = field(default_factory=dict)
    reported_busbw: dict[tuple[str, str, str], str] = field(default_factory=dict)
    reported_suspects: dict[tuple[str, str, str], str] = field(default_factory=dict)
    hangs: dict[tuple[str, str, str], HangWatch] = field(default_factory=dict)  # controller/hang.py
    hung: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)  # confirmed: what was written
    cost: LiveCost = field(default_factory=LiveCost)
    unusable: dict[tuple[str, str, str], str] = field(default_factory=dict)  # job -> why its files raised (logged)

    @property
    def bound_s(self) -> float:
        """A job not read for this long is not followed within its interval (one interval plus one poll)."""
        return 2 * self.interval_s if self.interval_s > 0 else float("inf")

    def sync(self, jobs: list[RunningJob]) -> list[tuple[str, str, str]]:
        """Follow the jobs that run now; forget the ones that stopped. Returns the keys forgotten."""
        wanted = {j.key: j for j in jobs}
        gone = [k for k in self._followers if k not in wanted]
        for k in gone:
            self._followers.pop(k).follower.close()
            self._busbw.pop(k, None)
            self._io.pop(k, None)
            self.reported_io.pop(k, None)
            self.reported.pop(k, None)
            self.reported_busbw.pop(k, None)
            self.unusable.pop(k, None)
            self.reported_suspects.pop(k, None)
            self.hangs.pop(k, None)
            self.hung.pop(k, None)
        now = time.monotonic()
        for k, job in wanted.items():
            known = self._followers.get(k)
            if known is not None:
                known.job = job
                continue
            path = self.lustre_root / log_dir(self.profile, job.namespace, job.job)
            fol = self._followers[k] = _Followed(job, LogFollower(path), now, key=k)
            fol.io = self._io[k] = JobIo(path)  # its I/O phase records, beside its step times in the same directory
            ins = self.profile.inspector_for(self.profile.pool(job.pool))
            if ins is not None:
                where = self.lustre_root / dump_dir(self.profile, ins, job.namespace, job.job)
                root = self.lustre_root / job_dir(self.profile, job.namespace, job.job)
                fol.busbw = self._busbw[k] = JobBusbw(where, ins, root)
        return gone

    def unusable_job(self, key: tuple[str, str, str], why: str) -> None:
        """A job whose files raised: logged once per job and reason (polls repeat; the log must not)."""
        if self.unusable.get(key) != why:
            self.unusable[key] = why
            log.warning("job %s/%s: %s; its other files and every other job are still followed", key[1], key[2], why)

    def follower(self, key: tuple[str, str, str]) -> LogFollower | None:
        """The log follower of a followed job (``RunningJob.key``)."""
        fol = self._followers.get(key)
        return fol.follower if fol is not None else None

    def _read(self, key: tuple[str, str, str], fol: _Followed) -> int:
        """Read one job's logs (and Inspector records); returns the bytes read. Never raises."""
        job, follower = fol.job, fol.follower
        read = 0
        dir_stat = None
        try:  # one job's files cannot stop the others being followed: any exception is this job's alone
            logs = fol.logs
            dir_stat = logs.check() if logs is not None else fol.no_link(self.lustre_root, follower.directory)
            read = follower.poll(dir_stat).bytes
            verdict = follower.verdict()
        except Exception as exc:
            why = f"cannot follow the job's logs: {type(exc).__name__}: {exc}"[:500]
            self.unusable_job(key, why)
            verdict = LiveVerdict(Transport.unknown, False, NcclReport(
                unread=[Evidence(str(follower.directory), 0, "", why)], unread_count=1))
            fol.latest = Observation(job, verdict)
            fol.drawn = ()
            fol.read_at = time.monotonic()
            return 0
        latest = fol.latest
        view = latest.busbw if latest is not None else None
        jb = fol.busbw
        if jb is not None:
            try:
                fol.no_link(self.lustre_root, jb.directory)
                got = jb.poll()
                if got is not None:
                    view = view_of(jb, self.profile.pool(job.pool))
            except Exception as exc:  # the tenant's Inspector records: this job's busbw is not judged
                self.unusable_job(key, f"cannot read the job's Inspector records: {type(exc).__name__}: {exc}"[:500])
                got = None
            if got is not None:
                self.cost.inspector_bytes_total += got.bytes
                self.cost.inspector_records_total += got.records
        io = None
        # A quiet poll (no I/O record read, the same profile and pool) keeps the I/O summary and the bound it
        # drew last time instead of drawing them again: tens of thousands of jobs are quiet in most polls.
        same = latest is not None and bool(fol.drawn) and fol.drawn[0] is self.profile and fol.drawn[1] == job.pool
        failed_io = False
        jio = fol.io
        if jio is not None:
            try:
                if jio.directory is follower.directory or jio.directory == follower.directory:
                    got_io = jio.poll(dir_stat)  # the same folder, proven (and its stat taken) just above
                else:
                    got_io = jio.poll(fol.no_link(self.lustre_root, jio.directory))
                self.cost.io_bytes_total += got_io
                same = same and not got_io
                io = latest.io if same and latest is not None else jio.tally.summary(self.profile.pool(job.pool))
            except Exception as exc:  # the tenant's step files: this job's I/O is not judged
                self.unusable_job(key, f"cannot read the job's I/O records: {type(exc).__name__}: {exc}"[:500])
                same, failed_io, io = False, True, None
        below = bool(view is not None and view.below)
        fol.read_at = time.monotonic()
        if same and latest is not None and fol.drawn[2] is verdict.transport and fol.drawn[3] is below \
                and latest.io is io:
            # Drawn from the very same facts: the same bound, and the same observation when nothing else moved
            # (an observation is kept between polls anyway for a job a poll had no time for). Nothing new that
            # lives on is made for a quiet job, so the collector's full collections stay rare.
            if latest.job is job and latest.verdict is verdict and latest.busbw is view:
                return read
            fol.latest = Observation(job, verdict, view, io=io, bound=latest.bound)
            return read
        bound = live_bound(self.profile, verdict.transport, below, io, job.pool)
        # After a failed read of the I/O records the tally may hold part of what was read: drawn again next time.
        fol.drawn = () if failed_io else (self.profile, job.pool, verdict.transport, below)
        fol.latest = Observation(job, verdict, view, io=io, bound=bound)
        return read

    def poll(self) -> list[Observation]:
        """Read the due jobs (least recently read first, within the budget); the latest observation of every
        followed job, read now or before."""
        t0 = time.monotonic()
        budget = self.budget_s if self.budget_s is not None else (0.8 * self.interval_s or float("inf"))
        due_after = 0.9 * self.interval_s  # a poll every interval reads every job every interval
        # A list of the followers themselves, not of (key, follower) pairs: 50,000 pairs living through the poll
        # reached the collector's oldest generation, whose full collections walk every follower's state.
        due = [f for f in self._followers.values() if f.read_at is None or t0 - f.read_at >= due_after]
        due.sort(key=_due_order)
        polled = 0
        if self.workers <= 1:
            for f in due:
                self.cost.bytes_total += self._read(f.key, f)
                polled += 1
                if time.monotonic() - t0 >= budget:
                    break
        else:
            from concurrent.futures import ThreadPoolExecutor

            step = self.workers * 16
            with ThreadPoolExecutor(self.workers, thread_name_prefix="live-follow") as pool:
                for i in range(0, len(due), step):
                    batch = due[i : i + step]
                    self.cost.bytes_total += sum(pool.map(lambda f: self._read(f.key, f), batch))
                    polled += len(batch)
                    if time.monotonic() - t0 >= budget:
                        break
        out = []
        now = time.monotonic()
        oldest, files = now, 0
        unfollowed_before = now - self.bound_s
        unfollowed = 0
        for f in self._followers.values():  # one walk: at 50,000 jobs each walk of them is a cost of its own
            if f.latest is not None:
                out.append(f.latest)
            at = f.read_at if f.read_at is not None else f.since
            if at < oldest:
                oldest = at
            if at < unfollowed_before:
                unfollowed += 1
            files += f.follower.total.files
        self.cost.jobs = len(self._followers)
        self.cost.unfollowed = unfollowed
        self.cost.followed = self.cost.jobs - unfollowed
        self.cost.lag_s = now - oldest
        self.cost.polled = polled
        self.cost.files = files
        self.cost.inspector_files = sum(jb.follower.total.files for jb in self._busbw.values())
        self.cost.descriptor_shortages = descriptors.SHORTAGES.total
        self.cost.last_poll_s = now - t0
        return out

    def close(self) -> None:
        for f in self._followers.values():
            f.follower.close()
        self._followers.clear()
        self._busbw.clear()
        self._io.clear()


def _evidence(v: LiveVerdict) -> str:
    for e in [*v.report.failures, *v.report.evidence]:
        if "Socket" in e.text or "socket" in e.why:
            return f"{Path(e.file).name}:{e.line}: {e.text.strip()[:200]}"
    return v.report.reasons[0] if v.report.reasons else ""


def _workload_of(job: RunningJob, workloads: list[dict[str, Any]]) -> dict[str, Any] | None:
    uid = o.meta(job.obj).get("uid")
    for w in workloads:
        if o.namespace_of(w) != job.namespace:
            continue
        for ref in o.meta(w).get("ownerReferences") or ():
            if (uid and ref.get("uid") == uid) or (ref.get("kind") == job.kind and ref.get("name") == job.name):
                return w
    return None


def live_actions(profile: PlatformProfile, obs: Observation, reported: str | None,
                 workloads: list[dict[str, Any]], now: datetime) -> list[Action]:
    """What to write when the logs prove a transport that was not yet recorded on the job."""
    v, job = obs.verdict, obs.job
    transport = v.transport
    current = o.annotations_of(job.obj).get(ANN_TRANSPORT)
    if transport not in _KNOWN:
        # Nothing proven yet; but logs that could not all be read are said once, on the job itself.
        unread = [e for e in v.report.unread if "longer than" not in e.why]
        if not unread or reported == Transport.unknown.value or (reported is None and current == "unknown"):
            return []
        first = unread[0]
        detail = (f"transport not proven on pool {job.pool}: {first.file}: {first.why}"
                  + (f" (and {v.report.unread_count - 1} more)" if v.report.unread_count > 1 else ""))
        return [
            Annotate(job.api_version, job.plural, job.namespace, job.name,
                     {ANN_TRANSPORT: Transport.unknown.value, ANN_TRANSPORT_DETAIL: detail[:1000]}),
            event(job.obj, job.api_version, job.kind, "FabricLogsUnread", detail, now, warning=True),
        ]
    if reported == transport.value or (reported is None and current == transport.value):
        return []
    pool = profile.pool(job.pool)
    expected = pool.fabric.expected_transports
    fallback = transport in (Transport.socket, Transport.mixed) and transport not in expected
    what = "final" if v.final else "so far"
    detail = f"transport {transport.value} ({what}) on pool {pool.name}, whose fabric is {pool.fabric.type}"
    if fallback:
        ran = ("runs over TCP sockets" if transport == Transport.socket
               else "is mixed (its nodes selected networks of different kinds, some not the fabric)")
        detail = (f"inter-node traffic {ran} on fabric pool {pool.name} "
                  f"(expected {'/'.join(sorted(t.value for t in expected))}): {_evidence(v)}")
    actions: list[Action] = [
        Annotate(job.api_version, job.plural, job.namespace, job.name,
                 {ANN_TRANSPORT: transport.value, ANN_TRANSPORT_DETAIL: detail[:1000]}),
        event(job.obj, job.api_version, job.kind, "FabricFallback" if fallback else "FabricTransport", detail, now,
              warning=fallback),
    ]
    if fallback and pool.onFallback == "stop":
        w = _workload_of(job, workloads) if KUEUE_QUEUE in o.labels_of(job.obj) else None
        if w is not None:
            actions.append(MergePatch(names.KUEUE_API, "workloads", job.namespace, o.name_of(w),
                                      {"spec": {"active": False}}))
            how = f"Workload {o.name_of(w)} deactivated (Kueue suspends the job; resubmit when the fabric is fixed)"
        else:
            kind = kinds.BY_KIND[job.kind]
            patch = kind.stop_patch()
            if patch is not None:
                actions.append(MergePatch(job.api_version, job.plural, job.namespace, job.name, patch))
            how = {"scale-to-zero": f"{job.kind} scaled to zero replicas (scale it back when the fabric is fixed)",
                   "none": f"{job.kind} cannot be stopped by fabricguard: stop it yourself"}.get(
                kind.stop, f"{job.kind} suspended (resume or resubmit when the fabric is fixed)")
        actions.append(event(job.obj, job.api_version, job.kind, "FabricFallbackStopped",
                             f"stopped by pool {pool.name}'s onFallback: stop: {how}", now, warning=True))
    return actions
