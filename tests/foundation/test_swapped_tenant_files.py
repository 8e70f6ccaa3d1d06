"""A tenant's file swapped for a link between the listing and the read is refused, naming the file (issue 25).

``walk_files`` lists a job's folder without following a link out of it, but the readers then opened what it
found by path: a tenant (or a race with its own pods) that replaced ``mountinfo``, ``steps.jsonl`` or a saved RAS
report with a relative link into another tenant's folder right after the listing had that tenant's file read
and quoted in this job's verdict. The swap is made deterministic here by wrapping the listing (and the
pre-check that opens each named file) so that it happens exactly in between.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from fabricguard import userfiles
from fabricguard.profile import load_profile
from fabricguard.verdict import JobInputError, judge_job
from fabricguard.verdict import job as verdict_job

ROOT = Path(__file__).resolve().parents[2]
HEALTHY = ROOT / "examples" / "jobs" / "rdma-healthy"
GKE = ROOT / "examples" / "profiles" / "gke-a3-ultra.yaml"
RAS = ROOT / "tests" / "fixtures" / "ras"
SECRET = "teamb-secret-lfs"  # in each of team-b's files: never in team-a's verdict


def _tenants(tmp: Path) -> tuple[Path, Path]:
    """team-a's finished job (the healthy example plus a saved RAS report) and team-b's folder, whose files
    carry ``SECRET``."""
    mine = tmp / "lustre" / "team-a" / "llm"
    shutil.copytree(HEALTHY, mine)
    shutil.copy(RAS / "v2.30.7-healthy.json", mine / "ras-1.json")
    theirs = tmp / "lustre" / "team-b" / "secret"
    theirs.mkdir(parents=True)
    mi = (HEALTHY / "mountinfo-worker-0").read_text().replace("172.16.0.5@tcp:/lfsprod", f"10.9.9.9@o2ib:/{SECRET}")
    (theirs / "mountinfo-worker-0").write_text(mi)
    (theirs / "steps.jsonl").write_text("".join(json.dumps({"step": i, "seconds": 99.5, "run": SECRET}) + "\n"
                                                for i in range(40)))
    ras = json.loads((RAS / "v2.30.7-hung-rank9-q1.json").read_text())
    (theirs / "ras-1.json").write_text(json.dumps(ras).replace("10.8.0.19", SECRET))
    return mine, theirs


def _swap(mine: Path, theirs: Path, name: str) -> None:
    """``mine/name`` becomes a relative link to ``theirs/name``, as a tenant's ``ln -sf`` would leave it."""
    (mine / name).unlink()
    (mine / name).symlink_to(os.path.relpath(theirs / name, mine))


def _after(real: Callable[..., object], then: Callable[[], None]) -> Callable[..., object]:
    done = False

    def hook(*args: object, **kw: object) -> object:
        nonlocal done
        out = real(*args, **kw)
        if not done:
            done = True
            then()
        return out

    return hook


@pytest.mark.parametrize("when", ["listed", "checked"])
@pytest.mark.parametrize("name", ["mountinfo-worker-0", "steps.jsonl", "ras-1.json"])
def test_a_file_swapped_for_a_link_after_the_listing_is_never_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   name: str, when: str) -> None:
    mine, theirs = _tenants(tmp_path)
    prof = load_profile(GKE)
    before = judge_job(mine, prof, "h200-rdma")  # the job as it is: judged, nothing of team-b's
    assert before.verdict.value == "pass", [r.message for r in before.reasons]
    swap = _after(verdict_job.walk_files if when == "listed" else verdict_job.check_in,
                  lambda: _swap(mine, theirs, name))
    if when == "checked" and name == "ras-1.json":  # a RAS report is not pre-checked: swap after the listing
        swap = _after(verdict_job.walk_files, lambda: _swap(mine, theirs, name))
        monkeypatch.setattr(verdict_job, "walk_files", swap)
    else:
        monkeypatch.setattr(verdict_job, "walk_files" if when == "listed" else "check_in", swap)
    try:
        v = judge_job(mine, prof, "h200-rdma")
    except JobInputError as exc:
        said = str(exc)
        assert name != "ras-1.json"
    else:
        assert name == "ras-1.json"  # a RAS report that cannot be read is a warning naming it
        said = json.dumps(v.to_dict())
        (r,) = [r for r in v.reasons if r.check == "ras"]
        assert r.message.startswith(f"{mine / name}: ") and "is a link" in r.message, r.message
        assert v.ras is None
    assert (mine / name).is_symlink()  # the swap did happen in between
    assert str(mine / name) in said and "link" in said, said
    assert SECRET not in said and str(theirs) not in said, said


def test_a_folder_swapped_for_a_link_after_the_listing_is_never_read(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder inside the job (its steps under ``metrics/``) replaced by a link to team-b's folder: the file's
    last part is no link, so ``O_NOFOLLOW`` alone would open it; the opened file's real path is outside."""
    mine, theirs = _tenants(tmp_path)
    (mine / "metrics").mkdir()
    (mine / "steps.jsonl").rename(mine / "metrics" / "steps.jsonl")

    def swap() -> None:
        shutil.rmtree(mine / "metrics")
        (mine / "metrics").symlink_to(os.path.relpath(theirs, mine))

    monkeypatch.setattr(verdict_job, "walk_files", _after(verdict_job.walk_files, swap))
    with pytest.raises(JobInputError) as info:
        judge_job(mine, load_profile(GKE), "h200-rdma")
    said = str(info.value)
    assert str(mine / "metrics" / "steps.jsonl") in said and "outside the job's directory" in said, said
    assert SECRET not in said


def test_read_within_refuses_links_devices_and_oversize_on_the_descriptor(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * 100)
    (tmp_path / "link").symlink_to(tmp_path / "big")
    os.mkfifo(tmp_path / "fifo")
    assert userfiles.read_bytes(tmp_path / "big", within=tmp_path) == b"x" * 100
    for name, problem in (("link", "is a link"), ("fifo", "FIFO"), ("big", "more than the 10")):
        with pytest.raises(userfiles.SourceError) as info:
            userfiles.read_bytes(tmp_path / name, max_bytes=10, within=tmp_path)
        assert str(info.value).startswith(f"{tmp_path / name}: ") and problem in str(info.value), info.value
