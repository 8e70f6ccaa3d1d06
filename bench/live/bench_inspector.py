"""Cost of following NCCL Inspector records of many running jobs: CPU per poll, bytes read, memory.

    .venv/bin/python bench/live/bench_inspector.py [--jobs 1000] [--nodes 2] [--gpus 8] [--polls 18]

Each job is ``--nodes`` pods x ``--gpus`` rank processes, each writing its own Inspector file in the plugin's
exact line format (tests/inspector_records.py) at the rate the webhook's settings allow: one dump per 60 s
(NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS=60000000), each holding a full ring of 8 records on the
inter-node and the intra-node communicator (NCCL_INSPECTOR_DUMP_COLL_RING_SIZE=8; 15 records, about 6.3 kB).
The processes' dumps are spread over the minute; the controller polls every 10 s (``live_interval_s``), so each
poll finds a sixth of the files grown by one dump. The controller's own code follows them: ``LiveJobs`` (one
``JobBusbw`` per job, as the live loop runs it) with a profile that gives the pool the Inspector.

Measured: the first poll (a controller starting while the jobs run, ``--history`` dumps already written), then
``--polls`` steady polls: CPU time (``time.process_time``) and wall time per poll, bytes read, records parsed,
and the process's resident memory before and after. The files are on local tmpfs, not Lustre: on Lustre each
poll adds one ``stat`` per file (``--nodes x --gpus x --jobs`` of them) and one open+read per grown file.
"""

from __future__ import annotations

import argparse
import gc
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "controller"), str(ROOT / "tests")]

from fabricguard.controller.live import LiveJobs, RunningJob  # noqa: E402
from fabricguard.profile import loads_profile  # noqa: E402
from inspector_records import Job  # noqa: E402

PER_DUMP = 3  # x 5 records (3 large on the inter-node communicator, a small one, one intra-node) = 15 per dump


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--polls", type=int, default=18)
    ap.add_argument("--history", type=int, default=3, help="dumps each file already holds at the first poll")
    ap.add_argument("--root", default="/dev/shm")
    ap.add_argument("--no-ranks", action="store_true",
                    help="leave out the per-rank and per-node analysis (nccl/ranks.py), to measure what it adds")
    args = ap.parse_args()
    if args.no_ranks:
        from fabricguard.nccl.ranks import Attribution

        Attribution.add = lambda self, records: None  # type: ignore[method-assign]
    from controller_support import PROFILE

    prof = loads_profile(PROFILE.replace(
        "spec:\n", "spec:\n  inspector: {delivery: hostPath, hostPath: /opt/nccl-inspector}\n", 1))
    pool = prof.pool()
    root = Path(tempfile.mkdtemp(prefix="fg-insp-", dir=args.root))
    try:
        jobs = [Job(name=f"job-{i:04d}", nodes=args.nodes, gpus=args.gpus,
                    busbw={"AllReduce": 44.0 if i % 10 else 21.0, "AllGather": 43.0, "ReduceScatter": 43.0})
                for i in range(args.jobs)]
        dirs = [root / "ml" / j.name / ".fabricguard" / "inspector" for j in jobs]
        t0 = time.perf_counter()
        written = 0
        for j, d in zip(jobs, dirs, strict=True):
            d.mkdir(parents=True)
            for node in range(j.nodes):
                for gpu in range(j.gpus):
                    text = "".join(j.dump(node, gpu, k, per_dump=PER_DUMP) for k in range(args.history))
                    (d / j.file(node, gpu)).write_text(text, encoding="ascii")
                    written += len(text)
        print(f"wrote {args.jobs} jobs x {args.nodes * args.gpus} files, {written / 1e6:.0f} MB of history "
              f"in {time.perf_counter() - t0:.0f} s")
        running = [RunningJob("JobSet", "jobset.x-k8s.io/v1alpha2", "jobsets", "ml", j.name, pool.name,
                              {"metadata": {"name": j.name, "namespace": "ml"}}) for j in jobs]
        gc.collect()
        rss0 = rss_mb()
        lj = LiveJobs(prof, root)
        lj.sync(running)
        c0, w0 = time.process_time(), time.perf_counter()
        obs = lj.poll()
        first = (time.process_time() - c0, time.perf_counter() - w0, lj.cost.inspector_bytes_total)
        print(f"first poll: cpu {first[0]:.2f} s, wall {first[1]:.2f} s, read {first[2] / 1e6:.1f} MB, "
              f"{lj.cost.inspector_records_total} records, {lj.cost.inspector_files} files")
        cpu: list[float] = []
        wall: list[float] = []
        nbytes: list[int] = []
        recs: list[int] = []
        procs = args.nodes * args.gpus
        wtime = 0.0
        for poll in range(args.polls):
            # Simulated 10 s: the processes whose dump falls in this sixth of the minute append one dump.
            tw = time.perf_counter()
            for j, d in zip(jobs, dirs, strict=True):
                for p in range(procs):
                    if (poll + p) % 6 == 0:
                        node, gpu = divmod(p, args.gpus)
                        dump = args.history + (poll + p) // 6
                        with (d / j.file(node, gpu)).open("a", encoding="ascii") as f:
                            f.write(j.dump(node, gpu, dump, per_dump=PER_DUMP))
            wtime += time.perf_counter() - tw
            b0, r0 = lj.cost.inspector_bytes_total, lj.cost.inspector_records_total
            c0, w0 = time.process_time(), time.perf_counter()
            obs = lj.poll()
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - w0)
            nbytes.append(lj.cost.inspector_bytes_total - b0)
            recs.append(lj.cost.inspector_records_total - r0)
        gc.collect()
        rss1 = rss_mb()
        below = sum(1 for ob in obs if ob.busbw is not None and any(
            f.busbw_gbps < (ob.busbw.floor_gbps or 0) for f in ob.busbw.figures.values()))
        total = lj.cost.inspector_bytes_total
        print(f"steady polls ({args.polls}, one per simulated 10 s): cpu median {statistics.median(cpu) * 1e3:.0f} ms "
              f"/ max {max(cpu) * 1e3:.0f} ms; wall median {statistics.median(wall) * 1e3:.0f} ms; "
              f"read {statistics.median(nbytes) / 1e6:.2f} MB and {statistics.median(recs):.0f} records per poll")
        print(f"bytes: read {total / 1e6:.1f} MB in all = written "
              f"{sum(p.stat().st_size for d in dirs for p in d.iterdir()) / 1e6:.1f} MB (every byte once)")
        print(f"memory: RSS {rss0:.0f} MB before the followers, {rss1:.0f} MB after "
              f"({(rss1 - rss0) / args.jobs * 1e3:.0f} kB per job); jobs below the floor now: {below}")
        print(f"(the simulated writers took {wtime:.1f} s in all, outside the measured polls)")
        lj.close()
        # The same jobs without the Inspector (their log followers only, on empty log directories): what of the
        # poll above is not the Inspector's.
        plain = LiveJobs(loads_profile(PROFILE), root)
        plain.sync(running)
        base = []
        for _ in range(3):
            c0 = time.process_time()
            plain.poll()
            base.append(time.process_time() - c0)
        print(f"the log followers alone (no Inspector): cpu median {statistics.median(base) * 1e3:.0f} ms per poll")
        plain.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
