"""Storage probe: is the path on the filesystem the pool expects, is the Lustre client healthy, and what does
the path sustain for what training does to it (checkpoint writes with fsync, checksummed reads, small files)?

Safety rules: the probe works only inside a directory it creates (``fabricguard-storage-*`` below the path),
removes only the files it created and then that directory (never a tree), and refuses before writing a path it
cannot write, a full disk, or a size larger than the free space.

Engines: fio (JSON output, crc32c verification on read-back) for the sequential checkpoint phases when fio is
installed, and a built-in engine otherwise; the small-file phase (create/stat/unlink per second) is always
built-in. The built-in engine runs N rank processes into one shared directory, synchronised per phase.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from fabricguard.probes.result import Check, Status, overall

WORKDIR_PREFIX = "fabricguard-storage-"
MiB = 1024 * 1024
RESERVE_BYTES = 64 * MiB  # never take a filesystem below this
FULL_FRACTION = 0.01  # under 1% free counts as a full disk


class StorageRefused(Exception):
    """The probe will not run on this path; the message says why and what to change."""


@dataclass
class StorageConfig:
    path: str
    ranks: int = 2
    file_size: int = 64 * MiB  # per rank
    block_size: int = 4 * MiB
    small_files: int = 200  # per rank
    small_size: int = 4096
    engine: str = "auto"  # auto | fio | builtin
    expect_fstype: str | None = None
    keep: bool = False
    # From the pool's baseline: below floor_fraction x these rates the storage path is degraded.
    baseline_write_mbps: float | None = None
    baseline_read_mbps: float | None = None
    floor_fraction: float = 0.8
    # Deadline of each workload phase (fio's write, fio's read, the built-in ranks): a hung mount fails the
    # probe with a message instead of hanging it.
    timeout_s: float = 300.0

    @property
    def needed_bytes(self) -> int:
        return self.ranks * (self.file_size + self.small_files * max(self.small_size, 4096))


# ------------------------------------------------------------------------------------------------ parsers


def percentiles(samples: Sequence[float], qs: Sequence[float] = (50, 90, 99)) -> dict[str, float]:
    """Nearest-rank percentiles (and max) of latencies in seconds, returned in milliseconds."""
    if not samples:
        return {}
    s = sorted(samples)
    out = {f"p{q:g}": s[min(len(s) - 1, max(0, int(-(-q * len(s) // 100)) - 1))] * 1e3 for q in qs}
    out["max"] = s[-1] * 1e3
    return out


def parse_health_check(text: str) -> tuple[bool, str]:
    """``lctl get_param health_check`` -> (healthy, what it said)."""
    value = text.strip().split("=", 1)[-1].strip()
    return value == "healthy", value or "(empty)"


_IMPORT_HEAD = re.compile(r"^(\S+)\.import=\s*$")
_STATE = re.compile(r"^\s+state:\s*(\S+)")


def parse_imports(text: str) -> dict[str, str]:
    """``lctl get_param osc.*.import mdc.*.import`` -> {target device: import state}."""
    out: dict[str, str] = {}
    current: str | None = None
    for line in text.splitlines():
        m = _IMPORT_HEAD.match(line)
        if m:
            current = m.group(1)
            continue
        s = _STATE.match(line)
        if s and current and current not in out:
            out[current] = s.group(1)
    return out


def bad_imports(states: dict[str, str]) -> dict[str, str]:
    """Imports not connected; Lustre treats IDLE (idle-disconnected) as usable like FULL."""
    return {k: v for k, v in states.items() if v not in ("FULL", "IDLE")}


_DF_ROW = re.compile(r"^(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)%\s+(\S+?)\[(MDT|OST):(\d+)\]\s*$")


def parse_lfs_df(text: str) -> dict[str, Any]:
    """``lfs df`` -> targets with usage, plus targets reported inactive or unreachable."""
    targets, problems = [], []
    for line in text.splitlines():
        m = _DF_ROW.match(line.strip())
        if m:
            targets.append(
                {
                    "uuid": m.group(1),
                    "kind": m.group(7),
                    "index": int(m.group(8)),
                    "used_pct": int(m.group(5)),
                    "available_kb": int(m.group(4)),
                }
            )
        elif re.search(r"inactive device|Resource temporarily unavailable|Input/output error", line):
            problems.append(line.strip())
    return {"targets": targets, "problems": problems}


def parse_fio(text: str) -> dict[str, Any]:
    """fio ``--output-format=json`` output (fio may print lines before the JSON) -> totals per direction."""
    start = text.find("{")
    if start < 0:
        raise ValueError("no JSON object in fio output")
    data = json.loads(text[start:])
    out: dict[str, Any] = {"version": data.get("fio version"), "errors": []}
    for direction in ("write", "read"):
        jobs = [j for j in data.get("jobs", []) if j.get(direction, {}).get("io_bytes", 0) > 0]
        if not jobs:
            continue
        io = sum(j[direction]["io_bytes"] for j in jobs)
        # fio's own clock: from the job's first I/O to its end (end_fsync included), start-up excluded. The
        # jobs run together, so the aggregate is all bytes over the longest job, as fio's group "aggrb" and
        # as the built-in engine (first start to last end over its ranks) compute it.
        seconds = max(j[direction]["runtime"] for j in jobs) / 1e3
        pct: dict[str, list[float]] = {}
        for j in jobs:
            for k, v in j[direction].get("clat_ns", {}).get("percentile", {}).items():
                pct.setdefault(k, []).append(v)
        lat = {f"p{float(k):g}": max(v) / 1e6 for k, v in pct.items() if float(k) in (50.0, 90.0, 99.0)}
        out[direction] = {
            "io_bytes": io,
            "seconds": seconds,
            "MBps": io / max(seconds, 1e-3) / 1e6,  # fio reports runtime in whole milliseconds
            "latency_ms": lat,
            "jobs": len(jobs),
        }
    for j in data.get("jobs", []):
        if j.get("error"):
            out["errors"].append(
                f"job {j.get('jobname')}.{j.get('job options', {}).get('numjobs', '')}: error {j['error']}"
            )
    return out


# ------------------------------------------------------------------------------------------ safety checks


def space_problem(free: int, total: int, needed: int) -> str | None:
    """Why the filesystem cannot take ``needed`` bytes, or None."""
    if total <= 0 or free < RESERVE_BYTES or free < total * FULL_FRACTION:
        return f"the filesystem is full ({free / MiB:.0f} MiB free of {total / MiB:.0f} MiB)"
    if needed + RESERVE_BYTES > free:
        return (
            f"the probe needs {needed / MiB:.0f} MiB (+{RESERVE_BYTES / MiB:.0f} MiB reserve) but only "
            f"{free / MiB:.0f} MiB are free; lower --size, --small-files or --ranks"
        )
    return None


def prepare_workdir(cfg: StorageConfig, usage: Callable[[str], Any] = shutil.disk_usage) -> Path:
    """Refuse or create the probe's own directory below ``cfg.path``."""
    p = Path(cfg.path)
    if not p.exists():
        raise StorageRefused(f"{p} does not exist")
    if not p.is_dir():
        raise StorageRefused(f"{p} is not a directory")
    if not os.access(p, os.W_OK | os.X_OK):
        raise StorageRefused(f"{p} is not writable by uid {os.getuid()}")
    u = usage(str(p))
    why = space_problem(u.free, u.total, cfg.needed_bytes)
    if why:
        raise StorageRefused(f"{p}: {why}")
    try:
        return Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX, dir=p))
    except OSError as e:
        raise StorageRefused(f"cannot create a directory in {p}: {e.strerror or e}") from None


def remove_created(workdir: Path, created: Sequence[Path]) -> list[str]:
    """Remove exactly the files the probe created, then its directory if empty. Returns what was left."""
    for f in created:
        with contextlib.suppress(FileNotFoundError, OSError):
            if f.is_dir() and not f.is_symlink():
                f.rmdir()  # only ever empty directories of our own (the control directory)
            else:
                f.unlink()
    left = sorted(x.name for x in workdir.iterdir()) if workdir.is_dir() else []
    if not left:
        workdir.rmdir()
    return left


# ------------------------------------------------------------------------------------------ lustre health


def _tool(args: list[str]) -> tuple[int, str]:
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 127, str(e)
    return r.returncode, r.stdout + r.stderr


def lustre_checks(path: str, run: Callable[[list[str]], tuple[int, str]] = _tool) -> list[Check]:
    checks: list[Check] = []
    if shutil.which("lctl") is None and run is _tool:
        return [Check("lustre.health", Status.skipped, "lctl is not installed here: client health not read")]
    rc, out = run(["lctl", "get_param", "health_check"])
    ok, said = parse_health_check(out) if rc == 0 else (False, out.strip() or f"exit {rc}")
    checks.append(Check("lustre.health", Status.passed if ok else Status.failed, f"health_check: {said}"))
    rc, out = run(["lctl", "get_param", "osc.*.import", "mdc.*.import"])
    states = parse_imports(out) if rc == 0 else {}
    bad = bad_imports(states)
    if not states:
        checks.append(Check("lustre.imports", Status.failed, f"no import state readable ({out.strip()[:200]})"))
    else:
        checks.append(
            Check(
                "lustre.imports",
                Status.failed if bad else Status.passed,
                f"not connected: {bad}" if bad else f"{len(states)} imports FULL or IDLE",
                {"states": states},
            )
        )
    if shutil.which("lfs") is not None or run is not _tool:
        rc, out = run(["lfs", "df", path])
        df = parse_lfs_df(out)
        bad_df = df["problems"] or (not df["targets"])
        checks.append(
            Check(
                "lustre.targets",
                Status.failed if bad_df else Status.passed,
                "; ".join(df["problems"])
                or ("no target listed" if not df["targets"] else f"{len(df['targets'])} targets"),
                df,
            )
        )
    return checks


def fstype_check(path: str, expected: str | None, mountinfo: str = "/proc/self/mountinfo") -> Check:
    from fabricguard.storage.mountinfo import check_path, find_mount, parse_mountinfo

    try:
        entries = parse_mountinfo(Path(mountinfo).read_text())
    except OSError as e:
        return Check("storage.fstype", Status.failed, f"cannot read {mountinfo}: {e}")
    real = os.path.realpath(path)
    if expected is None:
        m = find_mount(entries, real)
        what = f"{m.fstype} ({m.source}) at {m.mount_point}" if m else "no mount found"
        return Check(
            "storage.fstype",
            Status.passed,
            f"{real} is on {what}; no filesystem expected",
            {"fstype": m.fstype if m else None},
        )
    f = check_path(entries, real, expected)
    return Check("storage.fstype", Status.passed if f.ok else Status.failed, f.message, f.to_dict())


# ---------------------------------------------------------------------------------------- built-in engine


def _barrier(ctl: Path, name: str, rank: int, ranks: int, timeout: float = 300.0) -> None:
    (ctl / f"{name}.{rank}").touch()
    end = time.monotonic() + timeout
    while sum(1 for _ in ctl.glob(f"{name}.*")) < ranks:
        if time.monotonic() > end:
            raise TimeoutError(f"barrier {name}: peers did not arrive")
        time.sleep(0.002)


def rank_workload(workdir: Path, rank: int, cfg: StorageConfig) -> dict[str, Any]:
    """One rank's phases; returns timings, latencies and checksums. Records every file it creates."""
    ctl = workdir / ".ctl"
    res: dict[str, Any] = {"rank": rank, "created": []}
    block = bytearray(random.Random(rank).randbytes(cfg.block_size))
    ckpt = workdir / f"ckpt.rank{rank}.bin"
    nblocks = max(1, cfg.file_size // cfg.block_size)

    def block_at(i: int) -> bytearray:  # no two blocks alike: defeats dedup and compression
        block[:8] = i.to_bytes(8, "little")  # in place: no copy of the block inside the timed loop
        return block

    # Like fio's engine, only the I/O is timed, with no per-byte work of Python's around it: the block is
    # one buffer stamped with its index, and the read-back is compared block by block with the bytes
    # written (exact, and as cheap as fio's hardware crc32c), where a SHA-256 over the stream would make a
    # CPU-bound hash the figure on fast storage.
    _barrier(ctl, "write", rank, cfg.ranks)
    lat: list[float] = []
    t0 = time.time()
    fd = os.open(ckpt, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    res["created"].append(ckpt.name)
    try:
        for i in range(nblocks):
            buf = block_at(i)
            s = time.perf_counter()
            os.write(fd, buf)
            lat.append(time.perf_counter() - s)
        s = time.perf_counter()
        os.fsync(fd)
        res["fsync_s"] = time.perf_counter() - s
        t1 = time.time()  # fio's write clock also ends with its end_fsync
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # read back from storage, not the page cache
    finally:
        os.close(fd)
    res["write"] = {"start": t0, "end": t1, "bytes": nblocks * cfg.block_size, "lat": lat}

    _barrier(ctl, "read", rank, cfg.ranks)
    lat = []
    bad_blocks = 0
    t0 = time.time()
    got = bytearray(cfg.block_size)
    with open(ckpt, "rb", buffering=0) as f:
        for i in range(nblocks + 1):
            s = time.perf_counter()
            n = f.readinto(got)
            lat.append(time.perf_counter() - s)
            if i == nblocks:
                bad_blocks += bool(n)  # the file is longer than what was written
            elif n != cfg.block_size or got != block_at(i):
                bad_blocks += 1
    res["read"] = {"start": t0, "end": time.time(), "bytes": nblocks * cfg.block_size, "lat": lat[:-1]}
    res["checksum_ok"] = bad_blocks == 0
    res["bad_blocks"] = bad_blocks

    payload = b"x" * cfg.small_size
    names = [workdir / f"small.rank{rank}.{i:06d}" for i in range(cfg.small_files)]
    for op in ("create", "stat", "unlink"):
        _barrier(ctl, op, rank, cfg.ranks)
        lat = []
        t0 = time.time()
        for p in names:
            s = time.perf_counter()
            if op == "create":
                fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                os.write(fd, payload)
                os.close(fd)
            elif op == "stat":
                os.stat(p)
            else:
                os.unlink(p)
            lat.append(time.perf_counter() - s)
        res[op] = {"start": t0, "end": time.time(), "ops": len(names), "lat": lat}
    return res


def _worker_main(argv: list[str]) -> int:
    workdir, rank = Path(argv[0]), int(argv[1])
    cfg = StorageConfig(**json.loads((workdir / ".ctl" / "config.json").read_text()))
    try:
        res = rank_workload(workdir, rank, cfg)
    except Exception as e:
        (workdir / ".ctl" / f"error.{rank}").write_text(f"{type(e).__name__}: {e}")
        return 1
    (workdir / ".ctl" / f"result.{rank}.json").write_text(json.dumps(res))
    return 0


def aggregate(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per phase: aggregate rate over the span from the first start to the last end, and latency percentiles."""
    out: dict[str, Any] = {}
    for phase in ("write", "read"):
        span = max(r[phase]["end"] for r in results) - min(r[phase]["start"] for r in results)
        total = sum(r[phase]["bytes"] for r in results)
        out[phase] = {
            "MBps": total / max(span, 1e-9) / 1e6,
            "bytes": total,
            "seconds": span,
            "latency_ms": percentiles([x for r in results for x in r[phase]["lat"]]),
        }
    out["write"]["fsync_ms_max"] = max(r.get("fsync_s", 0.0) for r in results) * 1e3
    for op in ("create", "stat", "unlink"):
        span = max(r[op]["end"] for r in results) - min(r[op]["start"] for r in results)
        ops = sum(r[op]["ops"] for r in results)
        out[op] = {
            "ops_per_s": ops / max(span, 1e-9),
            "ops": ops,
            "latency_ms": percentiles([x for r in results for x in r[op]["lat"]]),
        }
    out["checksum_ok"] = all(r["checksum_ok"] for r in results)
    return out


def run_builtin(workdir: Path, cfg: StorageConfig, *, timeout_s: float = 300.0) -> tuple[dict[str, Any], list[Path]]:
    ctl = workdir / ".ctl"
    ctl.mkdir()
    (ctl / "config.json").write_text(json.dumps(asdict(cfg)))
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "fabricguard.probes.storage", str(workdir), str(r)], stdin=subprocess.DEVNULL
        )
        for r in range(cfg.ranks)
    ]
    deadline = time.monotonic() + timeout_s
    timed_out = False
    try:
        for p in procs:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        timed_out = True
        for p in procs:
            p.kill()
            p.wait()
    results, errors = [], []
    for r in range(cfg.ranks):
        rf = ctl / f"result.{r}.json"
        if rf.is_file():
            results.append(json.loads(rf.read_text()))
        elif (ctl / f"error.{r}").is_file():
            errors.append(f"rank {r}: {(ctl / f'error.{r}').read_text()}")
        elif timed_out:
            errors.append(f"rank {r}: did not finish within {timeout_s:g} s (a hung or very slow filesystem); "
                          "it was stopped")
        else:
            errors.append(f"rank {r}: exited {procs[r].returncode} without a result")
    created = [workdir / n for r in results for n in r["created"]]
    # Small files of a failed rank may remain: remove only names this probe's pattern produced.
    created += [workdir / p.name for p in workdir.glob("small.rank*.*")]
    created += [workdir / f"ckpt.rank{r}.bin" for r in range(cfg.ranks)]
    created += sorted(ctl.iterdir())
    if errors:
        raise RuntimeError("; ".join(errors))
    return aggregate(results), [*created, ctl]


# ------------------------------------------------------------------------------------------------- fio


@dataclass(frozen=True)
class ToolRun:
    """What one run of an external tool left: exit code, output, and its wall time."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float


def fio_commands(workdir: Path, cfg: StorageConfig) -> tuple[list[str], list[str], list[Path]]:
    """fio's write and read-verify command lines for ``cfg`` in ``workdir``, and the files they create."""
    common = [
        "fio",
        "--output-format=json",
        "--name=fgckpt",
        f"--directory={workdir}",
        f"--bs={cfg.block_size}",
        f"--size={cfg.file_size}",
        f"--numjobs={cfg.ranks}",
        "--ioengine=psync",
        "--verify=crc32c",
        "--verify_state_save=0",  # else fio drops *-verify.state files into the current directory
    ]
    created = [workdir / f"fgckpt.{j}.0" for j in range(cfg.ranks)]
    return ([*common, "--rw=write", "--end_fsync=1", "--do_verify=0"],
            [*common, "--rw=read", "--do_verify=1", "--invalidate=1"], created)


def run_tool(args: list[str], timeout_s: float) -> ToolRun:
    """Run ``args`` to completion within ``timeout_s`` (killed after; RuntimeError naming the deadline)."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{args[0]} did not finish within {timeout_s:g} s (a hung or very slow filesystem); "
                           "it was stopped") from None
    return ToolRun(p.returncode, p.stdout, p.stderr, time.perf_counter() - t0)


def judge_fio(write: ToolRun, read: ToolRun) -> dict[str, Any]:
    """The sequential metrics and checksum verdict from fio's two runs (pure: the runs are passed in)."""
    for proc in (write, read):
        if "{" not in proc.stdout:
            raise RuntimeError(f"fio produced no JSON (exit {proc.returncode}): {proc.stderr.strip()[-300:]}")
    wr, rd = parse_fio(write.stdout), parse_fio(read.stdout)
    errors = wr["errors"] + rd["errors"] + [ln for ln in (write.stderr + read.stderr).splitlines()
                                            if "verify failed" in ln]
    # Rates come from fio's own I/O clock, like the built-in engine's bracket around its I/O; the whole
    # fio process (start-up, file layout) is kept apart, for whoever wants to see what it costs.
    return {
        "fio_version": wr["version"],
        "write": {**wr.get("write", {"MBps": 0.0}), "process_s": write.seconds},
        "read": {**rd.get("read", {"MBps": 0.0}), "process_s": read.seconds},
        "checksum_ok": not errors and write.returncode == 0 and read.returncode == 0,
        "fio_errors": errors,
    }


def run_fio(workdir: Path, cfg: StorageConfig,
            run: Callable[[list[str], float], ToolRun] = run_tool) -> tuple[dict[str, Any], list[Path]]:
    """fio's sequential checkpoint write and verified read, each under ``cfg.timeout_s``."""
    write_args, read_args, created = fio_commands(workdir, cfg)
    write = run(write_args, cfg.timeout_s)
    read = run(read_args, cfg.timeout_s)
    return judge_fio(write, read), created


# ------------------------------------------------------------------------------------------------ probe


def _floors(cfg: StorageConfig) -> list[tuple[str, float]]:
    out = []
    if cfg.baseline_write_mbps:
        out.append(("write", cfg.baseline_write_mbps * cfg.floor_fraction))
    if cfg.baseline_read_mbps:
        out.append(("read", cfg.baseline_read_mbps * cfg.floor_fraction))
    return out


# A sequential phase shorter than this gives a rate that says little: the ranks start up to a few ms apart
# (the built-in engine's barrier polls every 2 ms), fio counts its runtime in whole milliseconds, and the
# file create and final fsync cost a fixed time whatever the size. From 0.1 s on each of these is a few
# percent at most; on the dev VM (bench/probes/README.md) that takes 64 MiB per rank for writes.
MIN_PHASE_S = 0.1


def size_for_meaning(seconds: float, per_rank: int) -> int:
    """MiB per rank for a phase that took ``seconds`` on ``per_rank`` bytes to last MIN_PHASE_S, doubled
    for margin, as a power of two."""
    need = per_rank * MIN_PHASE_S / max(seconds, 1e-3) * 2
    return 1 << max(0, math.ceil(math.log2(max(need, MiB) / MiB)))


def mark_meaningful(metrics: dict[str, Any], per_rank: int) -> str | None:
    """Flag each sequential phase ``meaningful``; when one is not, say why and which size would be."""
    short: list[str] = []
    mib = 0
    for phase in ("write", "read"):
        if phase not in metrics:
            continue
        secs = float(metrics[phase].get("seconds") or 0.0)
        metrics[phase]["meaningful"] = secs >= MIN_PHASE_S
        if secs < MIN_PHASE_S:
            short.append(f"{phase} took {secs * 1e3:.0f} ms")
            mib = max(mib, size_for_meaning(secs, per_rank))
    if not short:
        return None
    why = (
        f"{' and '.join(short)}, under {MIN_PHASE_S:g} s: rank start skew, fio's millisecond clock and the fixed "
        f"cost of create and fsync dominate, so the rate is not meaningful; use {mib} MiB or more per rank "
        "(--size / --storage-size)"
    )
    for phase in ("write", "read"):
        if metrics.get(phase, {}).get("meaningful") is False:
            metrics[phase]["not_meaningful"] = why
    return why


def throughput_status(metrics: dict[str, Any], cfg: StorageConfig) -> Status:
    """Degraded when a measured rate is under floor_fraction x the pool's storage baseline, or when a rate
    to be judged is not meaningful (the check cannot say the floor is met)."""
    for phase, floor in _floors(cfg):
        m = metrics.get(phase, {})
        if m.get("MBps", 0.0) < floor or m.get("meaningful") is False:
            return Status.degraded
    return Status.passed


def throughput_floor_note(metrics: dict[str, Any], cfg: StorageConfig) -> str:
    parts = []
    for phase, floor in _floors(cfg):
        m = metrics.get(phase, {})
        got = m.get("MBps", 0.0)
        if m.get("meaningful") is False:
            parts.append(f"{phase} not judged against its floor {floor:.0f} MB/s (too short to mean anything)")
        else:
            parts.append(f"{phase} {got:.0f} {'<' if got < floor else '>='} floor {floor:.0f} MB/s")
    return ("; " + ", ".join(parts)) if parts else "; no storage baseline in the profile, so not judged"


@dataclass
class StorageReport:
    path: str
    engine: str
    status: Status
    checks: list[Check] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    workdir: str | None = None
    left_behind: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = str(self.status)
        d["checks"] = [c.to_dict() for c in self.checks]
        return d


def probe_storage(
    cfg: StorageConfig, *, lustre_run: Callable[[list[str]], tuple[int, str]] | None = None
) -> StorageReport:
    """Run every check and the workload. Raises StorageRefused (before writing anything) when unsafe.
    ``cfg`` is left as given (the effective block size is the caller's, clamped to 4 KiB..file_size here)."""
    cfg = replace(cfg, block_size=max(4096, min(cfg.block_size, cfg.file_size)))
    checks = [fstype_check(cfg.path, cfg.expect_fstype)]
    if cfg.expect_fstype == "lustre" or checks[0].data.get("fstype") == "lustre":
        checks += lustre_checks(cfg.path, lustre_run or _tool)
    workdir = prepare_workdir(cfg)
    engine = cfg.engine
    if engine == "auto":
        engine = "fio" if shutil.which("fio") else "builtin"
    if engine == "fio" and shutil.which("fio") is None:
        remove_created(workdir, [])
        raise StorageRefused("--engine fio: fio is not installed (apt-get install fio)")
    metrics: dict[str, Any] = {}
    created: list[Path] = []
    try:
        if engine == "fio":
            seq, created = run_fio(workdir, cfg)
            metrics.update(seq)
            # fio has no create/stat/unlink-per-second mode as direct as this; the built-in one runs it.
            small_cfg = StorageConfig(**{**asdict(cfg), "file_size": cfg.block_size})
            small, c2 = run_builtin(workdir, small_cfg, timeout_s=cfg.timeout_s)
            created += c2
            metrics.update({k: small[k] for k in ("create", "stat", "unlink")})
        else:
            metrics, created = run_builtin(workdir, cfg, timeout_s=cfg.timeout_s)
        checks.append(
            Check(
                "storage.checksum",
                Status.passed if metrics["checksum_ok"] else Status.failed,
                "every checkpoint read back with exactly the data written (fio: its crc32c verify)"
                if metrics["checksum_ok"]
                else f"read-back differs from what was written {metrics.get('fio_errors', '')}",
            )
        )
        short = mark_meaningful(metrics, cfg.block_size * max(1, cfg.file_size // cfg.block_size))
        checks.append(
            Check(
                "storage.throughput",
                throughput_status(metrics, cfg),
                f"write {metrics['write']['MBps']:.0f} MB/s (fsync included), read {metrics['read']['MBps']:.0f} MB/s, "
                f"create {metrics['create']['ops_per_s']:.0f}/s, stat {metrics['stat']['ops_per_s']:.0f}/s, "
                f"unlink {metrics['unlink']['ops_per_s']:.0f}/s from {cfg.ranks} ranks"
                + throughput_floor_note(metrics, cfg)
                + (f"; {short}" if short else ""),
            )
        )
    except OSError as e:  # said about the directory given, not the probe's own scratch file inside it
        checks.append(Check("storage.workload", Status.failed,
                            f"{type(e).__name__} in {cfg.path}: {e.strerror or e}"))
    except Exception as e:
        checks.append(Check("storage.workload", Status.failed, f"{type(e).__name__}: {e}"))
    finally:
        left = [] if cfg.keep else remove_created(workdir, created)
    return StorageReport(cfg.path, engine, overall([c.status for c in checks]), checks, metrics, str(workdir), left)


if __name__ == "__main__":
    sys.exit(_worker_main(sys.argv[1:]))
