"""Fixtures of the agent tests: the healthy A3 Ultra node, the recorded H200 node, and a live API server."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from agent_support import AGENT_USER, GKE, HEALTHY, NODE_NAME, ApiServer, agent_rbac, h200_tree, healthy_node
from kmock import Server

from fabricguard.profile import PlatformProfile, load_profile


@pytest.fixture()
def gke() -> PlatformProfile:
    return load_profile(GKE)


@pytest.fixture()
def healthy_root(tmp_path: Path) -> Path:
    """A copy of the healthy node's tree that a test may break."""
    dst = tmp_path / "healthy"
    shutil.copytree(HEALTHY / "root", dst)
    return dst


@pytest.fixture()
def h200_root(tmp_path: Path) -> Path:
    return h200_tree(tmp_path)


@pytest.fixture()
async def apiserver(tmp_path: Path):
    """(emulator, url) with the healthy node stored and tokens for an agent on it and on another node."""
    k8s = ApiServer(rbac=agent_rbac())  # the rendered agent and sweep roles, enforced on every request
    k8s.tokens = {
        "agent-own": {"username": AGENT_USER, "extra": {"authentication.kubernetes.io/node-name": [NODE_NAME]}},
        "agent-other": {"username": AGENT_USER,
                        "extra": {"authentication.kubernetes.io/node-name": ["gke-a3u-pool-1-7f3c9a2e-0002"]}},
        "admin": {"username": "kubernetes-admin", "groups": ["system:masters"]},
        "sweep": {"username": "system:serviceaccount:fabricguard-system:fabricguard-agent-sweep"},
    }
    async with k8s, Server(k8s) as server:
        # kr8s asks for "/version/" (a real API server accepts the slash); kmock serves "/version" only.
        k8s["get /version/"] << {"major": "1", "minor": "33", "gitVersion": "v1.33.5", "platform": "linux/amd64"}
        k8s.put_node(healthy_node())
        yield k8s, str(server.url).rstrip("/")
