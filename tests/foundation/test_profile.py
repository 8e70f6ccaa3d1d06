"""Platform profile: examples load, errors name field and line, derived values are right."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricguard.cli import app
from fabricguard.profile import (
    FabricType,
    ProfileError,
    Transport,
    UnknownPoolError,
    embedded_profile,
    load_profile,
    loads_profile,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "profiles"

MINIMAL = """\
apiVersion: fabricguard.io/v1alpha1
kind: PlatformProfile
metadata: {name: tiny}
spec:
  pools:
  - name: a
    nodeSelector: {pool: a}
    gpusPerNode: 8
    fabric: {type: infiniband, resources: {rdma/ib: 8}}
"""


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_profile_is_valid(path: Path) -> None:
    prof = load_profile(path)
    assert prof.spec.pools
    assert prof.pool().name == prof.spec.defaultPool


def test_example_profiles_cover_gke_efa_and_onprem() -> None:
    types = {p.fabric.type for f in EXAMPLES.glob("*.yaml") for p in load_profile(f).spec.pools}
    assert {FabricType.gke_rdma, FabricType.efa, FabricType.infiniband, FabricType.roce} <= types


def test_minimal_profile_defaults() -> None:
    prof = loads_profile(MINIMAL)
    pool = prof.pool()
    assert pool.architecture == "amd64"
    assert pool.fabric.effective_nccl_net == "IB"
    assert pool.fabric.expected_transports == {Transport.ib}
    assert pool.baseline.floorFraction == 0.8
    assert pool.baseline.busbw_floor_gbps is None
    assert prof.metadata.environment == "production"


def test_gke_example_derives_gib_and_floor() -> None:
    pool = load_profile(EXAMPLES / "gke-a3-ultra.yaml").pool("h200-rdma")
    assert pool.fabric.effective_nccl_net == "gIB"
    assert pool.fabric.network_annotation_style == "gke"
    assert pool.baseline.busbw_floor_gbps == pytest.approx(284.0)
    assert Transport.socket not in pool.fabric.expected_transports


def test_error_names_field_path_and_line() -> None:
    bad = MINIMAL.replace("gpusPerNode: 8", "gpusPerNode: eight").replace("type: infiniband", "type: infiniband2")
    with pytest.raises(ProfileError) as ei:
        loads_profile(bad, source="p.yaml")
    probs = {p.path: p for p in ei.value.problems}
    assert probs["spec.pools[0].gpusPerNode"].line == 8
    assert probs["spec.pools[0].fabric.type"].line == 9
    assert "expected 'infiniband'" in probs["spec.pools[0].fabric.type"].message
    assert "p.yaml:8: spec.pools[0].gpusPerNode" in str(ei.value)


def test_unknown_field_is_rejected_with_its_line() -> None:
    with pytest.raises(ProfileError) as ei:
        loads_profile(MINIMAL.replace("gpusPerNode: 8", "gpusPerNode: 8\n    gpuPerNode: 8"))
    (p,) = ei.value.problems
    assert p.path == "spec.pools[0].gpuPerNode"
    assert p.line == 9
    assert "unknown field" in p.message


def test_missing_required_field_points_at_parent() -> None:
    with pytest.raises(ProfileError) as ei:
        loads_profile(MINIMAL.replace("    gpusPerNode: 8\n", ""))
    (p,) = ei.value.problems
    assert p.path == "spec.pools[0].gpusPerNode"
    assert p.message == "required field is missing"
    assert p.line == 6  # the pool's own line


def test_yaml_syntax_error_names_line() -> None:
    with pytest.raises(ProfileError) as ei:
        loads_profile(MINIMAL + "  - name: [unclosed\n", source="x.yaml")
    assert ei.value.problems[0].line is not None
    assert ei.value.problems[0].line >= 10


@pytest.mark.parametrize(
    ("snippet", "message"),
    [
        ("fabric: {type: none, resources: {rdma/ib: 1}}", "cannot carry"),
        ("fabric: {type: infiniband, resources: {ib: 8}}", "not an extended resource name"),
        ("fabric: {type: roce, networkMapping: {a: b}}", "needs topologyLabel"),
        ("fabric: {type: roce, env: {NCCL_IB_DISABLE: '1'}}", "socket fallback"),
        ("fabric: {type: roce, networks: ['Bad_Name']}", "not a network name"),
    ],
)
def test_inconsistent_fabric_is_rejected(snippet: str, message: str) -> None:
    text = MINIMAL.replace("fabric: {type: infiniband, resources: {rdma/ib: 8}}", snippet)
    with pytest.raises(ProfileError, match=message):
        loads_profile(text)


def test_duplicate_pools_and_unknown_default_pool() -> None:
    dup = MINIMAL + MINIMAL.split("  pools:\n")[1]
    with pytest.raises(ProfileError, match="appears twice"):
        loads_profile(dup)
    with pytest.raises(ProfileError, match="defaultPool 'zzz' is not a pool"):
        loads_profile(MINIMAL.replace("spec:\n", "spec:\n  defaultPool: zzz\n"))


def test_unknown_pool_lists_known_ones() -> None:
    prof = load_profile(EXAMPLES / "aws-p5-efa.yaml")
    with pytest.raises(UnknownPoolError) as ei:
        prof.pool("nope")
    assert "p5-efa" in str(ei.value) and "g6-single" in str(ei.value)


def test_embedded_local_profile() -> None:
    prof = embedded_profile("local")
    pool = prof.pool()
    assert pool.fabric.type is FabricType.none
    assert Transport.socket in pool.fabric.expected_transports


def test_cli_profile_check(tmp_path: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(app, ["profile", "check", str(EXAMPLES / "gke-a3-ultra.yaml")])
    assert ok.exit_code == 0, ok.output
    assert "valid profile" in ok.output
    bad = tmp_path / "bad.yaml"
    bad.write_text(MINIMAL.replace("gpusPerNode: 8", "gpusPerNode: -1"))
    res = runner.invoke(app, ["profile", "check", str(bad)])
    assert res.exit_code == 3
    assert f"{bad}:8: spec.pools[0].gpusPerNode" in res.output.replace("\n", "")
    missing = runner.invoke(app, ["profile", "check", str(tmp_path / "none.yaml")])
    assert missing.exit_code == 3
    assert "no such file" in missing.output


def test_shm_size_must_be_a_quantity() -> None:
    ok = loads_profile(MINIMAL.replace("gpusPerNode: 8", "gpusPerNode: 8\n    shmSize: 250Gi"))
    assert ok.pool().shmSize == "250Gi"
    with pytest.raises(ProfileError, match="not a Kubernetes quantity"):
        loads_profile(MINIMAL.replace("gpusPerNode: 8", "gpusPerNode: 8\n    shmSize: lots"))


def test_empty_pool_list_says_what_is_needed() -> None:
    with pytest.raises(ProfileError) as ei:
        loads_profile(MINIMAL.split("  pools:\n")[0] + "  pools: []\n")
    (p,) = ei.value.problems
    assert p.path == "spec.pools" and p.message == "needs at least 1 entry (got none)" and p.line == 5


def test_unreadable_profile_files_name_the_file(tmp_path: Path) -> None:
    blob = tmp_path / "p.yaml"
    blob.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ProfileError, match="not UTF-8 text"):
        load_profile(blob)
    with pytest.raises(ProfileError, match="is a directory"):
        load_profile(tmp_path)
