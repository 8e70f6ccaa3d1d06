"""Bad input to ``fabricguard controller`` is one line naming the option and exit 3, never a traceback."""

from __future__ import annotations

import socket
from pathlib import Path

from controller_support import kubeconfig
from typer.testing import CliRunner

from fabricguard.cli import app


def _run(*args: str):
    return CliRunner().invoke(app, ["controller", *args])


def test_bad_now_missing_lustre_and_unreachable_cluster(tmp_path: Path, profile_path: Path) -> None:
    r = _run("--profile", str(profile_path), "--once", "--now", "yesterday")
    assert r.exit_code == 3 and "--now 'yesterday' is not an RFC 3339 time" in r.output
    r = _run("--profile", str(profile_path), "--now", "2025-09-30T12:00:00Z")
    assert r.exit_code == 3 and "use it with --once" in r.output
    r = _run("--profile", str(profile_path), "--once", "--lustre-root", str(tmp_path / "nope"))
    assert r.exit_code == 3 and "--lustre-root" in r.output and "not a directory" in r.output
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kc = kubeconfig(tmp_path, f"http://127.0.0.1:{port}")
    r = _run("--profile", str(profile_path), "--once", "--kubeconfig", kc, "--lustre-root", str(tmp_path))
    assert r.exit_code == 3 and "no canary.image" in r.output and "--canary-image" in r.output
    r = _run("--profile", str(profile_path), "--once", "--kubeconfig", kc, "--lustre-root", str(tmp_path),
             "--canary-image", "reg.example.com/fabricguard-probe:1")
    assert r.exit_code == 3 and "cannot reach the cluster" in r.output and "Traceback" not in r.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: fabricguard.io/v1alpha1\nkind: PlatformProfile\n")
    r = _run("--profile", str(bad), "--once")
    assert r.exit_code == 3 and "Traceback" not in r.output


async def test_once_only_reads_while_another_controller_holds_the_lease(cluster, profile_path, lustre) -> None:
    from datetime import UTC, datetime

    from controller_support import LEASES, NOW, NS, canaries, run_once

    from fabricguard.controller.lease import micro

    k8s, kc = cluster
    k8s.objects[LEASES, NS, "fabricguard-controller"] = {
        "metadata": {"name": "fabricguard-controller", "namespace": NS},
        "spec": {"holderIdentity": "fabricguard-controller-7d9f-abcde", "leaseDurationSeconds": 3600,
                 "renewTime": micro(datetime.now(UTC))}}
    rc, doc = await run_once(kc, profile_path, NOW, lustre)
    assert doc["acted"] is False and canaries(k8s) == []
    assert doc["pools"]["gh200-roce"]["ready"] is False and rc == 1
    rc, doc = await run_once(kc, profile_path, NOW, lustre, "--force")
    assert doc["acted"] is True and len(canaries(k8s)) == 1


def test_the_controller_never_imports_torch() -> None:
    import subprocess
    import sys

    code = ("import sys, fabricguard.cli, fabricguard.controller.runner, fabricguard.controller.outcome, "
            "fabricguard.controller.manifests; assert 'torch' not in sys.modules, 'torch imported'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
