"""Fixtures of the controller tests: the 271-day incident in kmock's Kubernetes emulator (real HTTP)."""

from __future__ import annotations

from pathlib import Path

import pytest
from controller_support import PROFILE, apply_aware_emulator, kubeconfig, load_incident
from kmock import Server


@pytest.fixture()
async def cluster(tmp_path: Path):
    async with apply_aware_emulator() as k8s, Server(k8s) as server:
        # kr8s asks for "/version/" (trailing slash); kmock serves only "/version".
        k8s["get /version/"] << {"major": "1", "minor": "31", "gitVersion": "v1.31.6", "platform": "linux/amd64"}
        load_incident(k8s)
        yield k8s, kubeconfig(tmp_path, str(server.url).rstrip("/"))


@pytest.fixture()
def profile_path(tmp_path: Path) -> Path:
    p = tmp_path / "profile.yaml"
    p.write_text(PROFILE)
    return p


@pytest.fixture()
def lustre(tmp_path: Path) -> Path:
    d = tmp_path / "lustre"
    d.mkdir()
    return d
