"""Canary outcomes from what the ranks left on Lustre: real NCCL logs (H200 2.28.9, synthetic multi-node)."""

from __future__ import annotations

from pathlib import Path

from controller_support import FIXTURES, NS, PROFILE, ROCE_LOGS, SOCKET_LOGS, ranks_wrote

from fabricguard.controller.outcome import Outcome, judge_canary, scheduler_reason
from fabricguard.profile import loads_profile

PROFILE_OBJ = loads_profile(PROFILE)
POOL = PROFILE_OBJ.pool()
JS = {"metadata": {"name": "fgc-gh200-roce-1"}}
FORCED_IB_FAILED = FIXTURES / "h200-2.28.9" / "net-ib-forced-1rank.log"


def _judge(lustre: Path):
    job = lustre / NS / "fgc-gh200-roce-1"
    return judge_canary(PROFILE_OBJ, POOL, job, job / ".fabricguard" / "nccl", job / ".fabricguard" / "canary")


def test_passed_over_roce_above_the_floor(tmp_path: Path) -> None:
    ranks_wrote(tmp_path, JS, ROCE_LOGS, busbw=40.0)
    j = _judge(tmp_path)
    assert j.outcome is Outcome.passed, j
    assert j.transport == "roce" and j.busbw["all_reduce"] == 40.0


def test_degraded_below_the_floor(tmp_path: Path) -> None:
    ranks_wrote(tmp_path, JS, ROCE_LOGS, busbw=20.0)
    j = _judge(tmp_path)
    assert j.outcome is Outcome.degraded and "floor 36.000 GB/s" in j.message, j


def test_fallback_from_the_ranks_logs(tmp_path: Path) -> None:
    ranks_wrote(tmp_path, JS, SOCKET_LOGS, busbw=40.0)  # even at a fine busbw: sockets are the finding
    j = _judge(tmp_path)
    assert j.outcome is Outcome.fallback and j.transport == "socket"
    assert any("NET/Socket" in e for e in j.evidence)


def test_failed_with_the_failing_nccl_line(tmp_path: Path) -> None:
    ranks_wrote(tmp_path, JS, [FORCED_IB_FAILED], busbw=0, failed=True,
                error="DistBackendError: NCCL error: internal error - Failed to initialize any NET plugin")
    j = _judge(tmp_path)
    assert j.outcome is Outcome.failed
    text = j.message + " ".join(j.evidence)
    assert "Failed to initialize any NET plugin" in text or "refused to fall back" in text, j


def test_no_result_at_all_is_failed_not_passed(tmp_path: Path) -> None:
    (tmp_path / NS / "fgc-gh200-roce-1").mkdir(parents=True)
    j = _judge(tmp_path)
    assert j.outcome is Outcome.failed and "no collective probe result" in j.message


def test_storage_off_lustre_is_degraded(tmp_path: Path) -> None:
    ranks_wrote(tmp_path, JS, ROCE_LOGS, busbw=40.0, mount_fstype="overlay")
    j = _judge(tmp_path)
    assert j.outcome is Outcome.degraded and "not lustre" in j.message, j


def test_unreadable_probe_output_is_failed(tmp_path: Path) -> None:
    job = ranks_wrote(tmp_path, JS, ROCE_LOGS, busbw=40.0)
    (job / ".fabricguard" / "canary" / "collective.rank0.json").write_text("Traceback (most recent call last):\n")
    j = _judge(tmp_path)
    assert j.outcome is Outcome.failed and "not the probe's JSON" in j.message


def test_scheduler_reason_is_the_latest_failed_scheduling_event() -> None:
    pods = [{"metadata": {"name": "p0"}}, {"metadata": {"name": "p1"}}]
    ev = [
        {"involvedObject": {"kind": "Pod", "name": "p0"}, "reason": "FailedScheduling",
         "message": "0/9 nodes are available: 9 Insufficient nvidia.com/gpu.", "lastTimestamp": "2025-09-30T12:00:05Z"},
        {"involvedObject": {"kind": "Pod", "name": "p1"}, "reason": "FailedScheduling",
         "message": "0/9 nodes are available: 6 Insufficient rdma/rdma_shared_device_a.",
         "lastTimestamp": "2025-09-30T12:01:05Z"},
        {"involvedObject": {"kind": "Pod", "name": "other"}, "reason": "FailedScheduling", "message": "not ours",
         "lastTimestamp": "2025-09-30T12:09:05Z"},
    ]
    assert "rdma_shared_device_a" in scheduler_reason(pods, ev)
    # events.k8s.io/v1 shape: regarding/note/eventTime.
    ev2 = [{"regarding": {"kind": "Pod", "name": "p0"}, "reason": "FailedScheduling", "note": "taint x",
            "eventTime": "2025-09-30T12:00:05.000000Z"}]
    assert scheduler_reason(pods, ev2) == "taint x"
    assert "no FailedScheduling event" in scheduler_reason(pods, [])


def test_a_slow_rail_is_named_with_its_nic_on_each_node(tmp_path: Path) -> None:
    from controller_support import rail_figures

    rails = rail_figures(["gpu-a", "gpu-b"], 44.0, slow={"gpu-b": 3})
    ranks_wrote(tmp_path, JS, ROCE_LOGS, busbw=40.0, rails=rails)  # the whole test is above the floor
    j = _judge(tmp_path)
    assert j.outcome is Outcome.degraded, j
    assert [(r.rail, r.nics) for r in j.rails] == [(3, {"gpu-a": "mlx5_3", "gpu-b": "mlx5_3"})]
    assert "slow rail: rail 3 (gpu-a mlx5_3, gpu-b mlx5_3): 11.0 GB/s alone" in j.message
    # Every rail slow alike names none (the node or the fabric, not a rail); a hostile list is skipped.
    ranks_wrote(tmp_path, JS, ROCE_LOGS, busbw=40.0, rails=[*rail_figures(["a", "b"], 12.0), {"rail": "x"},
                                                              {"rail": 9, "busbw_gbps": "fast"}, 7])
    assert _judge(tmp_path).rails == []


def test_a_result_that_is_a_fifo_a_link_or_huge_fails_the_canary_naming_it_and_is_never_read(tmp_path: Path) -> None:
    """The result folder is on the Lustre claim every tenant writes to. Before: ``glob`` + ``read_text`` by path,
    so a FIFO named like a rank's result blocked the controller's pass on its read for good, a link was followed
    into another tenant's folder, and a huge file was read whole (issue 25 leftover (c))."""
    import os
    import threading

    from fabricguard.controller import outcome

    ranks_wrote(tmp_path, JS, ROCE_LOGS, busbw=40.0)
    results = tmp_path / NS / "fgc-gh200-roce-1" / ".fabricguard" / "canary"
    secret = tmp_path / "team-b" / "secret.json"
    secret.parent.mkdir()
    secret.write_text((results / "collective.rank0.json").read_text().replace("40.0", "123456.0"))
    os.mkfifo(results / "collective.rank7.json")
    (results / "collective.rank8.json").symlink_to(os.path.relpath(secret, results))
    (results / "collective.rank9.json").write_bytes(b" " * (outcome.MAX_RESULT_BYTES + 1))
    got: list = []
    t = threading.Thread(target=lambda: got.append(_judge(tmp_path)), daemon=True)
    t.start()
    t.join(20)
    assert got, "the canary's judge blocked on a FIFO"
    (j,) = got
    assert j.outcome is Outcome.failed, j
    text = j.message + " ".join(j.evidence)
    assert "collective.rank7.json: is a FIFO" in text and "collective.rank8.json: is a link" in text, text
    assert "collective.rank9.json: is 16,777,217 bytes" in text, text
    assert "123456" not in repr(j)
