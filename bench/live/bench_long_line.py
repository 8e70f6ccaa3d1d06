"""Time and peak memory of reading one job's log that is a single line without a newline (issue 17 §2).

Writes ``--mib`` MiB of ``x`` with no newline into a job's log directory (plus one real rank log), then, each in
a fresh process so the peak RSS is its own: a plain chunked read of the file (the floor), the controller's live
follower (``nccl.follow.LogFollower.poll``), the scanner behind ``nccl inspect`` and ``verify-job``
(``nccl.scan.inspect_paths``), and one whole controller pass (``run_pass``, what ``controller --once`` runs) with
the job running, against kmock's emulator in the same process. Prints one JSON line per reader: seconds, peak RSS in MiB, and what the reader said
about the over-long line.

Run: ``.venv/bin/python bench/live/bench_long_line.py --mib 1024 [--src OTHER/src]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RANK_LOG = ROOT / "tests" / "fixtures" / "nccl" / "synthetic" / "socket-fallback-2x4"

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
which, d = sys.argv[1], Path(sys.argv[2])
t0 = time.perf_counter()
said = None
if which == "plain":
    n = 0
    with open(d / "rank9.log", "rb") as f:
        while b := f.read(8 << 20):
            n += len(b)
    said = f"{n} bytes"
elif which == "follower":
    from fabricguard.nccl.follow import LogFollower
    f = LogFollower(d)
    f.poll()
    v = f.verdict()
    said = {"transport": v.transport.value, "unread": [e.why for e in getattr(v.report, "unread", [])][:2]}
    f.close()
elif which == "inspect":
    from fabricguard.nccl.scan import inspect_paths
    r = inspect_paths([d])
    said = {"transport": r.inter_node_transport.value, "unread": [e.why for e in getattr(r, "unread", [])][:2]}
elif which == "controller":
    # One controller pass (run_pass, as controller --once runs it) with the job running: the live follower
    # reads its log directory. The API is kmock's emulator in this process, holding the incident's cluster.
    import asyncio
    root = Path(sys.argv[3])
    sys.path[:0] = [str(root / "tests"), str(root / "tests" / "controller")]
    from controller_support import JOBSETS, NOW, PROFILE, apply_aware_emulator, kubeconfig, load_incident
    from kmock import Server
    from fabricguard.controller.runner import RunConfig, run_pass
    from fabricguard.profile import loads_profile

    async def one_pass():
        k8s = apply_aware_emulator()
        async with k8s, Server(k8s) as server:
            k8s["get /version/"] << {"major": "1", "minor": "31", "gitVersion": "v1.31.6"}
            load_incident(k8s)
            k8s.objects[JOBSETS, "ml-training", "llama-long"] = {
                "metadata": {"name": "llama-long", "namespace": "ml-training", "uid": "uid-long",
                             "labels": {"fabricguard.io/managed": "true", "fabricguard.io/pool": "gh200-roce"}},
                "spec": {"replicatedJobs": []}, "status": {}}
            kc = kubeconfig(d.parents[4], str(server.url).rstrip("/"))
            t0 = time.perf_counter()
            cfg = RunConfig(loads_profile(PROFILE), image="x@sha256:" + "a" * 64, kubeconfig=kc,
                            lustre_root=d.parents[3])
            rep = await run_pass(cfg, NOW)
            ob = [o for o in rep.live if o.job.name == "llama-long"]
            return time.perf_counter() - t0, {"transport": ob[0].verdict.transport.value if ob else None,
                                              "errors": rep.errors[:2]}
    secs, said = asyncio.run(one_pass())
    t0 = time.perf_counter() - secs
secs = time.perf_counter() - t0
print(json.dumps({"reader": which, "seconds": round(secs, 2),
                  "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                  "said": said}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--readers", default="plain,follower,inspect,controller")
    ap.add_argument("--src", default=str(ROOT / "src"), help="the fabricguard source tree to measure (another "
                    "commit's: git archive COMMIT src | tar -x -C DIR, then DIR/src)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="fg-longline-"))
    try:
        # Where the webhook's NCCL_DEBUG_FILE writes for job ml-training/llama-long: <lustre>/<ns>/<job>/.fabricguard/nccl
        d = tmp / "lustre" / "ml-training" / "llama-long" / ".fabricguard" / "nccl"
        d.mkdir(parents=True)
        shutil.copy(sorted(RANK_LOG.iterdir())[0], d / "rank0.log")
        block = b"x" * (1 << 20)
        with open(d / "rank9.log", "wb") as f:
            for _ in range(args.mib):
                f.write(block)
        env = {**os.environ, "PYTHONPATH": args.src}
        for which in args.readers.split(","):
            out = subprocess.run([sys.executable, "-c", CHILD, which, str(d), str(ROOT)], env=env, capture_output=True,
                                 text=True, timeout=1800)
            line = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr[-500:]
            print(line, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
