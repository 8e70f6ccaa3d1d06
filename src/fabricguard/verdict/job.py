"""Per-job verdicts: did this finished job really use the fabric, the storage and the time it should have?

A verdict is ``pass``, ``degraded`` or ``failed`` with every reason and the evidence behind it. The
rules are deliberately conservative in one direction: a transport that cannot be proven on a fabric
pool is *not* a pass, because "the job ran" is exactly the signal that hid half-speed jobs for months.
"""

from __future__ import annotations

import fnmatch
import posixpath
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from fabricguard import fabrics
from fabricguard.exitcodes import Verdict
from fabricguard.nccl.inspector import CollRecord, is_inspector_file, summarize_by_shape
from fabricguard.nccl.ranks import AttributionView
from fabricguard.nccl.report import Evidence, NcclReport
from fabricguard.nccl.scan import inspect_paths, is_text
from fabricguard.profile.model import PlatformProfile, Pool, Transport
from fabricguard.storage.mountinfo import MountinfoError, check_path, parse_mountinfo
from fabricguard.userfiles import SourceError, check_in, input_dir, read_text, walk_files
from fabricguard.verdict import busbw, ranks
from fabricguard.verdict import io as jobio
from fabricguard.verdict.claims import JobObjects, claim_findings
from fabricguard.verdict.fixes import fix_for
from fabricguard.verdict.steps import StepTimes, load_step_times


class Level(StrEnum):
    info = "info"
    warning = "warning"
    degraded = "degraded"
    failed = "failed"


_LEVEL_ORDER = {Level.failed: 0, Level.degraded: 1, Level.warning: 2, Level.info: 3}


@dataclass
class Reason:
    level: Level
    check: str
    message: str
    evidence: list[dict[str, Any]] = field(default_factory=list)
    fix: str = ""  # what to change; every reason above info has one (verdict/fixes.py)

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level.value, "check": self.check, "message": self.message, "fix": self.fix or None,
                "evidence": self.evidence}


@dataclass
class JobVerdict:
    verdict: Verdict
    pool: str
    fabric: str
    reasons: list[Reason]
    nccl: NcclReport
    steps: StepTimes
    storage: list[dict[str, Any]]
    job_dir: str
    busbw: list[dict[str, Any]] = field(default_factory=list)  # per collective, from NCCL's Inspector
    io: dict[str, Any] | None = None  # the job's I/O phases against the storage floor (verdict.io)
    per_rank: dict[str, Any] | None = None  # late ranks, slow nodes, per-node view (verdict/ranks.py)
    ras: dict[str, Any] | None = None  # what saved NCCL RAS reports pointed at
    server_io: dict[str, Any] | None = None  # the servers' job_stats for the job (verify-job --jobstats)

    @property
    def bound(self) -> str:
        """What held the job back, from its reasons: ``fabric``, ``storage``, both, or ``none``."""
        bad = {r.check for r in self.reasons if r.level in (Level.degraded, Level.failed)}
        fabric = bool(bad & FABRIC_CHECKS)
        storage = bool(bad & STORAGE_CHECKS)
        return "fabric+storage" if fabric and storage else "fabric" if fabric else "storage" if storage else "none"

    def to_dict(self) -> dict[str, Any]:
        n = self.nccl
        return {
            "verdict": self.verdict.value,
            "job_dir": self.job_dir,
            "pool": self.pool,
            "fabric": self.fabric,
            "transport": n.inter_node_transport.value,
            "network": n.network,
            "gpudirect_rdma": n.gpudirect_rdma,
            "nccl_failed": n.failed,
            "nodes": n.nodes,
            "nodes_at_least": n.nodes_at_least,  # a lower bound (hosts seen) when ``nodes`` is null
            "ranks": n.ranks,
            "scope": n.scope.value,  # single-node / multi-node / part (one worker of a larger job) / unknown
            "transport_basis": n.transport_basis,
            "storage": self.storage,
            "steps": self.steps.to_dict(),
            "busbw": self.busbw,
            "per_rank": self.per_rank,
            "ras": self.ras,
            "io": self.io,
            "server_io": self.server_io,
            "bound": self.bound,
            "reasons": [r.to_dict() for r in self.reasons],
            "nccl": n.to_dict(),
        }


# Which reasons speak of the fabric and which of storage, for the job's ``bound``.
FABRIC_CHECKS = frozenset({"transport", "gpudirect", "bandwidth", "busbw", "nccl", "correctness", "fabric-claims"})
STORAGE_CHECKS = frozenset({"storage", "storage-io"})


class JobInputError(ValueError):
    """The job directory cannot be judged; the message names the file and what is wrong. ``missing``: the logs
    are not there at all (rather than there and unusable)."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


# Which files in a job directory are which. Everything else is read as a log.
MOUNTINFO_GLOBS = ("mountinfo", "*.mountinfo", "mountinfo*")
STEP_GLOBS = ("*.jsonl", "*.csv")
MAX_MOUNTINFO_BYTES = 32 * 1024**2  # a node with 100,000 mounts writes ~20 MB
# NCCL logs read per job: a 512-rank job's INFO logs are a few GiB; past this the job is degraded, naming the file.
MAX_JOB_LOG_BYTES = 32 * 1024**3


def _classify(job_dir: Path) -> tuple[list[Path], list[Path], list[Path], list[Evidence]]:
    """(logs, mountinfo files, step-timing files, what was not read). The directory is listed once, bounded
    (``userfiles.walk_files``: files, levels, no link followed out of it). A mountinfo or step-timing name that
    is not a readable regular file is refused here: skipping it would drop that check and let the job pass
    unjudged."""
    walk = walk_files(job_dir)
    mountinfo: list[Path] = []
    steps: list[Path] = []
    others: list[Path] = []
    named: set[Path] = set()
    files = set(walk.files)  # a list: `in` on it made 8,192 files 33 million path comparisons (a minute)
    # A folder, FIFO or link named like a mountinfo or step-timing file is one of them, refused below.
    for f in sorted([*walk.files, *walk.dirs, *(p for p, _why in walk.refused)]):
        if any(fnmatch.fnmatchcase(f.name, g) for g in MOUNTINFO_GLOBS):
            mountinfo.append(f)
        elif any(fnmatch.fnmatchcase(f.name, g) for g in STEP_GLOBS):
            steps.append(f)
        elif f in files:
            others.append(f)
            continue
        else:
            continue
        named.add(f)
    unread = [Evidence(str(f), 0, "", why) for f, why in walk.refused if f not in named]
    if walk.truncated:
        unread.append(Evidence(str(job_dir), 0, "", f"{walk.truncated}: the rest was not read"))
    refused = dict(walk.refused)
    for f in mountinfo + steps:
        what = "mountinfo" if f in mountinfo else "step-timing"
        if f in refused and "link" in refused[f]:
            raise JobInputError(f"{f}: {refused[f]}, but its name makes it a {what} file (save the file there, "
                                "or remove the link)")
        try:
            check_in(job_dir, f)  # opened as its reader opens it: no link, a regular file inside the job's folder
        except SourceError as exc:
            raise JobInputError(
                f"{f}: {exc.problem.split('; ')[0]}, but its name makes it a {what} file "
                "(save the file there, or rename or remove it to leave it out)"
            ) from None
    logs = [f for f in others if not is_inspector_file(f, job_dir) and is_text(f, job_dir)]
    return logs, mountinfo, steps, unread


def _ev(e: Any) -> dict[str, Any]:
    out: dict[str, Any] = e.to_dict()
    return out


def _unread_reasons(n: NcclReport) -> list[Reason]:
    """Files of the job that were not read make it ``degraded``, naming them: a rank's log never drops out of
    the verdict silently. Over-long lines (no NCCL line is that long) are only a warning."""
    files = [e for e in n.unread if "longer than" not in e.why]
    lines = [e for e in n.unread if "longer than" in e.why]
    out: list[Reason] = []
    if files:
        first = files[0]
        more = f" (and {n.unread_count - 1} more)" if n.unread_count > 1 else ""
        out.append(Reason(Level.degraded, "logs", f"{first.file}: {first.why}{more}; the job's logs were not all "
                          "read, so they cannot prove what every rank did", [_ev(e) for e in files[:5]]))
    if lines:
        out.append(Reason(Level.warning, "logs", f"{lines[0].file}: {lines[0].why}", [_ev(e) for e in lines[:5]]))
    return out


def _transport_reasons(pool: Pool, n: NcclReport) -> list[Reason]:
    out: list[Reason] = []
    fabric = pool.fabric
    if n.failed:
        out.append(
            Reason(
                Level.failed,
                "nccl",
                "NCCL failed: " + (n.failures[0].why if n.failures else "see evidence"),
                [_ev(e) for e in n.failures[:5]],
            )
        )
    t = n.inter_node_transport
    ev = [_ev(e) for e in n.evidence]
    if not fabric.has_fabric:
        out.append(
            Reason(Level.info, "transport", f"pool {pool.name} has no fabric; inter-node transport {t.value}", ev)
        )
        return out
    expected = sorted(x.value for x in fabric.expected_transports)
    nets = [x.lower() for x in n.networks]
    if t is Transport.socket:
        out.append(
            Reason(
                Level.degraded,
                "transport",
                f"inter-node traffic went over TCP sockets on pool {pool.name}, whose fabric is "
                f"{fabric.type.value} (expected {'/'.join(expected)}); " + "; ".join(n.reasons),
                ev,
            )
        )
    elif t is Transport.mixed:
        out.append(
            Reason(
                Level.degraded,
                "transport",
                f"the job's nodes did not all use the {fabric.type.value} fabric (expected {'/'.join(expected)}); "
                + "; ".join(n.reasons),
                ev,
            )
        )
    elif t is Transport.none:
        if "socket" in nets:
            out.append(
                Reason(
                    Level.degraded,
                    "transport",
                    f"single-node run, but NCCL selected the Socket network: the {fabric.type.value} fabric was "
                    "not available to NCCL on this node",
                    ev,
                )
            )
        else:
            out.append(Reason(Level.info, "transport", "single-node run: no inter-node transport to judge", ev))
    elif t is Transport.unknown:
        if not n.failed:
            out.append(
                Reason(
                    Level.degraded,
                    "transport",
                    "the transport could not be proven from the logs, so the job cannot pass on a fabric pool; "
                    + "; ".join(n.reasons),
                    ev,
                )
            )
    elif t not in fabric.expected_transports:
        out.append(
            Reason(
                Level.degraded,
                "transport",
                f"inter-node transport {t.value}, but pool {pool.name} expects {'/'.join(expected)}",
                ev,
            )
        )
    else:
        out.append(
            Reason(Level.info, "transport", f"inter-node transport {t.value} as expected; " + "; ".join(n.reasons), ev)
        )
        if n.transport_basis == "selection":
            out.append(
                Reason(
                    Level.warning,
                    "transport",
                    "the transport is inferred from the network every node selected, not proven from connection "
                    "lines (set NCCL_DEBUG_SUBSYS=INIT,NET to log them)",
                    ev,
                )
            )
        want = fabric.effective_nccl_net
        if want and nets and want.lower() not in nets:
            out.append(
                Reason(
                    Level.warning,
                    "transport",
                    f"NCCL selected network {n.network}, not the pool's NCCL_NET={want}; the job was not forced onto "
                    "the fabric and could have fallen back silently",
                    ev,
                )
            )
        if n.gpudirect_rdma is False and t in fabrics.gpudirect_transports():
            out.append(
                Reason(
                    Level.warning,
                    "gpudirect",
                    "GPUDirect RDMA was not used: NIC traffic is staged through host memory (check nvidia_peermem "
                    "or dmabuf support and NCCL_NET_GDR_LEVEL)",
                    ev,
                )
            )
    return out


def _bandwidth_reasons(pool: Pool, n: NcclReport) -> list[Reason]:
    out: list[Reason] = []
    floor = pool.baseline.busbw_floor_gbps
    for t in n.nccl_tests:
        peak = t.peak_busbw_gbps
        where = [{"file": t.file, "line": t.line, "why": f"{t.collective or 'nccl-tests'} table"}]
        if t.wrong:
            out.append(Reason(Level.failed, "correctness", f"{t.collective}: {t.wrong} wrong elements", where))
        if peak is None or floor is None:
            continue
        if t.collective not in (None, "all_reduce_perf"):
            continue  # the baseline is an all-reduce figure
        if peak < floor:
            out.append(
                Reason(
                    Level.degraded,
                    "bandwidth",
                    f"peak all-reduce busbw {peak:.1f} GB/s is below the floor {floor:.1f} GB/s "
                    f"({pool.baseline.floorFraction:g} x {pool.baseline.allReduceBusBwGBps:g})",
                    where,
                )
            )
        else:
            out.append(
                Reason(
                    Level.info, "bandwidth", f"peak all-reduce busbw {peak:.1f} GB/s >= floor {floor:.1f} GB/s", where
                )
            )
    return out


def _rank_reasons(view: AttributionView | None, src: str) -> tuple[list[Reason], dict[str, Any] | None]:
    """The late rank and the slow node the records point at (warnings: a CPU-side straggler looks the same, and
    one job's evidence is not a node's verdict)."""
    if view is None:
        return [], None
    out: list[Reason] = []
    ev = [{"file": src, "line": None, "why": f"Inspector records, {view.round} dump round(s), coverage "
           f"{view.coverage:.0%}"}]
    for r in view.confirmed_late()[:3]:
        out.append(Reason(Level.warning, "ranks", f"rank {r.rank} ({r.hostname}, pid {r.pid}) was late to its "
                          f"collectives: the other ranks waited {r.lateness_s * 1000:.0f} ms for it, it was last in "
                          f"{r.share:.0%} of {r.instances} collectives (confidence {r.confidence:.2f}); a data loader "
                          "or a checkpoint looks the same, so its node's fabric is not blamed", ev))
    for s in view.confirmed_slow()[:3]:
        tied = f"; as likely: {', '.join(s.tied_with)}" if s.tied_with else ""
        out.append(Reason(Level.warning, "ranks", f"node {s.hostname} (pid {', '.join(map(str, s.pids))}) is a "
                          f"suspect: the communicators across it ran at {s.ratio:.2f}x their peers' bus bandwidth "
                          f"(confidence {s.confidence:.2f}{tied}); its pair test decides", ev))
    if view.coverage < 0.9:
        out.append(Reason(Level.info, "ranks", f"only {view.coverage:.0%} of the ranks' records of each collective "
                          "were found (dropped or missing): the per-rank view is less sure", ev))
    return out, view.to_dict()


def _ras_reasons(files: list[Path], job_dir: Path) -> tuple[list[Reason], dict[str, Any] | None]:
    """What saved NCCL RAS reports (``ncclras -f json``) in the job directory pointed at."""
    if not files:
        return [], None
    saved, bad = ranks.read_saved(files, job_dir)
    out = [Reason(Level.warning, "ras", f"{f}: {why}", [{"file": f, "line": None, "why": why}]) for f, why in bad]
    f = ranks.ras_finding(saved)
    if f is None:
        return out, None
    ev = [{"file": x, "line": None, "why": "NCCL RAS report"} for x in f.files]
    doc = {"hung": f.hung, "files": f.files, "rule": f.why,
           "waited_for": [{"rank": w.rank, "host": w.host, "pid": w.pid, "cuda_dev": w.cuda_dev, "why": w.why}
                          for w in f.waited_for[:16]]}
    if f.waited_for:
        w = f.waited_for[0]
        more = f" (and {len(f.waited_for) - 1} more)" if len(f.waited_for) > 1 else ""
        what = "hung: its ranks waited for" if f.hung else "the saved RAS report pointed at"
        out.append(Reason(Level.degraded if f.hung else Level.warning, "ras",
                          f"{what} rank {w.rank} (host {w.host}, pid {w.pid}, GPU {w.cuda_dev}: {w.why}){more}; "
                          f"{f.why}", ev))
    else:
        out.append(Reason(Level.info, "ras", f"the saved RAS report(s) show no rank behind: {f.why}", ev))
    return out, doc


def _busbw_reasons(profile: PlatformProfile, pool: Pool, job_dir: Path, n: NcclReport
                   ) -> tuple[list[Reason], list[dict[str, Any]], list[CollRecord]]:
    """One row per collective from the Inspector's records, when the job left any (jobs without the plugin
    keep the verdict they had)."""
    files, dump_dir = busbw.find_records(profile, job_dir)
    own = busbw.own_profiler(n.profiler_plugins)
    prof_ev = [_ev(e) for e in n.evidence if e.why.startswith("NCCL loaded profiler plugin")][:1]
    if not files and dump_dir is None:
        if own is not None:
            return [Reason(Level.info, "busbw", f"NCCL loaded the job's own profiler plugin {own}, not the "
                           "Inspector (NCCL loads one): collective bandwidth was not measured", prof_ev)], [], []
        if profile.inspector_for(pool) is not None:
            return [Reason(Level.warning, "busbw", "no NCCL Inspector records beside the job's logs, though pool "
                           f"{pool.name}'s jobs get the plugin: collective bandwidth was not measured")], [], []
        return [], [], []
    large = busbw.large_bytes(profile)
    recs, read = busbw.records_of(files, dump_dir, busbw.job_root(profile, job_dir))
    figures = summarize_by_shape(recs, large)
    src = busbw.where(dump_dir or files[0].parent)
    if not figures:
        return [Reason(Level.warning, "busbw", f"{read} Inspector record(s) in {src}, none of a communicator "
                       f"spanning nodes at >= {large} bytes: collective bandwidth across nodes was not measured",
                       [{"file": src, "line": None, "why": "Inspector records"}])], [], recs
    out: list[Reason] = []
    for r in busbw.rows(pool, figures):
        ev = [{"file": src, "line": None, "why": f"{r.figure.records} Inspector records of {r.collective} from "
               f"{r.figure.hosts} host(s)"}]
        out.append(Reason(Level.degraded if r.below else Level.info, "busbw", r.message(large), ev))
    return out, [r.to_dict() for r in busbw.rows(pool, figures)], recs


def _storage_reasons(
    profile: PlatformProfile, pool: Pool, mountinfo: list[Path], job_dir: Path
) -> tuple[list[Reason], list[dict[str, Any]]]:
    lustre = profile.spec.storage.lustre
    if lustre is None or not pool.lustre:
        return [], []
    if not mountinfo:
        return [
            Reason(
                Level.warning,
                "storage",
                f"no mountinfo in the job directory: cannot tell whether {lustre.mountPath} was on Lustre "
                "(save /proc/self/mountinfo from each worker)",
            )
        ], []
    reasons: list[Reason] = []
    results: list[dict[str, Any]] = []
    for f in mountinfo:
        try:
            entries = parse_mountinfo(read_text(f, max_bytes=MAX_MOUNTINFO_BYTES, within=job_dir))
        except SourceError as exc:
            raise JobInputError(str(exc)) from None
        except MountinfoError as exc:
            raise JobInputError(f"{f}: {exc} (save /proc/self/mountinfo from the worker as it is)") from None
        probe = posixpath.join(lustre.mountPath, "x")  # a file under the mount: our probe, never shown
        finding = check_path(entries, probe, "lustre")
        msg = finding.message.replace(probe, lustre.mountPath)
        d = finding.to_dict() | {"file": str(f), "path": lustre.mountPath, "message": msg}
        results.append(d)
        ev = [{"file": str(f), "line": finding.mount.line if finding.mount else None, "why": finding.message}]
        if finding.ok and finding.mount is not None:
            reasons.append(
                Reason(Level.info, "storage", f"{f.name}: {lustre.mountPath} is on Lustre ({finding.mount.source})", ev)
            )
        else:
            reasons.append(Reason(Level.degraded, "storage", f"{f.name}: {msg}", ev))
    return reasons, results


def _step_reasons(pool: Pool, steps: StepTimes) -> list[Reason]:
    b = pool.baseline
    out: list[Reason] = []
    med = steps.median_seconds
    ev = [{"file": s, "line": None, "why": "step timings"} for s in steps.sources]
    if med is None:
        return out
    if b.stepTimeSeconds is not None:
        limit = b.stepTimeSeconds * b.stepTolerance
        ratio = med / b.stepTimeSeconds
        if med > limit:
            out.append(
                Reason(
                    Level.degraded,
                    "step-time",
                    f"median step {med:.2f} s is {ratio:.2f}x the baseline {b.stepTimeSeconds:g} s "
                    f"(allowed up to {b.stepTolerance:g}x)",
                    ev,
                )
            )
        else:
            out.append(Reason(Level.info, "step-time", f"median step {med:.2f} s ({ratio:.2f}x baseline)", ev))
    if b.totalTimeSeconds is not None and steps.total_seconds > b.totalTimeSeconds * b.stepTolerance:
        out.append(
            Reason(
                Level.degraded,
                "total-time",
                f"total {steps.total_seconds:.0f} s exceeds the baseline "
                f"{b.totalTimeSeconds:g} s x {b.stepTolerance:g}",
                ev,
            )
        )
    return out


def _io_reasons(pool: Pool, steps: StepTimes) -> tuple[list[Reason], dict[str, Any] | None]:
    summary = jobio.summarize(pool, steps)
    if summary is None:
        return [], None
    level, message = jobio.describe(summary)
    sources = sorted({r.source for r in steps.io})
    ev = [{"file": s, "line": None, "why": "I/O phase records"} for s in sources]
    return [Reason(Level(level), "storage-io", message, ev)], summary.to_dict()


def nccl_reasons(pool: Pool, n: NcclReport) -> list[Reason]:
    """What a job's NCCL logs alone say against its pool: files not read, the transport, nccl-tests tables.
    ``verify-job`` adds storage, step times and the Inspector's bandwidth; ``nccl inspect -p`` uses only these."""
    return _unread_reasons(n) + _transport_reasons(pool, n) + _bandwidth_reasons(pool, n)


def claim_reasons(pool: Pool, objects: JobObjects) -> list[Reason]:
    """What the job's pods and ResourceClaims say (``verdict.claims``), as reasons: the controller's verdict
    and ``verify-job --objects`` read them through this one function."""
    return [Reason(Level(f.level), "fabric-claims", f.message, list(f.evidence))
            for f in claim_findings(pool, objects.pods, objects.claims)]


def verdict_of(reasons: list[Reason]) -> Verdict:
    """The worst level among the reasons: any failed reason fails, any degraded one degrades."""
    if any(r.level is Level.failed for r in reasons):
        return Verdict.failed
    if any(r.level is Level.degraded for r in reasons):
        return Verdict.degraded
    return Verdict.pass_


def judge_job(
    job_dir: Path,
    profile: PlatformProfile,
    pool_name: str | None,
    step_regex: str | None = None,
    objects: JobObjects | None = None,
) -> JobVerdict:
    """Read everything a finished job left in ``job_dir`` and judge it against the pool; ``objects``: its pods
    and ResourceClaims as the API server stored them (``verify-job --objects``)."""
    try:
        input_dir(job_dir)
    except SourceError as exc:
        raise JobInputError(f"{exc} (the directory holding the job's logs)", missing=True) from None
    pool = profile.pool(pool_name)
    logs, mountinfo, step_files, unread = _classify(job_dir)
    ras_files = [f for f in logs if ranks.is_ras_name(f)]  # saved `ncclras -f json` reports, not logs
    logs = [f for f in logs if not ranks.is_ras_name(f)]
    if not logs and not unread:
        raise JobInputError(
            f"{job_dir}: no log files found (expected NCCL_DEBUG=INFO output, one file per rank or pod)", missing=True
        )
    nccl = inspect_paths(logs, unread=unread, roots=dict.fromkeys(logs, job_dir), max_bytes=MAX_JOB_LOG_BYTES)
    try:
        steps = load_step_times(step_files, logs, step_regex, within=job_dir)
    except ValueError as exc:
        raise JobInputError(str(exc)) from None
    reasons = nccl_reasons(pool, nccl)
    busbw_reasons, busbw_rows, recs = _busbw_reasons(profile, pool, job_dir, nccl)
    reasons += busbw_reasons
    rank_reasons, rank_view = _rank_reasons(ranks.replay(recs, busbw.large_bytes(profile), _rounds(profile)),
                                            busbw.where(job_dir))
    reasons += rank_reasons
    ras_reasons, ras_doc = _ras_reasons(ras_files, job_dir)
    reasons += ras_reasons
    storage_reasons, storage = _storage_reasons(profile, pool, mountinfo, job_dir)
    reasons += storage_reasons
    reasons += _step_reasons(pool, steps)
    io_reasons, io = _io_reasons(pool, steps)
    reasons += io_reasons
    if objects is not None:
        reasons += claim_reasons(pool, objects)
    for r in reasons:
        if r.level is not Level.info and not r.fix:
            r.fix = fix_for(r.check, pool, profile, r.message)
    reasons.sort(key=lambda r: _LEVEL_ORDER[r.level])  # failures first, as read
    verdict = verdict_of(reasons)
    return JobVerdict(verdict, pool.name, pool.fabric.type.value, reasons, nccl, steps, storage, str(job_dir),
                      busbw_rows, io, rank_view, ras_doc)


def _rounds(profile: PlatformProfile) -> int:
    return profile.spec.inspector.suspectRounds if profile.spec.inspector is not None else 3
