"""Snapshot loading: Lists, single objects, YAML multi-doc, skipped files, parse errors, omitted counters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from doctor_support import gen

from fabricguard.doctor.rules.daemonsets import daemonset_never_ready
from fabricguard.doctor.snapshot import SnapshotError, load_snapshot


def test_list_and_single_object(tmp_path: Path) -> None:
    lists = gen.incident("production")
    (tmp_path / "nodes.json").write_text(json.dumps(lists["nodes"]))
    ds = lists["daemonsets"]["items"][0]
    (tmp_path / "ds.json").write_text(json.dumps(ds))
    s = load_snapshot(tmp_path)
    assert len(s.nodes) == len(lists["nodes"]["items"])
    assert [d["metadata"]["name"] for d in s.daemonsets] == [ds["metadata"]["name"]]


def test_yaml_multi_document_and_typed_list(tmp_path: Path) -> None:
    (tmp_path / "objs.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: kube-system}\n---\n"
        "apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: p1, namespace: ns}\n  spec: {}\n"
    )
    s = load_snapshot(tmp_path)
    assert [o["kind"] for o in s.objects] == ["ConfigMap", "Pod"]  # PodList items get their kind


def test_non_k8s_files_are_skipped_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "nodes.json").write_text(json.dumps(gen.incident("production")["nodes"]))
    (tmp_path / "profile.yaml").write_text(gen.INCIDENT_PROFILE.format(name="x", env="production"))
    (tmp_path / "notes.yaml").write_text("owner: team-ml\nticket: OPS-1234\n")
    (tmp_path / "README.txt").write_text("hello")
    s = load_snapshot(tmp_path)
    notes = "\n".join(s.notes)
    assert "profile.yaml: a fabricguard PlatformProfile" in notes
    assert "notes.yaml: holds no Kubernetes objects; skipped" in notes
    assert "README.txt: not a .json/.yaml file" in notes
    assert s.profile_path == tmp_path / "profile.yaml"


def test_broken_json_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "pods.json").write_text('{\n  "apiVersion": "v1",\n  "kind": "List",\n  "items": [,]\n}\n')
    with pytest.raises(SnapshotError) as exc:
        load_snapshot(tmp_path)
    assert exc.value.line == 4
    assert str(exc.value).startswith(f"{tmp_path / 'pods.json'}:4: invalid JSON")


def test_broken_yaml_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("apiVersion: v1\nkind: Node\nmetadata:\n  name: [unclosed\n")
    with pytest.raises(SnapshotError) as exc:
        load_snapshot(tmp_path)
    assert exc.value.source.endswith("a.yaml") and exc.value.line is not None and exc.value.line >= 4


def test_empty_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="no Kubernetes objects"):
        load_snapshot(tmp_path)


def test_missing_number_available_counts_as_zero(tmp_path: Path, now) -> None:
    lists = gen.incident("production")
    ds = lists["daemonsets"]["items"][0]
    assert "numberAvailable" not in ds["status"]  # the API server omits zero counters
    del ds["status"]["numberReady"]
    (tmp_path / "ds.json").write_text(json.dumps(lists["daemonsets"]))
    (tmp_path / "pods.json").write_text(json.dumps(lists["pods"]))
    found = daemonset_never_ready(load_snapshot(tmp_path), None, now)
    assert [f.rule for f in found] == ["daemonset-never-ready"]
    assert found[0].evidence["status.numberAvailable"] == 0


def test_binary_file_is_an_error_naming_the_file_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "nodes.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": []}))
    (tmp_path / "blob.json").write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(SnapshotError) as exc:
        load_snapshot(tmp_path)
    assert str(exc.value).startswith(f"{tmp_path / 'blob.json'}: not UTF-8 text")
