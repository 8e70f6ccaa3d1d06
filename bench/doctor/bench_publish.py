"""Peak memory of ``fabricguard snapshot DIR --publish NS/NAME`` against a 5,000-node cluster (issue 17 §6).

A server process serves ``gen_snapshot.py``'s 5,000-node, 60,000-pod snapshot through kmock's Kubernetes
emulator over real HTTP, paged like the API server (``limit``/``continue``, 500 a page; kmock itself does not
page). Then ``snapshot`` runs as its own child process and its peak RSS is read from ``getrusage`` of the
waited-for child. The published reference (the DaemonSets and ConfigMaps ``doctor diff`` compares) is about
1 KiB; everything else is only written to DIR.

    .venv/bin/python bench/doctor/gen_snapshot.py bench/out/doctor-5k
    .venv/bin/python bench/doctor/bench_publish.py bench/out/doctor-5k [--src OTHER/src]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SERVER = r"""
import asyncio, json, sys
from pathlib import Path
import aiohttp.web
from kmock import KubernetesEmulator, Server

snap, port_file = Path(sys.argv[1]), Path(sys.argv[2])
RES = {"Node": "v1/nodes", "Pod": "v1/pods", "Event": "v1/events", "DaemonSet": "apps/v1/daemonsets",
       "ControllerRevision": "apps/v1/controllerrevisions", "ConfigMap": "v1/configmaps"}

class Paging(KubernetesEmulator):
    async def _serve_list(self, request):
        body = await super()._serve_list(request)
        q = request.params if hasattr(request, "params") else {}
        limit = int(q.get("limit") or 0)
        start = int(q.get("continue") or 0)
        items = body["items"]
        if limit and start + limit < len(items):
            return {"metadata": {"resourceVersion": "1", "continue": str(start + limit)},
                    "items": items[start:start + limit]}
        return {"metadata": {"resourceVersion": "1"}, "items": items[start:] if limit else items}

async def main():
    k8s = Paging()
    async with k8s, Server(k8s) as server:
        k8s["get /version/"] << {"major": "1", "minor": "33", "gitVersion": "v1.33.1"}
        k8s.resources["v1/configmaps"].verbs = {"list", "watch", "get", "create", "patch", "delete", "update"}
        n = 0
        for f in sorted(snap.glob("*.json")):
            doc = json.loads(f.read_text())
            for obj in doc.get("items", []):
                res = RES.get(obj.get("kind"))
                if res is None:
                    continue
                m = obj["metadata"]
                k8s.objects[res, m.get("namespace"), m["name"]] = {k: v for k, v in obj.items()
                                                                   if k not in ("kind", "apiVersion")}
                n += 1
        port_file.write_text(json.dumps({"url": str(server.url).rstrip("/"), "objects": n}))
        await asyncio.Event().wait()

asyncio.run(main())
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("snapshot", type=Path)
    ap.add_argument("--src", default=str(ROOT / "src"))
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="fg-publish-"))
    port_file = tmp / "server.json"
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(args.snapshot), str(port_file)])
    try:
        for _ in range(1200):
            if port_file.exists() and port_file.stat().st_size:
                break
            time.sleep(0.5)
        info = json.loads(port_file.read_text())
        kc = tmp / "kubeconfig"
        kc.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "k",
            "clusters": [{"name": "k", "cluster": {"server": info["url"]}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "k", "context": {"cluster": "k", "user": "u"}}]}))
        env = {**os.environ, "PYTHONPATH": args.src}
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "fabricguard", "snapshot", str(tmp / "out"), "--kubeconfig",
                              str(kc), "--publish", "fabricguard-system/staging-reference"],
                             env=env, capture_output=True, text=True, timeout=3600)
        secs = time.perf_counter() - t0
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(json.dumps({"objects_served": info["objects"], "exit": out.returncode, "seconds": round(secs, 1),
                          "peak_rss_mib": round(peak, 1), "said": (out.stdout + out.stderr).strip()[-400:]}))
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
