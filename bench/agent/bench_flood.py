"""The agent's /metrics port under a connection flood: threads, memory, and whether /healthz still answers.

Starts ``python -m fabricguard.agent`` as the DaemonSet runs it (against kmock's emulated API server, as
``bench_agent.py`` does), waits for its first report, then opens ``--connections`` TCP connections to its
``--listen`` port that send nothing (or, with ``--trickle``, one header byte a second), holds them for
``--hold`` seconds, and reads the agent's thread count and memory from /proc while polling ``/healthz`` and
``/metrics`` on fresh connections. ``--server-src DIR`` runs another source tree (an older commit's src/).

    PYTHONPATH=src python bench/agent/bench_flood.py [--connections 2300] [--hold 20] [--server-src DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tests" / "agent"), str(REPO / "tests"), str(Path(__file__).parent)]

from agent_support import GKE, HEALTHY, NODE_NAME, ApiServer, healthy_node  # noqa: E402
from bench_agent import free_port  # noqa: E402
from kmock import Server  # noqa: E402

from kube_support import kubeconfig  # noqa: E402


def status(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM", "Threads"):
            out[k] = int(v.split()[0])
    return out


async def get(port: int, path: str, timeout: float = 5.0) -> tuple[int, float]:
    """(HTTP status or 0 when no answer within ``timeout``, seconds) for one GET on a fresh connection."""
    t = time.monotonic()
    try:
        async with asyncio.timeout(timeout):
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            line = await r.readline()
            await r.read()
            w.close()
        return int(line.split()[1]), time.monotonic() - t
    except (TimeoutError, OSError, IndexError, ValueError):
        return 0, time.monotonic() - t


async def flood(args: argparse.Namespace) -> dict[str, object]:
    k8s = ApiServer()
    k8s.tokens = {"bench": {"username": "system:serviceaccount:fabricguard-system:fabricguard-agent"}}
    async with k8s, Server(k8s) as server:
        k8s["get /version/"] << {"major": "1", "minor": "33", "gitVersion": "v1.33.5"}
        k8s.put_node(healthy_node())
        tmp = Path(tempfile.mkdtemp())
        kubeconfig(tmp, str(server.url).rstrip("/"), "bench")
        port = free_port()
        root = tmp / "root"
        shutil.copytree(HEALTHY / "root", root)
        src = args.server_src.resolve() if args.server_src else REPO / "src"
        # An older tree reads its own profile (the profile schema moves with the code).
        profile = src.parent / "examples" / "profiles" / GKE.name
        cmd = [sys.executable, "-m", "fabricguard.agent", "--node", NODE_NAME, "--profile", str(profile),
               "--root", str(root), "--nvml-json", str(HEALTHY / "nvml.json"), "--interval", "5", "--passes", "1",
               "--listen", f"127.0.0.1:{port}", "--kubeconfig", str(tmp / "kubeconfig")]
        log = (tmp / "agent.log").open("wb")
        proc = subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": str(src)}, stdout=subprocess.DEVNULL,
                                stderr=log)
        conns: list[asyncio.StreamWriter] = []
        try:
            for _ in range(100):
                await asyncio.sleep(0.2)
                if (await get(port, "/healthz", 1.0))[0] == 200 and any(p[0] == "status" for p in k8s.patches):
                    break
            if proc.poll() is not None:
                raise RuntimeError((tmp / "agent.log").read_text()[-2000:])
            before = status(proc.pid)
            opened = failed = 0
            for _ in range(args.connections):
                try:
                    _, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 2)
                    conns.append(w)
                    opened += 1
                except (OSError, TimeoutError):
                    failed += 1
            peak_threads = 0
            probes: list[tuple[str, int, float]] = []
            end = time.monotonic() + args.hold
            while time.monotonic() < end:
                if args.trickle:
                    for w in conns:
                        if not w.is_closing():
                            w.write(b"X")
                st = status(proc.pid)
                peak_threads = max(peak_threads, st["Threads"])
                for path in ("/healthz", "/metrics"):
                    code, took = await get(port, path)
                    probes.append((path, code, took))
                await asyncio.sleep(1.0)
            during = status(proc.pid)
            still_open = sum(1 for w in conns if not w.is_closing() and not w.transport.is_closing())
        finally:
            for w in conns:
                w.close()
            proc.terminate()
            await asyncio.to_thread(proc.wait, 10)
            shutil.rmtree(tmp)
        answered = [p for p in probes if p[1] == 200]
        return {
            "server_src": str(args.server_src or "this tree"),
            "connections_opened": opened, "connections_refused": failed, "connections_still_open": still_open,
            "hold_s": args.hold,
            "trickle": args.trickle,
            "threads_before": before["Threads"], "threads_peak": peak_threads, "threads_end": during["Threads"],
            "rss_before_MiB": round(before["VmRSS"] / 1024, 1), "rss_end_MiB": round(during["VmRSS"] / 1024, 1),
            "rss_peak_MiB": round(during["VmHWM"] / 1024, 1),
            "probes": len(probes), "probes_answered_200": len(answered),
            "probe_max_ms": round(max(p[2] for p in probes) * 1e3, 1) if probes else None,
            "probe_status_counts": {str(c): sum(1 for p in probes if p[1] == c) for c in {p[1] for p in probes}},
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=2300)
    ap.add_argument("--hold", type=float, default=20.0)
    ap.add_argument("--trickle", action="store_true", help="send one byte a second on every connection")
    ap.add_argument("--server-src", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, args.connections + 512)), hard))
    res = asyncio.run(flood(args))
    print(json.dumps(res, indent=2))
    if args.json:
        args.json.write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
