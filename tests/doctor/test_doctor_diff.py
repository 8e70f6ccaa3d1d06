"""``doctor diff``: what it compares by default, how it names the sides, one finding per drifting object."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from doctor_support import EXAMPLES
from typer.testing import CliRunner

from fabricguard.cli import app
from fabricguard.doctor.diff import diff_snapshots, drift_scope
from fabricguard.doctor.snapshot import load_snapshot

PROD = EXAMPLES / "incident-271-days" / "production"


def ds(namespace: str, name: str, image: str, **env: str) -> dict[str, Any]:
    """A DaemonSet as ``kubectl get -o json`` shows it (server fields included, which are not drift)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}-{image}",
            "resourceVersion": "123",
            "generation": 4,
            "creationTimestamp": "2025-01-01T00:00:00Z",
        },
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {"name": name, "image": image, "env": [{"name": k, "value": v} for k, v in env.items()]}
                    ]
                },
            },
        },
        "status": {"desiredNumberScheduled": 2, "numberReady": 2},
    }


def write(directory: Path, *objects: dict[str, Any]) -> Path:
    directory.mkdir(parents=True)
    (directory / "daemonsets.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})
    )
    return directory


def run(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_without_a_profile_every_daemonset_namespace_is_compared(tmp_path: Path) -> None:
    # The device plugin lives in its operator's namespace; comparing kube-system only said "No findings".
    a = write(tmp_path / "staging", ds("network-operator", "rdma-dp", "mirror/dp:v1@sha256:" + "a" * 64))
    b = write(tmp_path / "production", ds("network-operator", "rdma-dp", "mirror/dp:v1"))
    r = run("doctor", "diff", a, b, "--format", "json")
    assert r.exit_code == 0
    data = json.loads(r.stdout)
    [f] = data["findings"]
    assert f["objects"] == [{"kind": "DaemonSet", "namespace": "network-operator", "name": "rdma-dp"}]
    assert "staging has" in f["message"] and "production has" in f["message"]
    assert data["verdict"] == "pass"  # drift is a warning; --fail-on warning makes it exit 1
    assert run("doctor", "diff", a, b, "--fail-on", "warning").exit_code == 1


def test_sides_are_named_by_directory_or_by_label(tmp_path: Path) -> None:
    a = write(tmp_path / "east" / "snap", ds("gpu", "dp", "dp:v1"))
    b = write(tmp_path / "west" / "snap", ds("gpu", "dp", "dp:v2"))
    [f] = json.loads(run("doctor", "diff", a, b, "--format", "json").stdout)["findings"]
    # Same directory names: the paths tell the sides apart.
    image = "spec.template.spec.containers[name=dp].image"
    assert set(f["evidence"][image]) >= {str(a), str(b)}
    r = run("doctor", "diff", a, b, "--label-a", "staging", "--label-b", "production", "--format", "json")
    [f] = json.loads(r.stdout)["findings"]
    assert f["evidence"][image]["staging"] == "dp:v1" and f["evidence"][image]["production"] == "dp:v2"
    assert run("doctor", "diff", a, b, "--label-a", "x", "--label-b", "x").exit_code == 3


def test_profiles_naming_an_environment_do_not_relabel_both_sides() -> None:
    # Both example snapshots carry a profile; the sides are still staging and production, by directory.
    stag = EXAMPLES / "incident-271-days" / "staging"
    [f] = json.loads(run("doctor", "diff", stag, PROD, "--format", "json").stdout)["findings"]
    [sides] = [v for k, v in f["evidence"].items() if k.endswith(".image")]
    assert {"staging", "production"} <= set(sides)


def test_one_finding_per_object_listing_every_field(tmp_path: Path) -> None:
    a = write(tmp_path / "a", ds("kube-system", "dp", "dp:v1", NCCL_IB_HCA="mlx5_0", LOG="info"))
    b = write(tmp_path / "b", ds("kube-system", "dp", "dp:v2", NCCL_IB_HCA="mlx5_1", LOG="info"))
    [f] = diff_snapshots(load_snapshot(a), load_snapshot(b), drift_scope(()), "a", "b")
    paths = sorted(k for k in f.evidence)
    assert paths == [
        "spec.template.spec.containers[name=dp].env[name=NCCL_IB_HCA].value",
        "spec.template.spec.containers[name=dp].image",
    ]
    assert "2 fields differ" in f.message and "NCCL_IB_HCA" in f.message and "dp:v2" in f.message
    # Server-managed fields (uid, status) differ too but are not drift.
    assert not any("uid" in p or p.startswith("status") for p in paths)


def test_one_side_only_objects_and_namespace_narrowing(tmp_path: Path) -> None:
    a = write(tmp_path / "a", ds("gpu", "dp", "dp:v1"), ds("monitoring", "exporter", "exp:v1"))
    b = write(tmp_path / "b", ds("gpu", "dp", "dp:v1"))
    sa, sb = load_snapshot(a), load_snapshot(b)
    [f] = diff_snapshots(sa, sb, drift_scope(()), "a", "b")
    assert "exists in a but not in b" in f.message
    # --namespace narrows the DaemonSets compared to the namespaces named.
    assert diff_snapshots(sa, sb, drift_scope((), ["gpu"]), "a", "b") == []
    r = run("doctor", "diff", a, b, "-n", "gpu", "--format", "json")
    assert json.loads(r.stdout)["findings"] == []


def test_a_profile_adds_its_device_plugin_namespace_to_a_narrowed_scope(tmp_path: Path) -> None:
    prof = load_snapshot(PROD)
    profile_path = prof.profile_path
    assert profile_path is not None
    a = write(tmp_path / "a", ds("network-operator", "rdma-shared-dp-ds", "dp:v1"))
    b = write(tmp_path / "b", ds("network-operator", "rdma-shared-dp-ds", "dp:v2"))
    r = run("doctor", "diff", a, b, "-n", "gpu", "--profile", profile_path, "--format", "json")
    [f] = json.loads(r.stdout)["findings"]
    assert f["objects"][0]["namespace"] == "network-operator"
    assert json.loads(run("doctor", "diff", a, b, "-n", "gpu", "--format", "json").stdout)["findings"] == []


def test_reordered_named_lists_are_not_drift(tmp_path: Path) -> None:
    one = ds("gpu", "dp", "dp:v1", A="1", B="2")
    two = copy.deepcopy(one)
    two["spec"]["template"]["spec"]["containers"][0]["env"].reverse()
    a, b = write(tmp_path / "a", one), write(tmp_path / "b", two)
    assert diff_snapshots(load_snapshot(a), load_snapshot(b), drift_scope(()), "a", "b") == []
