"""Time from a job's first socket line to the controller's job-on-sockets metric, and the cost of following jobs.

    .venv/bin/python bench/live/bench_live.py [--jobs 20] [--interval 10] [--rate 40]

Each job is a writer process appending the socket-fallback job's real-format rank logs (examples/jobs) at
``--rate`` lines per second per job, the way ranks write during communicator init. The controller's own code
follows them: ``LiveJobs`` polls every ``--interval`` seconds (the controller's ``live_interval_s``) and
``Metrics.observe_live`` sets ``fabricguard_job_on_sockets``. Latency is measured from the writer's flush of the
job's first line that proves sockets (its "Using network Socket" line, then the ``via NET/Socket`` connections)
to the poll that set the metric to 1 (CLOCK_MONOTONIC is shared by processes on Linux). A Prometheus scrape and
the alert's evaluation add their own intervals on top (``for: 0m``; typically 30 s + 30 s).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "controller"), str(ROOT / "tests")]

from fabricguard.controller.canary import log_dir  # noqa: E402
from fabricguard.controller.live import LiveJobs, running_jobs  # noqa: E402
from fabricguard.controller.metrics import Metrics  # noqa: E402
from fabricguard.profile import loads_profile  # noqa: E402

SRC = ROOT / "examples" / "jobs" / "socket-fallback" / "logs"
WRITER = ROOT / "tests" / "nccl" / "log_writer.py"
PROFILE = (ROOT / "tests" / "controller" / "controller_support.py")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=20)
    ap.add_argument("--interval", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=40.0, help="lines per second per job")
    args = ap.parse_args()
    from controller_support import PROFILE as PROFILE_TEXT

    prof = loads_profile(PROFILE_TEXT)
    root = Path(tempfile.mkdtemp(prefix="fg-live-"))
    names = [f"job-{i:03d}" for i in range(args.jobs)]
    jobsets = [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                "metadata": {"name": n, "namespace": "ml", "uid": n,
                             "labels": {"fabricguard.io/managed": "true", "fabricguard.io/pool": "gh200-roce"}},
                "spec": {}, "status": {}} for n in names]
    live = LiveJobs(prof, root)
    live.sync(running_jobs(prof, {"JobSet": jobsets}))
    metrics = Metrics()
    writers = {n: subprocess.Popen([sys.executable, str(WRITER), str(SRC), str(root / log_dir(prof, "ml", n)),
                                    str(args.rate)], stdout=subprocess.PIPE, text=True) for n in names}
    start = time.monotonic()
    seen: dict[str, float] = {}
    cpu: list[float] = []
    wall: list[float] = []
    while len(seen) < len(names) and time.monotonic() - start < 600:
        c0, w0 = time.process_time(), time.perf_counter()
        metrics.observe_live(prof, live.poll(), live.cost)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
        t = time.monotonic()
        for n in names:
            v = metrics.registry.get_sample_value("fabricguard_job_on_sockets",
                                                  {"namespace": "ml", "job": n, "pool": "gh200-roce"})
            if v == 1 and n not in seen:
                seen[n] = t
        time.sleep(max(0.0, args.interval - (time.perf_counter() - w0)))
    firsts: dict[str, float] = {}
    for n, w in writers.items():
        w.wait()
        for line in (w.stdout.read() if w.stdout else "").splitlines():
            if line.startswith("socket "):
                firsts[n] = float(line.split()[1])
    # The writer prints its first "via NET/Socket" line; "Using network Socket" comes earlier and already proves
    # sockets on a multi-node job, so latency can be below the poll interval, even "negative" against that line.
    lat = [seen[n] - firsts[n] for n in names if n in seen and n in firsts]
    elapsed_min = (time.monotonic() - start) / 60
    total_bytes = live.cost.bytes_total
    print(f"jobs {args.jobs}, {live.cost.files} files, poll every {args.interval:g} s, {args.rate:g} lines/s/job")
    print(f"detected {len(seen)}/{len(names)}; latency from first 'via NET/Socket' line: median "
          f"{statistics.median(lat):.1f} s, max {max(lat):.1f} s")
    print(f"per poll: CPU median {statistics.median(cpu) * 1000:.1f} ms, max {max(cpu) * 1000:.1f} ms; "
          f"wall median {statistics.median(wall) * 1000:.1f} ms")
    print(f"read {total_bytes / 1e6:.2f} MB in {elapsed_min:.1f} min: {total_bytes / 1e3 / elapsed_min / args.jobs:.1f} "
          f"kB/min per job; CPU per job per minute {sum(cpu) / elapsed_min / args.jobs * 1000:.1f} ms")
    live.close()


if __name__ == "__main__":
    main()
