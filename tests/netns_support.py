"""Two network namespaces joined by a veth pair, and tc shaping of their link: the set-up the probe and the
controller's canary tests share (root only; they skip with the reason elsewhere)."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@contextmanager
def veth_pair(prefix: str, addrs: tuple[str, str]) -> Iterator[tuple[tuple[str, str], tuple[str, str]]]:
    """``(namespaces, devices)``: ``addrs[i]/24`` on device i in namespace i, both up; removed afterwards (with
    any ``/etc/netns/<ns>`` a test wrote). Names are unique per run, so parallel test runs do not collide."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create network namespaces (CI runs as root)")
    if shutil.which("ip") is None or shutil.which("tc") is None:
        pytest.skip("iproute2 (ip, tc) is not installed; make deps installs it")
    tag = uuid.uuid4().hex[:6]
    ns = (f"{prefix}{tag}a", f"{prefix}{tag}b")
    dev = (f"{prefix}{tag}x", f"{prefix}{tag}y")
    try:
        try:
            ip("netns", "add", ns[0])
        except subprocess.CalledProcessError as e:
            pytest.skip(f"ip netns is unavailable here: {e.stderr.strip()}")
        ip("netns", "add", ns[1])
        ip("link", "add", dev[0], "type", "veth", "peer", "name", dev[1])
        for i in (0, 1):
            ip("link", "set", dev[i], "netns", ns[i])
            ip("-n", ns[i], "addr", "add", f"{addrs[i]}/24", "dev", dev[i])
            ip("-n", ns[i], "link", "set", dev[i], "up")
            ip("-n", ns[i], "link", "set", "lo", "up")
        yield ns, dev
    finally:
        for n in ns:
            subprocess.run(["ip", "netns", "del", n], capture_output=True)
            shutil.rmtree(f"/etc/netns/{n}", ignore_errors=True)


def shape(ns: str, dev: str) -> str:
    """40 Mbit/s and 5 ms each way with netem; tbf (rate only) where the kernel has no sch_netem. Returns the
    qdisc used."""
    tc = ["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root"]
    if subprocess.run([*tc, "netem", "rate", "40mbit", "delay", "5ms"], capture_output=True).returncode == 0:
        return "netem"
    subprocess.run([*tc, "tbf", "rate", "40mbit", "burst", "32kbit", "latency", "400ms"], check=True,
                   capture_output=True)
    return "tbf"
