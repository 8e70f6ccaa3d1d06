"""One safe YAML loader for profiles, snapshots and kubeconfigs: duplicate keys, alias bombs, recursion."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricguard.cli import app
from fabricguard.doctor.snapshot import SnapshotError, load_snapshot
from fabricguard.profile import ProfileError, load_profile
from fabricguard.yamlsource import MAX_ALIAS_NODES, SourceError, YamlSyntaxError, loads_documents, loads_with_positions


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """The "billion laughs" document: ``width ** levels`` leaves from a few hundred bytes."""
    lines = ["a0: &a0 [" + ",".join(['"lol"'] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def test_alias_bomb_is_refused_fast() -> None:
    start = time.perf_counter()
    with pytest.raises(SourceError, match="alias bomb"):
        loads_documents(alias_bomb(), "bomb.yaml")
    assert time.perf_counter() - start < 1.0


def test_alias_bomb_in_a_profile_and_a_snapshot_is_refused_fast(tmp_path: Path) -> None:
    bomb = tmp_path / "profile.yaml"
    bomb.write_text("apiVersion: fabricguard.io/v1alpha1\nkind: PlatformProfile\n" + alias_bomb())
    start = time.perf_counter()
    r = CliRunner().invoke(app, ["profile", "check", str(bomb)], catch_exceptions=False)
    assert r.exit_code == 3 and "alias bomb" in r.stderr and str(bomb) in r.stderr
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "pods.yaml").write_text("apiVersion: v1\nkind: List\nitems: []\n" + alias_bomb())
    with pytest.raises(SnapshotError, match="alias bomb"):
        load_snapshot(snap)
    assert time.perf_counter() - start < 2.0


def test_modest_alias_use_is_accepted() -> None:
    # Anchors reused a few times (tolerations shared by pools) are what aliases are for.
    [doc] = loads_documents("t: &t [{key: a}, {key: b}]\np1: *t\np2: *t\nbase: &b {x: 1}\nmerged: {<<: *b, y: 2}\n")
    assert doc["p2"] == [{"key": "a"}, {"key": "b"}] and doc["merged"] == {"x": 1, "y": 2}
    # Just under the limit of repeated nodes is fine; the limit is about the repetition, not the size.
    width = int(MAX_ALIAS_NODES**0.5) - 10
    text = "a: &a [" + ",".join(["1"] * width) + "]\nb: [" + ",".join(["*a"] * width) + "]\n"
    [big] = loads_documents(text)
    assert len(big["b"]) == width


def test_duplicate_keys_are_refused_naming_both_lines() -> None:
    text = "apiVersion: fabricguard.io/v1alpha1\nkind: PlatformProfile\nmetadata:\n  name: a\n  name: b\n"
    with pytest.raises(SourceError) as exc:
        loads_with_positions(text, "p.yaml")
    assert exc.value.line == 5 and "duplicate key 'name' (first at line 4)" in str(exc.value)
    assert str(exc.value).startswith("p.yaml:5:")


def test_duplicate_keys_in_a_profile_file(tmp_path: Path) -> None:
    p = tmp_path / "dup.yaml"
    p.write_text(
        "apiVersion: fabricguard.io/v1alpha1\nkind: PlatformProfile\nmetadata: {name: a}\n"
        "spec:\n  pools: []\n  pools: []\n"
    )
    with pytest.raises(ProfileError, match=r"dup.yaml:6: duplicate key 'pools' \(first at line 5\)"):
        load_profile(p)


def test_same_key_in_different_mappings_is_fine() -> None:
    [doc] = loads_documents("a: {name: x}\nb: {name: y}\nc: [{name: 1}, {name: 2}]\n")
    assert doc["b"]["name"] == "y"


def test_an_alias_that_contains_itself_is_refused() -> None:
    with pytest.raises(SourceError, match="refers to a node that contains it"):
        loads_documents("a: &a [1, *a]\n", "self.yaml")


def test_nesting_too_deep_is_an_error_not_a_crash() -> None:
    with pytest.raises(SourceError, match=r"nested too deeply|invalid YAML"):
        loads_with_positions("[" * 100_000 + "]" * 100_000, "deep.yaml")


def test_syntax_errors_keep_the_line() -> None:
    with pytest.raises(YamlSyntaxError) as exc:
        loads_documents("a: 1\nb: [1, 2\n", "bad.yaml")
    assert exc.value.source == "bad.yaml" and exc.value.line is not None


def test_unsafe_tags_are_refused() -> None:
    with pytest.raises(YamlSyntaxError):
        loads_documents("a: !!python/object/apply:os.system ['true']\n")
