"""The agent runs where the nodes are: its dependency set (without torch) is pure Python or checked to ship
aarch64 wheels, the image builds both architectures, and nothing the agent imports pulls torch in."""

from __future__ import annotations

import importlib.metadata as md
import subprocess
import sys
import tomllib
from pathlib import Path

from agent_support import REPO
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

HERE = Path(__file__).resolve().parent

PYPROJECT = REPO / "pyproject.toml"


def agent_requirements() -> list[str]:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    return [*project["dependencies"], *project["optional-dependencies"]["agent"]]


def test_agent_dependency_set_has_no_torch() -> None:
    reqs = agent_requirements()
    assert not [r for r in reqs if r.lower().startswith(("torch", "nvidia-cu", "triton"))]
    assert any(r.startswith("nvidia-ml-py") for r in reqs)


def agent_closure() -> dict[str, list[str]]:
    """Every distribution the agent installs (its requirements, transitively, markers evaluated), with the wheel
    tags of the installed copy, read from the installed metadata: no index is asked."""
    seen: dict[str, list[str]] = {}
    todo = [Requirement(r) for r in agent_requirements()]
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        dist = md.distribution(req.name)
        seen[name] = [line.split(":", 1)[1].strip() for line in (dist.read_text("WHEEL") or "").splitlines()
                      if line.startswith("Tag:")]
        for spec in dist.requires or ():
            sub = Requirement(spec)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in (req.extras or {""})):
                todo.append(sub)
    return seen


def test_every_compiled_agent_dependency_was_checked_for_aarch64_wheels() -> None:
    """A compiled dependency added to the agent is refused until someone has checked it ships aarch64 wheels
    (the fixture says how); pure-Python ones run anywhere. Offline: no test reaches a package index."""
    closure = agent_closure()
    assert "pydantic-core" in closure and "kr8s" in closure and "nvidia-ml-py" in closure
    assert not [n for n in closure if n.startswith(("torch", "nvidia-cu", "triton"))]
    compiled = sorted(n for n, tags in closure.items() if not tags or not all(t.endswith("-none-any") for t in tags))
    checked = {line.strip() for line in (HERE / "fixtures" / "aarch64-compiled-wheels.txt").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert [n for n in compiled if n not in checked] == []


def test_dockerfile_builds_both_architectures_from_the_agent_extra() -> None:
    text = (REPO / "Dockerfile.agent").read_text()
    assert "--platform linux/amd64,linux/arm64" in text
    assert "arm64) plat=manylinux2014_aarch64" in text and "amd64) plat=manylinux2014_x86_64" in text
    assert '"fabricguard[agent]"' in text and "USER 65532:65532" in text


def test_agent_imports_never_pull_torch(tmp_path: Path) -> None:
    code = ("import sys; import fabricguard.cli, fabricguard.agent.commands, fabricguard.agent.loop, "
            "fabricguard.agent.render, fabricguard.agent.server; assert 'torch' not in sys.modules, 'torch'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
