"""Following every running job at scale: the controller's followers against a minimal stat-and-read poller.

    .venv/bin/python bench/live/bench_scale.py --jobs 50000 --root /dev/shm/fg-scale [--files 2] [--interval 10]

Writes ``--jobs`` running jobs of ``--files`` rank logs each (the rdma-healthy example's real-format logs, 21 KiB
a file) under ``--root`` (tmpfs: the per-file metadata cost is measured and stated, Lustre's is projected from
it), then measures, each side in this process, interleaved, median of ``--repeat``:

- the first poll (every byte read and scanned) and the memory the followers keep per job;
- a quiet poll (nothing changed) and a growing poll (10% of jobs append one step line to each rank file):
  CPU (``time.process_time``) of ``LiveJobs.poll`` against the minimal poller (``listdir`` each job folder,
  ``stat`` each file, ``open``/``pread``/``close`` what grew, count its newlines);
- system calls per job per poll of both, under ``strace -c -f`` on the first ``--strace-jobs`` jobs (a child);
- the time from writing a socket-fallback line into job 0 and into the last job to the poll of the controller's
  loop (a poll every ``--interval`` seconds, budget 0.8 x interval) whose observation says ``socket``;
- descriptors: the most the process held during the polls (sampled by a thread every 1 ms).

Prints a JSON summary (``--out`` writes it too).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "controller"), str(ROOT / "tests"), str(ROOT / "src")]

from fabricguard import descriptors  # noqa: E402
from fabricguard.controller.canary import log_dir  # noqa: E402
from fabricguard.controller.live import LiveJobs, running_jobs  # noqa: E402
from fabricguard.profile import loads_profile  # noqa: E402

HEALTHY = sorted((ROOT / "examples" / "jobs" / "rdma-healthy" / "logs").iterdir())
SOCKET = sorted((ROOT / "examples" / "jobs" / "socket-fallback" / "logs").iterdir())
NS, POOL = "ml", "gh200-roce"
STEP = b"gpu-node-000:4000:4000 [0] NCCL INFO AllReduce: opCount 1f2 sendbuff 0x7f sendcount 262144 datatype 7 " \
       b"op 0 root 0 comm 0x55 [nranks=16] stream 0x56\n"


def profile_text() -> str:
    from controller_support import PROFILE

    return PROFILE


def jobset(name: str) -> dict:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": NS, "uid": name,
                         "labels": {"fabricguard.io/managed": "true", "fabricguard.io/pool": POOL}},
            "spec": {"replicatedJobs": []}, "status": {}}


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class Minimal:
    """The floor: list each folder, stat each file, read what grew through a descriptor closed at once."""

    def __init__(self, dirs: list[str]) -> None:
        self.dirs = dirs
        self.off: dict[str, int] = {}

    def poll(self) -> int:
        lines = 0
        for d in self.dirs:
            try:
                names = os.listdir(d)
            except FileNotFoundError:
                continue
            for name in names:
                p = d + "/" + name
                st = os.stat(p)
                o = self.off.get(p, 0)
                if st.st_size > o:
                    fd = os.open(p, os.O_RDONLY)
                    try:
                        data = os.pread(fd, st.st_size - o, o)
                    finally:
                        os.close(fd)
                    self.off[p] = o + len(data)
                    lines += data.count(b"\n")
        return lines


class FdPeak:
    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, descriptors.open_count())
            time.sleep(0.001)

    def __enter__(self) -> FdPeak:
        self._t.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._t.join()


def build(root: Path, jobs: int, files: int) -> tuple[list[str], list[str]]:
    prof = loads_profile(profile_text())
    data = [p.read_bytes() for p in HEALTHY]
    names = [f"job-{i:05d}" for i in range(jobs)]
    dirs = []
    for n in names:
        d = root / log_dir(prof, NS, n)
        d.mkdir(parents=True, exist_ok=True)
        for r in range(files):
            (d / f"gpu-node-{r:03d}.log").write_bytes(data[r % len(data)])
        dirs.append(str(d))
    return names, dirs


def grow(dirs: list[str], every: int) -> None:
    for d in dirs[::every]:
        for name in os.listdir(d):
            with open(os.path.join(d, name), "ab") as f:
                f.write(STEP)


def cpu(fn) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def strace_child(args: argparse.Namespace) -> None:
    """``--strace-side``: one side polls the first ``--strace-jobs`` jobs: a first poll, a quiet one, a growing one
    (markers written to stderr let the parent split strace's count)."""
    prof = loads_profile(profile_text())
    names = [f"job-{i:05d}" for i in range(args.strace_jobs)]
    dirs = [str(args.root / log_dir(prof, NS, n)) for n in names]
    if args.strace_side == "minimal":
        m = Minimal(dirs)
        m.poll()
        poll = m.poll
    else:
        lj = LiveJobs(prof, args.root)
        lj.sync(running_jobs(prof, {"JobSet": [jobset(n) for n in names]}))
        lj.poll()
        poll = lj.poll  # type: ignore[assignment]
    os.write(2, b"=== quiet\n")
    poll()
    os.write(2, b"=== grow\n")
    grow(dirs, 10)
    os.write(2, b"=== poll\n")
    poll()
    os.write(2, b"=== end\n")


def count_syscalls(args: argparse.Namespace, side: str) -> dict[str, int]:
    """System calls of the quiet poll and of the growing poll (the writes of ``grow`` excluded)."""
    log = args.root.parent / f"strace-{side}.txt"
    cmd = ["strace", "-f", "-qq", "-e", "trace=all", "-o", str(log), sys.executable, __file__, "--root",
           str(args.root), "--strace-side", side, "--strace-jobs", str(args.strace_jobs)]
    subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL, timeout=1800)
    phase, counts = None, {"quiet": 0, "grow": 0}
    for line in log.read_text(errors="replace").splitlines():
        if "=== quiet" in line:
            phase = "quiet"
            continue
        if "=== grow" in line:
            phase = None
            continue
        if "=== poll" in line:
            phase = "grow"
            continue
        if "=== end" in line:
            break
        if phase and "(" in line and "resumed>" not in line:
            counts[phase] += 1
    log.unlink()
    return counts


def latency(lj: LiveJobs, names: list[str], dirs: list[str], interval: float, rounds: int) -> dict[str, object]:
    """The controller's loop (a poll every interval, within its budget) over followers that have read everything:
    seconds from a socket line written (mid-interval, into job 1 and job N at once) to the poll that saw it."""
    lj.interval_s, lj.budget_s = interval, None
    sock = SOCKET[0].read_bytes()
    targets = {"job 1": 0, "job N": len(names) - 1}
    written: dict[str, float] = {}
    seen: dict[str, float] = {}
    polls = []
    start = time.monotonic()
    for k in range(rounds):
        if k == 1:
            for label, i in targets.items():
                with (Path(dirs[i]) / "gpu-node-000.log").open("ab") as f:
                    f.write(sock)
                written[label] = time.monotonic()
        obs = lj.poll()
        polls.append({"polled": lj.cost.polled, "seconds": round(lj.cost.last_poll_s, 3),
                      "unfollowed": lj.cost.unfollowed, "lag_s": round(lj.cost.lag_s, 3)})
        by = {ob.job.name: ob for ob in obs}
        for label, i in targets.items():
            ob = by.get(names[i])
            if label in written and label not in seen and ob is not None and ob.verdict.transport.value == "socket":
                seen[label] = round(time.monotonic() - written[label], 3)
        if len(seen) == len(targets):
            break
        nxt = start + (k + 1) * interval - (interval / 2 if k == 0 else 0)
        time.sleep(max(0.0, nxt - time.monotonic()))
    return {"detected_s": seen, "polls": polls}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=50000)
    ap.add_argument("--files", type=int, default=2)
    ap.add_argument("--root", type=Path, default=Path("/dev/shm/fg-scale/lustre"))
    ap.add_argument("--interval", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--strace-jobs", type=int, default=1000)
    ap.add_argument("--strace-side", choices=("minimal", "follower"))
    ap.add_argument("--skip-latency", action="store_true")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.strace_side:
        strace_child(args)
        return
    shutil.rmtree(args.root, ignore_errors=True)
    args.root.mkdir(parents=True)
    t0 = time.perf_counter()
    names, dirs = build(args.root, args.jobs, args.files)
    prof = loads_profile(profile_text())
    out: dict[str, object] = {"jobs": args.jobs, "files_per_job": args.files, "build_s": time.perf_counter() - t0,
                              "bytes": sum(os.path.getsize(os.path.join(d, f)) for d in dirs[:10]
                                           for f in os.listdir(d)) * args.jobs // 10}
    # Per-file metadata cost on this file system (what Lustre turns into a round trip each).
    sample = [os.path.join(d, "gpu-node-000.log") for d in dirs[:: max(1, len(dirs) // 5000)]]
    t = time.perf_counter()
    for p in sample:
        os.lstat(p)
    out["lstat_us"] = (time.perf_counter() - t) / len(sample) * 1e6
    rss0 = rss_kib()
    lj = LiveJobs(prof, args.root, workers=args.workers)
    lj.sync(running_jobs(prof, {"JobSet": [jobset(n) for n in names]}))
    with FdPeak() as fdp:
        out["first_poll_wall_s"], out["first_poll_cpu_s"] = cpu(lj.poll)
    out["follower_kib_per_job"] = (rss_kib() - rss0) / args.jobs
    m = Minimal(dirs)
    out["minimal_first_wall_s"], out["minimal_first_cpu_s"] = cpu(m.poll)
    quiet = {"follower": [], "minimal": []}  # type: ignore[var-annotated]
    growing = {"follower": [], "minimal": []}  # type: ignore[var-annotated]
    with FdPeak() as fdq:
        for _ in range(args.repeat):
            quiet["minimal"].append(cpu(m.poll))
            quiet["follower"].append(cpu(lj.poll))
            grow(dirs, 10)
            growing["minimal"].append(cpu(m.poll))
            growing["follower"].append(cpu(lj.poll))
    for name, d in (("quiet", quiet), ("grow", growing)):
        for side, runs in d.items():
            out[f"{name}_{side}_wall_s"] = statistics.median(w for w, _ in runs)
            out[f"{name}_{side}_cpu_s"] = statistics.median(c for _, c in runs)
        out[f"{name}_cpu_ratio"] = out[f"{name}_follower_cpu_s"] / max(out[f"{name}_minimal_cpu_s"], 1e-9)  # type: ignore[operator]
    out["fd_peak_first_poll"], out["fd_peak_polls"] = fdp.peak, fdq.peak
    out["fd_limit"] = descriptors.limit().soft
    out["followed"], out["unfollowed"] = lj.cost.followed, lj.cost.unfollowed
    if not args.skip_latency:
        out["latency"] = latency(lj, names, dirs, args.interval, rounds=6)
    lj.close()
    if shutil.which("strace") and args.strace_jobs:
        mins = count_syscalls(args, "minimal")
        fol = count_syscalls(args, "follower")
        out["syscalls_per_job"] = {side: {k: v / args.strace_jobs for k, v in c.items()}
                                   for side, c in (("minimal", mins), ("follower", fol))}
    text = json.dumps(out, indent=1, default=str)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    shutil.rmtree(args.root, ignore_errors=True)


if __name__ == "__main__":
    main()
