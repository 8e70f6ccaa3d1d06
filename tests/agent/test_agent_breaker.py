"""An agent that keeps its own taints (``--manage-taints``, and every agent of a startup-taint pool) honours the
controller's blast-radius breakers (issue 24): while its pool's breaker is open for every check its node fails,
it does not put back the taints the controller lifted; closed (a person's reset), it taints again.

Live: kmock's emulator over real HTTP with the rendered agent ClusterRole and the agent's ValidatingAdmissionPolicy
enforced, the pool's FabricValidation stored as the controller writes ``status.breakers`` (``breaker.to_dict``).
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from agent_support import GKE, IMAGE_REF, NODE_NAME, Rbac, healthy_node
from test_agent_live import break_port, make_agent, taint_keys
from typer.testing import CliRunner

from fabricguard import breaker, names
from fabricguard.agent.commands import _print_human
from fabricguard.agent.render import admission_policy, agent_manifests
from fabricguard.agent.taints import breaker_withheld
from fabricguard.cli import app
from fabricguard.console import envelope
from fabricguard.profile import load_profile
from json_schema_check import schema_errors

FVS = f"{names.FV_API}/{names.FV_PLURAL}"
POOL = "h200-rdma"
SINCE = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def _serve_crd(k8s: Any) -> None:
    k8s.resources[FVS].verbs = {"get", "list", "watch", "patch"}  # the CRD is installed: the API serves its kind


def _fv(states: dict[str, breaker.BreakerState]) -> dict[str, Any]:
    return {"apiVersion": names.FV_API, "kind": names.FV_KIND, "metadata": {"name": POOL},
            "spec": {"pool": POOL}, "status": {"breakers": [{"check": c, **s.to_dict()} for c, s in states.items()]}}


def _readiness(k8s: Any) -> list[str]:
    return [k for k in taint_keys(k8s) if k.startswith("readiness.k8s.io/")]


def _lift(k8s: Any) -> None:
    """What the controller does to a withheld node (``controller/blast.py``): its readiness taints removed."""
    node = k8s.node(NODE_NAME)
    node["spec"]["taints"] = [t for t in node["spec"].get("taints", []) if not t["key"].startswith("readiness.k8s.io/")]
    k8s.put_node(node)


def test_withheld_only_when_every_failing_check_is_behind_an_open_breaker() -> None:
    cond = {"type": "FabricReady", "status": "False", "reason": "ChecksFailed",
            "message": "2 check(s) failed: rdma.ports, rdma.resources | rdma.ports: mlx5_3 down; rdma.resources: x"}
    assert breaker_withheld(cond, ["rdma.ports", "rdma.resources", "gpu.count"]) == ["rdma.ports", "rdma.resources"]
    assert breaker_withheld(cond, ["rdma.ports"]) == []  # one failure the breaker does not cover: taint
    assert breaker_withheld({**cond, "status": "True"}, ["rdma.ports"]) == []
    assert breaker_withheld(cond, []) == []


async def test_an_open_breaker_keeps_the_agent_from_re_tainting(apiserver, tmp_path: Path, healthy_root: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    k8s, url = apiserver
    profile = load_profile(GKE)
    k8s.rbac = Rbac.from_manifests(agent_manifests(profile, GKE.read_text(), IMAGE_REF, manage_taints=True))
    k8s.policies = admission_policy("fabricguard-system")
    k8s.put_node(healthy_node())
    _serve_crd(k8s)
    agent = await make_agent(tmp_path, url, healthy_root, manage_taints=True)
    # Closed (no FabricValidation yet, then one with no open breaker): a failing node is tainted.
    break_port(healthy_root)
    res = await agent.run_once()
    assert res.reported.status == "False" and res.errors == [] and res.withheld == [], res.errors
    assert _readiness(k8s)
    failing = sorted(agent_condition_checks(res.condition))
    assert failing, res.condition
    # The controller opens the pool's breaker for those checks and lifts the node's taint.
    opened = breaker.BreakerState(open=True, since=SINCE, reason="3 nodes newly failing", members=(NODE_NAME,))
    k8s.objects[FVS, None, POOL] = _fv(dict.fromkeys(failing, opened))
    _lift(k8s)
    for _ in range(2):  # run after run, the taint stays off
        res = await agent.run_once()
        assert res.reported.status == "False" and res.errors == [], res.errors
        assert res.withheld == failing and not _readiness(k8s), _readiness(k8s)
        shown = envelope("AgentReport", {"verdict": "failed", **res.to_dict(NODE_NAME)})  # `agent --once`
        assert shown["breakerWithheld"] == failing and schema_errors("AgentReport", shown) == []
        human = io.StringIO()
        with contextlib.redirect_stdout(human):
            _print_human(shown)
        assert f"pool {POOL}'s breaker is open for {', '.join(failing)}" in " ".join(human.getvalue().split())
    scrape = agent.metrics.registry.get_sample_value
    assert all(scrape("fabricguard_agent_taints_withheld", {"check": c}) == 1 for c in failing)
    # The log line tells a person what to run: every command it quotes is one the CLI takes as written.
    said = [r.getMessage() for r in caplog.records if "not tainting Node" in r.getMessage()]
    commands = re.findall(r"`(fabricguard [^`]+)`", said[-1]) if said else []
    assert len(commands) == 2, said
    for cmd in commands:
        res_cli = CliRunner().invoke(app, [*shlex.split(cmd)[1:], "--help"])
        assert res_cli.exit_code == 0, (cmd, res_cli.output)
    # A person resets it: the next run taints again and the series goes.
    reset = breaker.reset(opened, SINCE)
    k8s.objects[FVS, None, POOL] = _fv(dict.fromkeys(failing, reset))
    res = await agent.run_once()
    assert res.withheld == [] and _readiness(k8s)
    assert all(scrape("fabricguard_agent_taints_withheld", {"check": c}) is None for c in failing)


async def test_a_role_without_the_read_says_so_and_keeps_the_last_open_breakers(
        apiserver, tmp_path: Path, healthy_root: Path) -> None:
    """An agent whose ClusterRole predates the read (an upgrade applied half-way): each run is a report error that
    names the refusal, and the open breakers of the last good read stay in force."""
    k8s, url = apiserver
    profile = load_profile(GKE)
    k8s.rbac = Rbac.from_manifests(agent_manifests(profile, GKE.read_text(), IMAGE_REF, manage_taints=True))
    k8s.put_node(healthy_node())
    _serve_crd(k8s)
    agent = await make_agent(tmp_path, url, healthy_root, manage_taints=True)
    break_port(healthy_root)
    res = await agent.run_once()
    failing = sorted(agent_condition_checks(res.condition))
    opened = breaker.BreakerState(open=True, since=SINCE, reason="over budget", members=(NODE_NAME,))
    k8s.objects[FVS, None, POOL] = _fv(dict.fromkeys(failing, opened))
    _lift(k8s)
    res = await agent.run_once()
    assert res.withheld == failing and not _readiness(k8s)
    old_role = [o for o in agent_manifests(profile, GKE.read_text(), IMAGE_REF, manage_taints=True)]
    for o in old_role:
        if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "fabricguard-agent":
            o["rules"] = [r for r in o["rules"] if "fabricvalidations" not in r["resources"]]
    k8s.rbac = Rbac.from_manifests(old_role)
    res = await agent.run_once()
    assert res.withheld == failing and not _readiness(k8s)
    assert len(res.errors) == 1 and f"breakers of pool {POOL}" in res.errors[0] and "403" in res.errors[0], res.errors


def agent_condition_checks(condition: dict[str, Any] | None) -> list[str]:
    from fabricguard.agent.condition import failing_checks

    return failing_checks(condition)
