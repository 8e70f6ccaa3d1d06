"""Replays the block-a -> block-b walkthrough of README.md against kmock's Kubernetes emulator and prints each
command with its real output: ``.venv/bin/python examples/transitions/walkthrough.py``.

The emulated cluster holds what the README describes: the old pool's two nodes running a 2-node JobSet, the new
pool's two nodes with FabricReady=True, Kueue's objects rendered from gke-block-a.yaml and a passed canary.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
import tempfile
from pathlib import Path

from kmock import KubernetesEmulator, Server
from typer.testing import CliRunner

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1] / "tests" / "placement"), str(HERE.parents[1] / "tests")]

from test_transition import seed  # noqa: E402  (the same cluster the tests use)

from fabricguard.cli import app  # noqa: E402


def run(args: list[str]) -> int:
    shown = [a if not a.startswith("/") else Path(a).name for a in args]
    print(f"$ fabricguard {shlex.join(shown)}")
    r = CliRunner().invoke(app, args, env={"COLUMNS": "110"})
    sys.stdout.write(r.stdout + r.stderr)
    print(f"(exit {r.exit_code})\n")
    return r.exit_code


async def main() -> None:
    async with KubernetesEmulator() as k8s, Server(k8s) as server:
        seed(k8s, gang="Running")
        cfg = Path(tempfile.mkdtemp()) / "kubeconfig"
        cfg.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": str(server.url).rstrip("/")}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
        common = ["--from", str(HERE / "gke-block-a.yaml"), "--to", str(HERE / "gke-block-b.yaml"),
                  "--kubeconfig", str(cfg)]
        for args in (["pool", "transition", "plan", *common],
                     ["pool", "transition", "apply", *common, "--now", "2026-11-30T12:00:00Z"]):
            await asyncio.to_thread(run, args)
        for name in ("qwen-0", "qwen-1"):
            k8s.objects["v1/pods", "ml-search", name].raw["status"]["phase"] = "Succeeded"
        print("# ... the 2-node JobSet finishes on its own ...\n")
        for args in (["pool", "transition", "apply", *common, "--now", "2026-11-30T14:00:00Z"],
                     ["pool", "transition", "status", *common]):
            await asyncio.to_thread(run, args)


if __name__ == "__main__":
    asyncio.run(main())
