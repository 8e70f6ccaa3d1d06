"""A file-system outage is the file system's incident, said once: when every node of a pool loses its Lustre
imports at once, the blast-radius breaker of ``lustre.imports`` opens after the budget, instead of every node
being tainted; one node with a sick client is still tainted.

The conditions are the agent's own: its checks run on the healthy GKE A3 Ultra node tree with the file system's
imports turned DISCONN, judged and stored exactly as the agent writes them. NRC is the documented model of
test_blast_radius.py."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from test_blast_radius import Nrc, _apply, _fv, _node, _tainted  # the NRC model and the API server's writes

from fabricguard import names
from fabricguard import objects as o
from fabricguard.agent.checks import node_checks
from fabricguard.agent.condition import Readiness, build_condition, judge
from fabricguard.agent.render import readiness_rules
from fabricguard.controller.actions import Emit
from fabricguard.controller.blast import judge_breakers, stored
from fabricguard.probes.host import load_gpus
from fabricguard.probes.lustre_client import Lnetctl
from fabricguard.profile import load_profile

ROOT = Path(__file__).resolve().parents[2]
GKE = ROOT / "examples" / "profiles" / "gke-a3-ultra.yaml"
HEALTHY = ROOT / "tests" / "agent" / "fixtures" / "healthy-a3-ultra"
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def agent_verdict(root: Path, node: dict[str, Any]) -> Readiness:
    """What the agent judges on this node tree (every node of the outage reads the same files)."""
    prof = load_profile(GKE)
    checks = node_checks(prof, prof.pool("h200-rdma"), root=root, gpu_data=load_gpus(HEALTHY / "nvml.json"),
                         node=node, lnetctl=Lnetctl(None))
    return judge(checks)


def outage_tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    shutil.copytree(HEALTHY / "root", root)
    for imp in (root / "proc/fs/lustre").glob("*/*/import"):
        imp.write_text(imp.read_text().replace("state: FULL", "state: DISCONN"))
    return root


def test_a_file_system_outage_opens_the_storage_breaker_not_every_taint(tmp_path: Path) -> None:
    prof = load_profile(GKE)
    pool = prof.pool("h200-rdma")
    node_obj = json.loads((HEALTHY / "node.json").read_text())
    down = agent_verdict(outage_tree(tmp_path), node_obj)
    n_nodes = 20
    nodes = [_node(f"a3u-{i:02d}", pool.nodeSelector, "True", T0 - timedelta(days=3)) for i in range(n_nodes)]
    rules = readiness_rules(prof, mode="enforce")
    nrc = Nrc(rules)
    fv = _fv(pool.name)
    events: list[Emit] = []
    most = 0
    for i, n in enumerate(nodes):  # the file system goes away: each agent sees it on its next pass
        now = T0 + timedelta(seconds=3 * i)
        cond = build_condition(down, o.find_condition(n, names.FABRIC_READY), now)
        assert cond["status"] == "False" and cond["message"].startswith("1 check(s) failed: lustre.imports")
        n["status"]["conditions"] = [cond]
        n["metadata"]["resourceVersion"] = str(int(n["metadata"]["resourceVersion"]) + 1)
        nrc.reconcile(nodes)
        most = max(most, len(_tainted(nodes)))
        res = judge_breakers(prof, nodes, {pool.name: fv}, [], rules, now, "enforce")
        events += _apply(res.actions, nodes, rules, fv, res.fv_status.get(pool.name))
        nrc.reconcile(nodes)
        most = max(most, len(_tainted(nodes)))
    budget = max(1, n_nodes // 10)
    assert most <= budget, f"{most} nodes tainted during a file-system outage, budget {budget}"
    assert _tainted(nodes) == set()
    assert list(stored(fv)) == ["lustre.imports"] and stored(fv)["lustre.imports"].open
    opened = [e for e in events if e.body["reason"] == "FabricBreakerOpen"]
    assert len(opened) == 1 and "lustre.imports" in opened[0].body["message"]  # said once


def test_one_sick_client_is_still_tainted(tmp_path: Path) -> None:
    prof = load_profile(GKE)
    pool = prof.pool("h200-rdma")
    node_obj = json.loads((HEALTHY / "node.json").read_text())
    down = agent_verdict(outage_tree(tmp_path), node_obj)
    nodes = [_node(f"a3u-{i:02d}", pool.nodeSelector, "True", T0 - timedelta(days=3)) for i in range(20)]
    healthy = agent_verdict(HEALTHY / "root", node_obj)
    assert healthy.status == "True", healthy.message
    rules = readiness_rules(prof, mode="enforce")
    nrc = Nrc(rules)
    fv = _fv(pool.name)
    sick = nodes[7]
    sick["status"]["conditions"] = [build_condition(down, o.find_condition(sick, names.FABRIC_READY), T0)]
    nrc.reconcile(nodes)
    res = judge_breakers(prof, nodes, {pool.name: fv}, [], rules, T0, "enforce")
    _apply(res.actions, nodes, rules, fv, res.fv_status.get(pool.name))
    nrc.reconcile(nodes)
    assert _tainted(nodes) == {"a3u-07"} and not res.pools[pool.name].open_checks
