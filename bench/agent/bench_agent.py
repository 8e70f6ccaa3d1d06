"""Cost of the node agent on a node: resident memory and CPU per check interval, and one run's duration.

The agent runs as its own process (``python -m fabricguard.agent``), exactly as in the DaemonSet, against an
API server on loopback (kmock's emulator with the Node patch semantics from tests/agent/agent_support.py),
checking either the healthy A3 Ultra fixture tree or this machine's real ``/``. Every ``--interval`` it
reads the Node, runs every check, patches the condition. We sample /proc/PID/status (VmRSS, VmHWM) and
/proc/PID/stat (utime + stime) and read the run-duration histogram from its own /metrics.

    PYTHONPATH=src python bench/agent/bench_agent.py [--seconds 40] [--interval 2]

Prints a markdown table (bench/agent/README.md holds the figures of the last run).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tests" / "agent"), str(REPO / "tests")]

from agent_support import GKE, HEALTHY, NODE_NAME, ApiServer, healthy_node  # noqa: E402
from kmock import Server  # noqa: E402

from kube_support import kubeconfig  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def proc_status(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"):
            out[k] = int(v.split()[0])  # KiB
    return out


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def metrics(port: int) -> dict[str, float]:
    for attempt in range(20):  # a loaded machine: the bounded server may shed a scrape (503); scrape again
        try:
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            break
        except urllib.error.HTTPError:
            if attempt == 19:
                raise
            time.sleep(0.5)
    out = {}
    for line in text.splitlines():
        if line.startswith("fabricguard_agent_run_duration_seconds_") and "{" not in line:
            name, value = line.split()
            out[name.rsplit("_", 1)[1]] = float(value)
    return out


async def measure(label: str, root: Path, nvml: Path | None, seconds: float, interval: float,
                  heartbeat: float | None = None) -> dict[str, object]:
    k8s = ApiServer()
    k8s.tokens = {"bench": {"username": "system:serviceaccount:fabricguard-system:fabricguard-agent"}}
    async with k8s, Server(k8s) as server:
        k8s["get /version/"] << {"major": "1", "minor": "33", "gitVersion": "v1.33.5"}
        k8s.put_node(healthy_node())
        tmp = Path(tempfile.mkdtemp())
        kubeconfig(tmp, str(server.url).rstrip("/"), "bench")
        port = free_port()
        cmd = [sys.executable, "-m", "fabricguard.agent", "--node", NODE_NAME, "--profile", str(GKE),
               "--root", str(root), "--interval", str(interval), "--passes", "1", "--listen", f"127.0.0.1:{port}",
               "--kubeconfig", str(tmp / "kubeconfig")]
        if heartbeat is not None:
            cmd += ["--heartbeat", str(heartbeat)]
        if nvml:
            cmd += ["--nvml-json", str(nvml)]
        env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
        t_start = time.monotonic()
        log = (tmp / "agent.log").open("wb")
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log)
        try:
            while True:  # first run done: /metrics shows one observation
                await asyncio.sleep(0.2)
                try:
                    if metrics(port).get("count", 0) >= 1:
                        break
                except OSError:
                    pass
                if proc.poll() is not None:
                    raise RuntimeError((tmp / "agent.log").read_text())
            startup = time.monotonic() - t_start
            m0, c0 = metrics(port), cpu_seconds(proc.pid)
            w0 = len([p for p in k8s.patches if p[0] == "status"])
            rss0 = proc_status(proc.pid)["VmRSS"]
            await asyncio.sleep(seconds)
            m1, c1, st = metrics(port), cpu_seconds(proc.pid), proc_status(proc.pid)
        finally:
            t_term = time.monotonic()
            proc.terminate()  # SIGTERM, as the kubelet sends it: the agent must stop promptly
            await asyncio.to_thread(proc.wait, 10)  # keep serving the API server meanwhile
            stop_s = time.monotonic() - t_term
            log.close()
            shutil.rmtree(tmp)
        runs = m1["count"] - m0["count"]
        writes = len([p for p in k8s.patches if p[0] == "status"]) - w0
        cond = next(c for c in k8s.node(NODE_NAME)["status"]["conditions"] if c["type"] == "FabricReady")
        return {
            "label": label,
            "runs": int(runs),
            "startup_s": startup,
            "rss_after_first_MiB": rss0 / 1024,
            "rss_end_MiB": st["VmRSS"] / 1024,
            "rss_peak_MiB": st["VmHWM"] / 1024,
            "cpu_per_interval_ms": (c1 - c0) / runs * 1000 if runs else float("nan"),
            "run_mean_ms": (m1["sum"] - m0["sum"]) / runs * 1000 if runs else float("nan"),
            "condition": f"{cond['status']} ({cond['reason']})",
            "status_writes": writes,
            # the same ratio of writes to runs at the DaemonSet's 60 s interval: runs per hour x writes per run
            "writes_per_hour_at_60s": writes / runs * 60 if runs else float("nan"),
            "stop_s": stop_s,
        }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=40)
    ap.add_argument("--interval", type=float, default=2)
    ap.add_argument("--heartbeat", type=float, default=None,
                    help="the agent's --heartbeat; scale it with --interval (5 runs: 300 s at the real 60 s)")
    ap.add_argument("--writes-only", action="store_true", help="only the fixture row, with its write counts")
    a = ap.parse_args()
    rows = [
        asyncio.run(measure("healthy A3 Ultra fixture, recorded NVML", HEALTHY / "root", HEALTHY / "nvml.json",
                            a.seconds, a.interval, a.heartbeat)),
    ]
    if a.writes_only:
        r = rows[0]
        print(f"{r['runs']} runs, {r['status_writes']} FabricReady writes: {r['writes_per_hour_at_60s']:.1f} "
              "writes per node per hour at the 60 s interval")
        return
    rows.append(asyncio.run(measure("this machine's real / (no RDMA, no GPU: live NVML absent)", Path("/"), None,
                                    a.seconds, a.interval, a.heartbeat)))
    print(f"interval {a.interval:g} s, measured over {a.seconds:g} s after the first run; Python "
          f"{sys.version.split()[0]}, {os.cpu_count()} CPUs\n")
    print("| root | runs | start to first report s | RSS after first run MiB | RSS end MiB | peak RSS MiB "
          "| CPU per interval ms | one run (checks + patch) ms | SIGTERM to exit s | condition |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['label']} | {r['runs']} | {r['startup_s']:.2f} | {r['rss_after_first_MiB']:.1f} | "
              f"{r['rss_end_MiB']:.1f} | {r['rss_peak_MiB']:.1f} | {r['cpu_per_interval_ms']:.0f} | "
              f"{r['run_mean_ms']:.0f} | {r['stop_s']:.2f} | {r['condition']} |")


if __name__ == "__main__":
    main()
