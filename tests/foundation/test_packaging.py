"""What the images are built from: pinned dependencies, the license the package declares, a canary per fabric."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _name(req: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0]).lower()


def test_every_runtime_dependency_is_pinned_in_constraints() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not name==version"
            pins[_name(name)] = version
    wanted = [_name(r) for r in meta["dependencies"] + meta["optional-dependencies"]["agent"]]
    assert [n for n in wanted if n not in pins] == []


def test_images_install_with_the_constraints_and_ship_the_license() -> None:
    for f in ("Dockerfile", "Dockerfile.agent", "Dockerfile.canary"):
        text = (ROOT / f).read_text()
        assert "constraints.txt" in text and "-c constraints.txt" in text, f
    assert "Apache License" in (ROOT / "LICENSE").read_text()[:200]
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == "Apache-2.0"


def test_the_canary_has_a_target_per_fabric_on_a_multi_arch_base() -> None:
    text = (ROOT / "Dockerfile.canary").read_text()
    targets = set(re.findall(r"^FROM \S+ AS (\S+)$", text, re.M))
    assert {"ib", "efa", "gib", "inspector", "inspector-init"} <= targets
    assert re.search(r"^ARG TORCH_IMAGE=nvcr\.io/nvidia/pytorch:", text, re.M)  # amd64 + arm64, rdma-core inside
    assert "aws-ofi-nccl" in text and "libmlx5" in text and "--platform linux/amd64,linux/arm64" in text
    assert text.rstrip().splitlines()[-3].startswith("FROM common AS ib")  # the default target
