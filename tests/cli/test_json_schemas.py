"""Every command's JSON, as the commands print it, against its published schema (docs/schemas/, docs/json.md):
the same envelope everywhere (``apiVersion: fabricguard.io/v1``, ``kind``, ``verdict`` first), one verdict
vocabulary, a ``fix`` on every non-pass reason, and no path of the machine that ran the command in a message."""

from __future__ import annotations

import asyncio
import importlib
import json
import shutil
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from cli_support import EXAMPLES, JOBS, REPO, SNAPSHOTS, run
from typer.testing import CliRunner

from fabricguard.cli import app
from fabricguard.exitcodes import VERDICT_EXIT
from json_schema_check import SCHEMAS, assert_matches, schema

PROFILES = EXAMPLES / "profiles"
PROD = SNAPSHOTS / "incident-271-days" / "production"
STAG = SNAPSHOTS / "incident-271-days" / "staging"
NCCL_TESTS = REPO / "tests" / "fixtures" / "nccl" / "synthetic" / "nccl-tests" / "all_reduce_perf-ib-2x8.log"
ONPREM = PROFILES / "onprem-infiniband.yaml"
GKE = PROFILES / "gke-a3-ultra.yaml"
SIMULATE = ["placement", "simulate", "-p", str(GKE), "--free", "block-a=12,block-b=4"]

COMMANDS = [
    ("JobVerdict", ["verify-job", str(JOBS / "socket-fallback"), "-p", str(ONPREM), "--pool", "gh200-roce"]),
    ("JobVerdict", ["verify-job", str(JOBS / "rdma-healthy"), "-p", str(ONPREM), "--pool", "gh200-roce"]),
    ("NcclInspection", ["nccl", "inspect", str(JOBS / "socket-fallback" / "logs")]),
    ("NcclInspection", ["nccl", "inspect", str(NCCL_TESTS), "--expect", "ib"]),
    ("NcclInspection", ["nccl", "inspect", str(JOBS / "socket-fallback" / "logs"), "-p", str(ONPREM),
                        "--pool", "gh200-roce"]),
    ("DoctorReport", ["doctor", "--snapshot", str(PROD), "--now", "2025-09-30T12:00:00Z"]),
    ("DoctorReport", ["doctor", "--snapshot", str(SNAPSHOTS / "healthy"), "--now", "2025-09-30T12:00:00Z"]),
    ("DoctorReport", ["doctor", "diff", str(STAG), str(PROD)]),
    ("ProfileCheck", ["profile", "check", str(PROFILES / "gke-a3-ultra.yaml")]),
    ("StorageWhere", ["storage", "where", "/", "--mountinfo", "/proc/self/mountinfo"]),
    ("HostProbe", ["probe", "host", "--nvml-json", str(REPO / "tests" / "fixtures" / "h200-host" / "nvml.json")]),
    # pass: 2 and 4 nodes fit in a free block; degraded: 8 waits for a block (required) or spans two (preferred);
    # failed: 16 can never run in one block.
    ("PlacementSimulation", [*SIMULATE, "--gangs", "2,4"]),
    ("PlacementSimulation", [*SIMULATE[:-1], "block-a=6,block-b=4", "--size", "block-a=12,block-b=4", "--gangs", "8"]),
    ("PlacementSimulation", SIMULATE),
]


def _messages(value: object) -> list[str]:
    if isinstance(value, dict):
        return [m for k, v in value.items() for m in ([v] if k in ("message", "fix", "detail") and isinstance(v, str)
                                                     else _messages(v))]
    if isinstance(value, list):
        return [m for v in value for m in _messages(v)]
    return []


@pytest.mark.parametrize(("kind", "argv"), COMMANDS, ids=lambda x: x if isinstance(x, str) else " ".join(x[:2]))
def test_real_output_matches_its_schema(kind: str, argv: list[str]) -> None:
    r = run(*argv, "--format", "json")
    doc = json.loads(r.stdout)
    assert_matches(kind, doc, r.exit_code)
    # No path of this machine (the checkout, a temporary directory) inside a sentence meant for people.
    for m in _messages(doc):
        for given in sorted(argv, key=len, reverse=True):  # a path the person passed is theirs to see
            m = m.replace(given, "")
        assert str(REPO) not in m and "/tmp/" not in m, m


def _valid(kind: str, doc: dict) -> None:
    assert_matches(kind, doc)


def test_probe_storage_matches_its_schema(tmp_path) -> None:
    r = run("probe", "storage", "--path", tmp_path, "--size", "1M", "--engine", "builtin", "--small-files", "8",
            "--format", "json")
    doc = json.loads(r.stdout)
    _valid("StorageProbe", doc)
    assert r.exit_code == VERDICT_EXIT[doc["verdict"]]


def test_a_recorded_validate_report_matches_its_schema() -> None:
    """A real ``validate --local`` report.json (tests/probes/fixtures), in the envelope validate writes now; the
    slow end-to-end run (tests/probes/test_cli.py) checks a fresh one, and the collective probe's own JSON."""
    from fabricguard.console import envelope

    doc = json.loads((REPO / "tests" / "probes" / "fixtures" / "validate-local-report.json").read_text())
    _valid("ValidationReport", envelope("ValidationReport", doc))
    _valid("CollectiveProbe", envelope("CollectiveProbe", {"verdict": doc["collective"]["judgement"]["status"],
                                                           **doc["collective"]}))


def test_every_schema_is_documented() -> None:
    doc = (REPO / "docs" / "json.md").read_text()
    for p in sorted(SCHEMAS.glob("*.schema.json")):
        assert f"schemas/{p.name}" in doc, p.name
        assert schema(p.name.removesuffix(".schema.json"))["title"] == p.name.removesuffix(".schema.json")


AGENT_NODE = REPO / "tests" / "agent" / "fixtures" / "healthy-a3-ultra"


def _agent(root: Path) -> tuple[int, dict]:
    r = run("agent", "--once", "--dry-run", "--format", "json", "--node", "gke-a3u-pool-1-7f3c9a2e-0001",
            "--profile", str(GKE), "--root", str(root), "--nvml-json", str(AGENT_NODE / "nvml.json"),
            "--node-json", str(AGENT_NODE / "node.json"))
    return r.exit_code, json.loads(r.stdout)


def test_agent_once_matches_its_schema_passed_degraded_and_failed(tmp_path: Path) -> None:
    """The healthy A3 Ultra node (pass); the same without nvidia_peermem (True with warnings: degraded); a node
    with nothing of the fabric on it (False: failed)."""
    code, doc = _agent(AGENT_NODE / "root")
    assert_matches("AgentReport", doc, code)
    assert doc["verdict"] == "pass"
    root = tmp_path / "root"
    shutil.copytree(AGENT_NODE / "root", root)
    mods = root / "proc" / "modules"
    mods.write_text("".join(ln + "\n" for ln in mods.read_text().splitlines() if not ln.startswith("nvidia_peermem")))
    code, doc = _agent(root)
    assert_matches("AgentReport", doc, code)
    assert (doc["verdict"], doc["reason"]) == ("degraded", "PassedWithWarnings")
    bare = tmp_path / "bare"
    bare.mkdir()
    code, doc = _agent(bare)
    assert_matches("AgentReport", doc, code)
    assert (doc["verdict"], doc["status"]) == ("failed", "False")


def test_a_schema_refuses_a_verdict_its_state_contradicts() -> None:
    """The schemas tie the verdict to the state it summarises, so a document that says pass over a False condition,
    a blocked transition or an open breaker cannot validate."""
    from json_schema_check import schema_errors

    _, doc = _agent(AGENT_NODE / "root")
    assert schema_errors("AgentReport", doc) == []
    assert schema_errors("AgentReport", doc | {"status": "False"})
    assert schema_errors("AgentReport", doc | {"errors": ["node gone"]})
    env = {"apiVersion": "fabricguard.io/v1"}
    assert schema_errors("BreakerStatus", env | {"kind": "BreakerStatus", "verdict": "pass", "breakers": [
        {"pool": "p", "check": "c", "open": True, "resets": 0}]})
    assert schema_errors("StaleSweep", env | {"kind": "StaleSweep", "verdict": "pass", "stale": [],
                                              "not_patched": [{"node": "n", "error": "403"}]})


FALLBACK = JOBS / "socket-fallback"
# (profile, pool, words the fix must name): the fabric's own resources, networks or device class.
FABRICS = [
    ("gke-a3-ultra.yaml", "h200-rdma", ("networking.gke.io/interfaces", "networking.gke.io.networks/", "gIB")),
    ("aws-p5-efa.yaml", "p5-efa", ("vpc.amazonaws.com/efa", "aws-ofi-nccl", "NCCL_NET=Libfabric")),
    ("onprem-infiniband.yaml", "h100-ib", ("rdma/ib", "NCCL_NET=IB")),
    ("onprem-infiniband.yaml", "gh200-roce", ("rdma/rdma_shared_device_a", "NCCL_IB_GID_INDEX")),
    ("gke-a4-dranet.yaml", "b200-dranet", ("DeviceClass mrdma.google.com", "resources.claims")),
]


@pytest.mark.parametrize(("profile", "pool", "words"), FABRICS, ids=[f[1] for f in FABRICS])
def test_a_socket_fallback_names_the_next_step_for_its_fabric(profile: str, pool: str, words: tuple[str, ...]) -> None:
    r = run("verify-job", str(FALLBACK), "-p", str(PROFILES / profile), "--pool", pool, "--format", "json")
    doc = json.loads(r.stdout)
    (reason,) = [x for x in doc["reasons"] if x["check"] == "transport" and x["level"] != "info"][:1]
    for w in words:
        assert w in reason["fix"], (w, reason["fix"])
    text = run("verify-job", str(FALLBACK), "-p", str(PROFILES / profile), "--pool", pool).stdout
    assert words[0] in text and "fix:" in text


# ------------------------------------------------------------------ commands that read the cluster (the emulator)


def _support(directory: str, module: str) -> ModuleType:
    """A helper module of another test directory (tests/<directory>/<module>.py), imported by the name its own
    tests use, so the emulator set-ups are shared rather than written twice."""
    path = str(REPO / "tests" / directory)
    if path not in sys.path:
        sys.path.append(path)
    return importlib.import_module(module)


def _cli(*args: str) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture()
async def emulator():
    from kmock import Server

    from kube_support import Emulator

    async with Emulator() as k8s, Server(k8s) as server:
        k8s["get /version/"] << {"major": "1", "minor": "33", "gitVersion": "v1.33.5", "platform": "linux/amd64"}
        yield k8s, str(server.url).rstrip("/")


FVS = "fabricguard.io/v1alpha1/fabricvalidations"


def _fv(k8s: Any, pool: str, status: dict[str, Any]) -> None:
    k8s.resources[FVS].verbs = {"list", "watch", "get", "create", "patch", "delete"}
    k8s.objects[FVS, None, pool] = {"metadata": {"name": pool, "uid": f"fv-{pool}", "generation": 1},
                                    "spec": {"pool": pool}, "status": status}


async def test_breaker_status_matches_its_schema_closed_and_open(emulator, tmp_path: Path) -> None:
    from fabricguard.breaker import BreakerState
    from kube_support import kubeconfig

    k8s, url = emulator
    kc = kubeconfig(tmp_path, url)
    _fv(k8s, "gh200-roce", {"breakers": [{"check": "fabric.allocatable", **BreakerState(resets=1).to_dict()}]})
    r = await asyncio.to_thread(_cli, "breaker", "status", "--kubeconfig", kc, "--format", "json")
    assert_matches("BreakerStatus", json.loads(r.stdout), r.exit_code)
    assert json.loads(r.stdout)["verdict"] == "pass"
    opened = BreakerState(True, datetime(2026, 12, 1, 12, tzinfo=UTC), "12 of 30 newly failing within 1h, budget 3",
                          ("n1", "n2"))
    _fv(k8s, "gh200-roce", {"breakers": [{"check": "fabric.allocatable", **opened.to_dict()}]})
    r = await asyncio.to_thread(_cli, "breaker", "status", "--kubeconfig", kc, "--format", "json")
    assert_matches("BreakerStatus", json.loads(r.stdout), r.exit_code)
    assert (r.exit_code, json.loads(r.stdout)["breakers"][0]["members"]) == (1, ["n1", "n2"])


async def test_pool_coverage_matches_its_schema_passed_degraded_and_failed(emulator, tmp_path: Path) -> None:
    """No proof recorded yet (degraded), every node proven an hour ago (pass), the quarantine breaker open
    (failed); the FabricValidation's status as the controller writes it (ProofState.to_dict)."""
    from fabricguard import breaker
    from fabricguard.controller import proof as pf
    from kube_support import kubeconfig

    cs = _support("controller", "controller_support")
    k8s, url = emulator
    cs.load_incident(k8s, only=("nodes",))
    prof = tmp_path / "proof.yaml"
    prof.write_text(cs.PROFILE.replace("    canary:", "    proof: {every: 24h}\n    canary:"))
    now = cs.NOW
    args = ["pool", "coverage", "-p", prof, "--kubeconfig", kubeconfig(tmp_path, url), "--now", cs.ts(now),
            "--format", "json"]
    r = await asyncio.to_thread(_cli, *args)
    assert_matches("PoolCoverage", json.loads(r.stdout), r.exit_code)
    assert r.exit_code == 1 and "no node proof recorded yet" in json.loads(r.stdout)["summary"]
    nodes = [n for (res, _, n) in k8s.objects if res == "v1/nodes"]
    proven = cs.ts(now - timedelta(hours=1))
    state = pf.ProofState(nodes={n: pf.NodeProof(n, "proven", proven, "fgp-1", nodes[i - 1], 45.5, "intra", proven)
                                 for i, n in enumerate(nodes)}, day=now.date().isoformat(), spentGpuHours=1.6)
    _fv(k8s, cs.POOL, {"proof": state.to_dict(40.0)})
    r = await asyncio.to_thread(_cli, *args)
    assert_matches("PoolCoverage", json.loads(r.stdout), r.exit_code)
    rows = json.loads(r.stdout)["nodes"]
    assert r.exit_code == 0 and len(rows) > 1 and {x["state"] for x in rows} == {"proven"}
    state.breaker = breaker.BreakerState(True, now - timedelta(minutes=5), "4 of 6 nodes newly failing", tuple(nodes))
    _fv(k8s, cs.POOL, {"proof": state.to_dict(40.0)})
    r = await asyncio.to_thread(_cli, *args)
    assert_matches("PoolCoverage", json.loads(r.stdout), r.exit_code)
    assert r.exit_code == 2 and json.loads(r.stdout)["breaker"]["open"] is True


async def test_agent_sweep_matches_its_schema_swept_and_refused(tmp_path: Path) -> None:
    """The rendered sweep role (pass: the stale condition turned Unknown) and a user who may list Nodes but not
    patch their status, refused by RBAC as the API server refuses it (failed: the node named in not_patched)."""
    from kmock import Server

    from kube_support import Rbac, kubeconfig

    ag = _support("agent", "agent_support")
    rbac = Rbac(cluster={"viewer": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]})
    k8s = ag.ApiServer(rbac=Rbac.from_manifests([], ag.agent_rbac()))
    k8s.rbac.cluster.update(rbac.cluster)
    k8s.tokens = {"sweep": {"username": "system:serviceaccount:fabricguard-system:fabricguard-agent-sweep"},
                  "viewer": {"username": "viewer"}}
    async with k8s, Server(k8s) as server:
        k8s["get /version/"] << {"major": "1", "minor": "33", "gitVersion": "v1.33.5", "platform": "linux/amd64"}
        node = ag.healthy_node()
        old = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        node["status"]["conditions"].append({"type": "FabricReady", "status": "True", "reason": "AllChecksPassed",
                                             "message": "ok", "lastHeartbeatTime": old, "lastTransitionTime": old})
        k8s.put_node(node)
        url = str(server.url).rstrip("/")
        r = await asyncio.to_thread(_cli, "agent-sweep", "--kubeconfig",
                                    kubeconfig(tmp_path, url, "viewer", name="viewer"), "--format", "json")
        doc = json.loads(r.stdout)
        assert_matches("StaleSweep", doc, r.exit_code)
        assert r.exit_code == 2 and [x["node"] for x in doc["not_patched"]] == [ag.NODE_NAME], doc
        assert "forbidden" in doc["not_patched"][0]["error"].lower()
        r = await asyncio.to_thread(_cli, "agent-sweep", "--kubeconfig",
                                    kubeconfig(tmp_path, url, "viewer", name="viewer"))
        assert " ".join(r.stdout.split()).startswith(  # the text says the same word first
            "FAILED agent-sweep · 0 stale FabricReady condition(s) set to Unknown, 1 left as they are"), r.stdout
        r = await asyncio.to_thread(_cli, "agent-sweep", "--kubeconfig",
                                    kubeconfig(tmp_path, url, "sweep", name="sweep"), "--format", "json")
        doc = json.loads(r.stdout)
        assert_matches("StaleSweep", doc, r.exit_code)
        assert r.exit_code == 0 and doc["stale"] == [ag.NODE_NAME]


async def test_controller_once_matches_its_schema(tmp_path: Path) -> None:
    """The 271-day incident, one pass (degraded: the pool is not validated, its Workload held). Every pass of the
    controller tests is checked the same way (controller_support.run_once), passes among them."""
    from kmock import Server

    cs = _support("controller", "controller_support")
    prof = tmp_path / "profile.yaml"
    prof.write_text(cs.PROFILE)
    lustre = tmp_path / "lustre"
    lustre.mkdir()
    async with cs.apply_aware_emulator() as k8s, Server(k8s) as server:
        k8s["get /version/"] << {"major": "1", "minor": "31", "gitVersion": "v1.31.6", "platform": "linux/amd64"}
        cs.load_incident(k8s)
        code, doc = await cs.run_once(cs.kubeconfig(tmp_path, str(server.url).rstrip("/")), prof, cs.NOW, lustre)
    assert_matches("ControllerPass", doc, code)
    assert code == 1 and doc["pools"][cs.POOL]["ready"] is False and doc["pools"][cs.POOL]["heldWorkloads"] == 1


async def test_pool_transition_matches_its_schema_waiting_completed_and_blocked(tmp_path: Path) -> None:
    """The transition of tests/placement/test_transition.py through the real command: waiting on a running gang
    (degraded), then done once it finished (pass); new nodes no agent reports on block it (failed), and an
    aborted one is failed too (abort exits 2, as status of an aborted transition does)."""
    from kmock import Server

    from kube_support import Emulator, Rbac, kubeconfig

    tt = _support("placement", "test_transition")
    for gang, agent, codes in (("Running", True, (1, 0)), ("Succeeded", False, (2,))):
        rbac = Rbac().bind("platform-operator", tt.transition_roles(tt.NS))
        async with Emulator(rbac=rbac, tokens={"t": {"username": "platform-operator"}}) as k8s, Server(k8s) as srv:
            tt.seed(k8s, gang=gang, agent=agent)
            kc = kubeconfig(tmp_path, str(srv.url).rstrip("/"), name=f"kc-{gang}")
            common = ["pool", "transition", "apply", "--from", tt.FROM, "--to", tt.TO, "--kubeconfig", kc,
                      "--format", "json"]
            for i, want in enumerate(codes):
                if i:  # the gang finished on its own
                    for name in ("qwen-0", "qwen-1"):
                        k8s.objects["v1/pods", "ml-search", name].raw["status"]["phase"] = "Succeeded"
                r = await asyncio.to_thread(_cli, *common, "--now", f"2026-11-30T12:0{i}:00Z")
                doc = json.loads(r.stdout)
                assert_matches("PoolTransition", doc, r.exit_code)
                assert r.exit_code == want, doc["message"]
            status = await asyncio.to_thread(_cli, *[a if a != "apply" else "status" for a in common])
            assert_matches("PoolTransition", json.loads(status.stdout), status.exit_code)
            assert status.exit_code == codes[-1]
            if not agent:
                r = await asyncio.to_thread(_cli, *[a if a != "apply" else "abort" for a in common])
                doc = json.loads(r.stdout)
                assert_matches("PoolTransition", doc, r.exit_code)
                assert (r.exit_code, doc["phase"]) == (2, "Aborted"), r.output
