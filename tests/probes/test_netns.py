"""Proof on real links: one gloo rank in each of two network namespaces joined by a veth pair.

Unshaped, the collective probe passes the floor; shaped with tc (netem rate limit + delay) it reports a lower
busbw and fails the floor. Every address lives inside the two namespaces; nothing leaves this machine.
Needs root and ``ip netns`` (CI runs as root); skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.root, pytest.mark.slow]

PROFILE = """\
apiVersion: fabricguard.io/v1alpha1
kind: PlatformProfile
metadata: {name: veth-lab, environment: dev}
spec:
  pools:
  - name: veth
    nodeSelector: {kubernetes.io/hostname: lab}
    gpusPerNode: 1
    fabric: {type: none}
    baseline: {allReduceBusBwGBps: 0.2, floorFraction: 0.5}   # floor 0.1 GB/s
"""
ADDR = ("10.254.77.1", "10.254.77.2")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@pytest.fixture
def veth_pair():
    if os.geteuid() != 0:
        pytest.skip("needs root to create network namespaces (CI runs as root)")
    if shutil.which("ip") is None or shutil.which("tc") is None:
        pytest.skip("iproute2 (ip, tc) is not installed; make deps installs it")
    tag = uuid.uuid4().hex[:6]
    ns = (f"fg{tag}a", f"fg{tag}b")
    dev = (f"fg{tag}x", f"fg{tag}y")
    try:
        try:
            _ip("netns", "add", ns[0])
        except subprocess.CalledProcessError as e:
            pytest.skip(f"ip netns is unavailable here: {e.stderr.strip()}")
        _ip("netns", "add", ns[1])
        _ip("link", "add", dev[0], "type", "veth", "peer", "name", dev[1])
        for i in (0, 1):
            _ip("link", "set", dev[i], "netns", ns[i])
            _ip("-n", ns[i], "addr", "add", f"{ADDR[i]}/24", "dev", dev[i])
            _ip("-n", ns[i], "link", "set", dev[i], "up")
            _ip("-n", ns[i], "link", "set", "lo", "up")
        yield ns, dev
    finally:
        for n in ns:
            subprocess.run(["ip", "netns", "del", n], capture_output=True)


def _shape(ns: str, dev: str) -> str:
    """40 Mbit/s (far below the 0.1 GB/s floor) and 5 ms each way with netem; tbf (rate only) where the kernel
    has no sch_netem. Returns the qdisc used."""
    tc = ["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root"]
    if subprocess.run([*tc, "netem", "rate", "40mbit", "delay", "5ms"], capture_output=True).returncode == 0:
        return "netem"
    subprocess.run(
        [*tc, "tbf", "rate", "40mbit", "burst", "32kbit", "latency", "400ms"], check=True, capture_output=True
    )
    return "tbf"


def _run_pair(ns, dev, tmp: Path, port: int) -> tuple[int, dict]:
    tmp.mkdir(parents=True, exist_ok=True)
    prof = tmp / "profile.yaml"
    prof.write_text(PROFILE)
    procs = []
    for rank in (0, 1):
        env = {
            **os.environ,
            "RANK": str(rank),
            "WORLD_SIZE": "2",
            "LOCAL_RANK": "0",
            "MASTER_ADDR": ADDR[0],
            "MASTER_PORT": str(port),
            "GLOO_SOCKET_IFNAME": dev[rank],
        }
        cmd = [
            "ip", "netns", "exec", ns[rank], sys.executable, "-m", "fabricguard", "probe", "collective",
            "--backend", "gloo", "-b", "1M", "-e", "4M", "-f", "4", "-w", "1", "-n", "3",
            "--profile", str(prof), "--out", str(tmp / f"logs{rank}"), "--json", "--timeout", "120",
        ]  # fmt: skip
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=180) for p in procs]
    assert procs[1].returncode in (0, 1), outs[1][1][-2000:]
    return procs[0].returncode, json.loads(outs[0][0])


def test_veth_unshaped_passes_and_shaped_fails_the_floor(veth_pair, tmp_path):
    ns, dev = veth_pair
    rc, fast = _run_pair(ns, dev, tmp_path / "fast", 29611)
    assert not fast["failed"], fast["error"]
    peak_fast = max(r["busbw_gbps"] for r in fast["rows"])
    assert fast["hosts"] and fast["transport"] == "socket"
    assert rc == 0 and fast["judgement"]["status"] == "pass", fast["judgement"]

    qdiscs = [_shape(ns[i], dev[i]) for i in (0, 1)]
    qdisc = qdiscs[0]
    rc, slow = _run_pair(ns, dev, tmp_path / "slow", 29612)
    peak_slow = max(r["busbw_gbps"] for r in slow["rows"])
    assert all(r["wrong"] == 0 for r in slow["rows"])
    print(f"veth all_reduce peak busbw: unshaped {peak_fast:.3f} GB/s, shaped ({qdisc}) {peak_slow:.4f} GB/s")
    assert peak_slow < peak_fast / 5, (peak_slow, peak_fast)
    checks = {c["name"]: c for c in slow["judgement"]["checks"]}
    assert (
        checks["collective.busbw"]["status"] == "degraded" and "< floor 0.100" in checks["collective.busbw"]["detail"]
    )
    assert rc == 1 and slow["judgement"]["status"] == "degraded"
