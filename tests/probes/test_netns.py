"""Proof on real links: one gloo rank in each of two network namespaces joined by a veth pair.

Unshaped, the collective probe passes the floor; shaped with tc (netem rate limit + delay) it reports a lower
busbw and fails the floor. Every address lives inside the two namespaces; nothing leaves this machine.
Needs root and ``ip netns`` (CI runs as root); skipped with the reason otherwise. Each rank is the CLI run by
``ip netns exec`` as a client of tests/zygote.py: the same entry point in that namespace, forked from a Python
that imported torch once for the test worker instead of once per rank.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from netns_support import shape
from netns_support import veth_pair as netns_veth_pair

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


@pytest.fixture
def veth_pair():
    with netns_veth_pair("fg", ADDR) as pair:
        yield pair


def _run_pair(ns, dev, tmp: Path, port: int, fabricguard: Path) -> tuple[int, dict]:
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
            "ip", "netns", "exec", ns[rank], str(fabricguard), "probe", "collective",
            "--backend", "gloo", "-b", "1M", "-e", "4M", "-f", "4", "-w", "1", "-n", "3",
            "--profile", str(prof), "--out", str(tmp / f"logs{rank}"), "--json", "--timeout", "120",
        ]  # fmt: skip
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=180) for p in procs]
    assert procs[1].returncode in (0, 1), outs[1][1][-2000:]
    return procs[0].returncode, json.loads(outs[0][0])


def test_veth_unshaped_passes_and_shaped_fails_the_floor(veth_pair, tmp_path, cli_zygote):
    ns, dev = veth_pair
    fabricguard = cli_zygote.bin / "fabricguard"  # the CLI, forked from a Python that already imported torch
    rc, fast = _run_pair(ns, dev, tmp_path / "fast", 29611, fabricguard)
    assert not fast["failed"], fast["error"]
    peak_fast = max(r["busbw_gbps"] for r in fast["rows"])
    assert fast["hosts"] and fast["transport"] == "socket"
    assert rc == 0 and fast["judgement"]["status"] == "pass", fast["judgement"]

    qdiscs = [shape(ns[i], dev[i]) for i in (0, 1)]
    qdisc = qdiscs[0]
    rc, slow = _run_pair(ns, dev, tmp_path / "slow", 29612, fabricguard)
    peak_slow = max(r["busbw_gbps"] for r in slow["rows"])
    assert all(r["wrong"] == 0 for r in slow["rows"])
    print(f"veth all_reduce peak busbw: unshaped {peak_fast:.3f} GB/s, shaped ({qdisc}) {peak_slow:.4f} GB/s")
    assert peak_slow < peak_fast / 5, (peak_slow, peak_fast)
    checks = {c["name"]: c for c in slow["judgement"]["checks"]}
    assert (
        checks["collective.busbw"]["status"] == "degraded" and "< floor 0.100" in checks["collective.busbw"]["detail"]
    )
    assert rc == 1 and slow["judgement"]["status"] == "degraded"
