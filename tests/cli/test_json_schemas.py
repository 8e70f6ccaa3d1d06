"""Every command's JSON, as the commands print it, against its published schema (docs/schemas/, docs/json.md):
the same envelope everywhere (``apiVersion: fabricguard.io/v1``, ``kind``, ``verdict`` first), one verdict
vocabulary, a ``fix`` on every non-pass reason, and no path of the machine that ran the command in a message."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_support import EXAMPLES, JOBS, REPO, SNAPSHOTS, run

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
