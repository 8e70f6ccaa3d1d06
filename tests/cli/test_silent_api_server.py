"""Against an API server that accepts TCP and never answers a byte, every command that talks to the cluster ends
by itself with exit 3 and one ``error:`` line naming the server: no hang, no traceback (real subprocesses).

``FABRICGUARD_API_TIMEOUT`` shortens the request timeouts so the suite stays fast; the defaults' figures (each
command within 45 s) are measured in bench/controller/README.md with ``bench/controller/silent_server.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kube_support import kubeconfig, silent_server

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
GKE = EXAMPLES / "profiles" / "gke-a3-ultra.yaml"
FROM = EXAMPLES / "transitions" / "gke-block-a.yaml"
TO = EXAMPLES / "transitions" / "gke-block-b.yaml"
CANARY = "reg.example.com/fabricguard-probe@sha256:" + "cd" * 32


def commands(kc: str, tmp: Path) -> dict[str, list[str]]:
    root = tmp / "root"
    root.mkdir(exist_ok=True)
    transition = ["--from", str(FROM), "--to", str(TO), "--kubeconfig", kc]
    return {
        "doctor": ["doctor", "--kubeconfig", kc],
        "snapshot": ["snapshot", str(tmp / "snap"), "--kubeconfig", kc],
        "agent --once": ["agent", "--once", "--node", "n1", "-p", str(GKE), "--root", str(root), "--kubeconfig", kc],
        "agent-sweep": ["agent-sweep", "--kubeconfig", kc],
        "controller --once": ["controller", "--once", "-p", str(GKE), "--kubeconfig", kc, "--canary-image", CANARY,
                              "--lustre-root", str(tmp)],
        "pool transition status": ["pool", "transition", "status", *transition],
        "pool transition plan": ["pool", "transition", "plan", *transition],
        "pool transition apply": ["pool", "transition", "apply", *transition],
        "pool transition abort": ["pool", "transition", "abort", *transition],
    }


def run_all(cmds: dict[str, list[str]], env: dict[str, str], limit: float) -> dict[str, tuple[int, str, float]]:
    """Start every command at once; (exit code, stderr, seconds) of each, killing any still running at ``limit``."""
    started = time.monotonic()
    procs = {name: subprocess.Popen([sys.executable, "-m", "fabricguard", *args], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
             for name, args in cmds.items()}
    out: dict[str, tuple[int, str, float]] = {}
    for name, p in procs.items():
        try:
            _o, err = p.communicate(timeout=max(0.1, limit - (time.monotonic() - started)))
            out[name] = (p.returncode, err, time.monotonic() - started)
        except subprocess.TimeoutExpired:
            p.kill()
            _o, err = p.communicate()
            out[name] = (-9, err, time.monotonic() - started)
    return out


@pytest.mark.slow
def test_every_cluster_command_ends_with_exit_3_naming_a_silent_server(tmp_path: Path) -> None:
    with silent_server() as server:
        kc = kubeconfig(tmp_path, server.url)
        env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "FABRICGUARD_API_TIMEOUT": "1"}
        results = run_all(commands(kc, tmp_path), env, limit=40)
        assert server.accepted, "the commands never reached the silent server"
    for name, (code, err, seconds) in results.items():
        assert code == 3, f"{name}: exit {code} after {seconds:.1f} s: {err}"
        lines = [ln for ln in err.splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("error:")]
        assert len(errors) == 1 and server.url in errors[0], f"{name}: {err}"
        assert "Traceback" not in err and ("no answer" in err or "did not finish" in err), f"{name}: {err}"
        assert seconds < 30, f"{name} took {seconds:.1f} s with 1 s request timeouts"


def test_a_bad_timeout_setting_is_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "FABRICGUARD_API_TIMEOUT": "soon"}
    with silent_server() as server:
        kc = kubeconfig(tmp_path, server.url)
        r = subprocess.run([sys.executable, "-m", "fabricguard", "agent-sweep", "--kubeconfig", kc],
                           capture_output=True, text=True, env=env, cwd=REPO, timeout=30)
    assert r.returncode == 3 and "FABRICGUARD_API_TIMEOUT" in r.stderr and "Traceback" not in r.stderr, r.stderr
