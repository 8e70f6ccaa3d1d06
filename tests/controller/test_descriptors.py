"""Bounded descriptors (issue 25 item 4, issue 31): following a job never costs another tenant its verdict.

The follower opens, reads and closes; running out of descriptors is counted (a metric and an alert), and the
file is read on a later poll, never judged unreadable.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

from controller_support import SOCKET_LOGS

from fabricguard import descriptors
from fabricguard.nccl.follow import LogFollower

HERE = Path(__file__).resolve().parent


def test_a_1100_rank_job_under_a_1024_soft_limit_changes_no_other_jobs_verdict(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, str(HERE / "descriptor_child.py"), str(tmp_path), "1024"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout)
    assert got["soft"] == 1024
    assert set(got["before"].values()) == {"pass"}, got["before"]
    assert got["during"] == got["before"] and got["after"] == got["before"]
    # The big job itself is followed in full: its last rank's socket line is read, nothing is unread.
    assert got["transport"] == "socket" and got["unread"] == []
    assert got["files"] == 1100 and got["bytes"] == got["size"]
    assert got["held"] < 32  # no descriptor per rank file between polls (before: 1,100)


def test_running_out_of_descriptors_is_counted_and_read_later_never_a_verdict(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    d.mkdir()
    (d / "rank0.log").write_bytes(SOCKET_LOGS[0].read_bytes())
    f = LogFollower(d)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    before = descriptors.SHORTAGES.total
    held: list[int] = []
    try:
        f.poll()  # lists the folder (needs descriptors), then: the process fills its table
        f._files[str(d / "rank0.log")].offset = 0  # as if nothing had been read: the next poll must open it
        resource.setrlimit(resource.RLIMIT_NOFILE, (descriptors.open_count() + 8, hard))
        try:
            while True:
                held.append(os.open("/dev/null", os.O_RDONLY))
        except OSError:
            pass
        stats = f.poll()
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert stats.short >= 1 and descriptors.SHORTAGES.total == before + stats.short
    assert f.verdict().report.unread == []  # not "cannot read": the job is not judged on our shortage
    f2 = LogFollower(d)
    f2.poll()
    assert f2.verdict().transport.value == "socket"


def test_the_soft_limit_is_raised_to_the_hard_limit_and_said() -> None:
    code = ("import resource; from fabricguard import descriptors as d; s, h = resource.getrlimit("
            "resource.RLIMIT_NOFILE); resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, h), h)); "
            "lim = d.raise_soft_limit(); print(lim.soft == h, lim.hard == h, lim.raised_from == min(256, h) "
            "or h == 256)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == ["True", "True", "True"], r.stderr
