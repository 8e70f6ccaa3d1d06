"""Following a running job's NCCL logs: real lines appended by another process, rotation, truncation, half lines."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from fabricguard.nccl.follow import LogFollower
from fabricguard.nccl.scan import inspect_paths
from fabricguard.profile.model import Transport

ROOT = Path(__file__).resolve().parents[2]
SOCKET_JOB = ROOT / "examples" / "jobs" / "socket-fallback" / "logs"
RDMA_JOB = ROOT / "examples" / "jobs" / "rdma-healthy" / "logs"
WRITER = Path(__file__).with_name("log_writer.py")


def test_a_job_writing_its_logs_is_judged_socket_while_it_runs(tmp_path: Path) -> None:
    dst = tmp_path / "job"
    writer = subprocess.Popen([sys.executable, str(WRITER), str(SOCKET_JOB), str(dst), "2000"],
                              stdout=subprocess.PIPE, text=True)
    follower = LogFollower(dst)
    seen: list[Transport] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            follower.poll()
            v = follower.verdict()
            seen.append(v.transport)
            if v.final:
                break
            time.sleep(0.02)
        assert v.final and v.transport == Transport.socket
        decided_at = follower.total.bytes
        assert Transport.socket not in seen[:-1]
    finally:
        writer.wait(timeout=60)
        follower.poll()
        follower.close()
    # Nothing was read twice: what the follower read is exactly what was written.
    written = sum(p.stat().st_size for p in dst.iterdir())
    assert follower.total.bytes == written
    # Decided from the first part of the logs (the init), not after the job wrote them all.
    assert decided_at < written / 2
    whole = inspect_paths([dst])
    final = LogFollower(dst)
    final.poll()
    assert final.verdict().report.connections == whole.connections
    final.close()


def test_rdma_so_far_is_not_final(tmp_path: Path) -> None:
    dst = tmp_path / "job"
    dst.mkdir()
    for p in RDMA_JOB.glob("*.log"):
        (dst / p.name).write_bytes(p.read_bytes())
    f = LogFollower(dst)
    f.poll()
    v = f.verdict()
    assert v.transport in (Transport.ib, Transport.roce) and not v.final
    # A later communicator that connects over sockets makes the job socket, and that is final.
    with (dst / "gpu-node-000.log").open("ab") as out:
        out.write(b"gpu-node-000:4000:4100 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0\n")
    f.poll()
    v = f.verdict()
    assert v.transport == Transport.socket and v.final
    f.close()


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def test_half_lines_wait_for_their_newline(tmp_path: Path) -> None:
    for p in RDMA_JOB.glob("*.log"):
        (tmp_path / p.name).write_bytes(p.read_bytes())
    line = b"gpu-node-001:4008:4200 [0] NCCL INFO Channel 01/0 : 8[0] -> 0[0] [send] via NET/Socket/0\n"
    log = tmp_path / "gpu-node-001.log"
    with log.open("ab") as out:
        out.write(line[:60])  # the rank is still writing this line: "via NET/Soc"
    f = LogFollower(tmp_path)
    f.poll()
    assert f.verdict().transport in (Transport.ib, Transport.roce)
    with log.open("ab") as out:
        out.write(line[60:])
    f.poll()
    assert f.verdict().transport == Transport.socket
    f.close()


def test_rotation_drains_the_old_file_and_truncation_starts_over(tmp_path: Path) -> None:
    src = next(iter(sorted(SOCKET_JOB.glob("*.log"))))
    lines = _lines(src)
    via = next(i for i, line in enumerate(lines) if b"via NET/Socket" in line)
    log = tmp_path / "rank0.log"
    log.write_bytes(b"".join(lines[:10]))
    f = LogFollower(tmp_path)
    f.poll()
    # The writer appends the socket line, then the file is rotated away before the next poll.
    with log.open("ab") as out:
        out.write(b"".join(lines[10 : via + 1]).rstrip(b"\n"))  # unterminated last line
    os.rename(log, tmp_path / "rank0.log.1")
    log.write_bytes(b"gpu-node-000:4000:4000 [0] NCCL INFO NCCL version 2.27.7+cuda12.9\n")
    stats = f.poll()
    assert stats.rotations == 1
    assert f.verdict().transport == Transport.socket  # read through the old handle
    # In-place truncation: read again from the start, with line numbers from 1.
    with log.open("r+b") as out:
        out.truncate(0)
    log.write_bytes(b"gpu-node-000:4000:4000 [0] NCCL WARN Call to connect returned Connection refused\n")
    stats = f.poll()
    assert stats.truncations == 1
    report = f.verdict().report
    assert any(e.line == 1 and "Connection refused" in e.text for e in [*report.failures, *report.evidence])
    f.close()


def test_binary_files_and_a_missing_directory_are_not_followed(tmp_path: Path) -> None:
    (tmp_path / "core").write_bytes(b"\x00\x01" * 100)
    f = LogFollower(tmp_path)
    stats = f.poll()
    assert stats.files == 0 and f.verdict().report.nccl_output is False
    g = LogFollower(tmp_path / "not-yet")  # the job has not created its log directory yet
    assert g.poll().files == 0


PUBLIC = ROOT / "tests" / "fixtures" / "nccl" / "public"


def test_following_real_pasted_logs_concludes_what_inspect_does(tmp_path: Path) -> None:
    """Logs people pasted in public issues, appended in two halves: the follower ends where nccl inspect does."""
    cases = sorted(d for d in PUBLIC.iterdir() if d.is_dir())
    assert len(cases) >= 10
    for case in cases:
        dst = tmp_path / case.name
        dst.mkdir()
        f = LogFollower(dst)
        logs = [p for p in sorted(case.iterdir()) if p.is_file() and p.suffix != ".md"]
        for p in logs:
            data = p.read_bytes()
            (dst / p.name).write_bytes(data[: len(data) // 2])
        f.poll()
        for p in logs:
            with (dst / p.name).open("ab") as out:
                out.write(p.read_bytes()[len(p.read_bytes()) // 2 :])
        f.poll()
        got, want = f.verdict().report, inspect_paths([dst])
        f.close()
        assert (got.inter_node_transport, got.failed, got.nodes) == (
            want.inter_node_transport, want.failed, want.nodes), case.name


def test_a_folder_given_by_its_stat_is_listed_again_exactly_when_it_may_hold_a_new_file(tmp_path: Path,
                                                                                         monkeypatch) -> None:
    """The live loop hands each follower the stat it took of the job's folder (the link check's): a quiet folder is
    not listed again, a new rank file moves the mtime and is read, a listing taken within the mtime's granularity of
    a change is not trusted, and a subfolder keeps its own stat."""
    from fabricguard.nccl import follow

    listings: list[Path] = []
    real_walk = follow.walk_files
    monkeypatch.setattr(follow, "walk_files", lambda d, **kw: (listings.append(d), real_walk(d, **kw))[1])
    (a, b) = sorted(RDMA_JOB.iterdir())[:2]
    (tmp_path / a.name).write_bytes(a.read_bytes())
    old = time.time() - 60
    os.utime(tmp_path, (old, old))
    fol = LogFollower(tmp_path)
    for _ in range(4):
        fol.poll(os.stat(tmp_path))
    assert len(listings) == 1 and fol.total.files == 1
    (tmp_path / b.name).write_bytes(b.read_bytes())  # the mtime moves, just now: listed, and listed again until old
    fol.poll(os.stat(tmp_path))
    assert fol.total.files == 2 and len(listings) == 2
    fol.poll(os.stat(tmp_path))
    assert len(listings) == 3  # the listing came within the mtime's granularity of the change: not trusted
    os.utime(tmp_path, (old, old))
    fol.poll(os.stat(tmp_path))
    fol.poll(os.stat(tmp_path))
    assert len(listings) == 4
    sub = tmp_path / "rank-1"
    sub.mkdir()
    os.utime(tmp_path, (old - 30, old - 30))  # changed (a minute ago): listed once more, the subfolder with it
    fol.poll(os.stat(tmp_path))
    n = len(listings)
    assert n == 5
    (sub / "late.log").write_bytes(a.read_bytes())  # only the subfolder's mtime moves
    fol.poll(os.stat(tmp_path))
    assert len(listings) == n + 1 and fol.total.files == 3
    assert fol.verdict().transport == inspect_paths([tmp_path]).inter_node_transport
