"""A followed job's folder: proven free of links once, proven again whenever its path leads somewhere else."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fabricguard.userfiles import LinkFreeFolder, SourceError


def _tenants(tmp_path: Path) -> tuple[Path, Path, Path]:
    root = tmp_path / "lustre"
    mine = root / "team-a" / "llm" / "logs"
    theirs = root / "team-b" / "secret" / "logs"
    for d in (mine, theirs):
        d.mkdir(parents=True)
    return root, mine, theirs


def test_a_proven_folder_costs_one_stat_per_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, mine, _ = _tenants(tmp_path)
    folder = LinkFreeFolder(root, mine)
    folder.check()
    calls = {"lstat": 0}
    real = os.lstat

    def counting(path: object, *a: object, **k: object) -> os.stat_result:
        calls["lstat"] += 1
        return real(path, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "lstat", counting)
    for _ in range(100):
        folder.check()
    assert calls["lstat"] == 0


@pytest.mark.parametrize("swapped", ["job", "namespace"])
def test_a_part_swapped_for_a_link_after_the_proof_is_refused(tmp_path: Path, swapped: str) -> None:
    root, mine, theirs = _tenants(tmp_path)
    folder = LinkFreeFolder(root, mine)
    folder.check()
    if swapped == "job":  # team-a/llm -> ../team-b/secret: the same relative path then leads into team-b
        (root / "team-a" / "llm" / "logs").rmdir()
        (root / "team-a" / "llm").rmdir()
        (root / "team-a" / "llm").symlink_to(Path("..") / "team-b" / "secret")
        link = root / "team-a" / "llm"
    else:  # team-a -> team-b, where team-b also holds an llm/logs
        (theirs.parent.parent / "llm" / "logs").mkdir(parents=True)
        os.rename(root / "team-a", tmp_path / "old-team-a")
        (root / "team-a").symlink_to("team-b")
        link = root / "team-a"
    with pytest.raises(SourceError) as err:
        folder.check()
    assert str(link) in str(err.value) and "is a link" in str(err.value)
    with pytest.raises(SourceError):  # and again: nothing was remembered from the refused check
        folder.check()


def test_a_folder_made_again_is_proven_again_and_a_missing_one_is_quiet(tmp_path: Path) -> None:
    root, mine, _ = _tenants(tmp_path)
    folder = LinkFreeFolder(root, mine)
    folder.check()
    mine.rmdir()
    folder.check()  # not there (yet, or any more): nothing is read through it
    mine.mkdir()
    folder.check()
