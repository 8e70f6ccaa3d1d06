"""The collective probe on real gloo ranks, its correctness check, and the NCCL log classification."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fabricguard.probes.bw import Expectation
from fabricguard.probes.collective import (
    CollectiveConfig,
    CollectiveResult,
    _verify,
    classify,
    exception_text,
    run_probe,
)

torch = pytest.importorskip("torch")

H200_LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "nccl" / "h200-2.28.9"


def test_two_gloo_ranks_measure_and_verify(tmp_path):
    cfg = CollectiveConfig(
        collectives=["all_reduce", "all_gather", "reduce_scatter"],
        sizes=[4096, 1 << 20],
        warmup=1,
        iters=2,
        backend="gloo",
        log_dir=str(tmp_path),
    )
    expect = Expectation(pool="local", expected_transports=["none", "socket"], floor_gbps=1e-6)
    res = run_probe(cfg, local_ranks=2, expect=expect, timeout_s=120)
    assert not res.failed, res.error
    assert [(r.collective, r.size) for r in res.rows] == [
        (c, s) for c in ("all_reduce", "all_gather", "reduce_scatter") for s in (4096, 1 << 20)
    ]
    assert all(r.wrong == 0 and r.busbw_gbps > 0 for r in res.rows)
    assert res.transport == "socket" and res.judgement.status.value == "pass"
    assert res.world_size == 2 and len(res.hosts) == 2


class _CorruptingDist:
    """A process group stand-in that delivers a result with ``k`` elements off by one."""

    def __init__(self, k: int) -> None:
        self.k = k

    def all_reduce(self, t):
        t[: self.k] += 1

    def all_gather_into_tensor(self, out, inp):
        out.copy_(torch.cat([inp, (torch.arange(inp.numel()) + 1) % 13]).to(out.dtype))
        out[: self.k] -= 1

    def reduce_scatter_tensor(self, out, inp):
        out.copy_(inp[: out.numel()])


@pytest.mark.parametrize("k", [0, 7])
def test_verification_counts_wrong_elements(k):
    # World of one for all_reduce (the sum is the input itself), of two for all_gather (rank 0's view).
    assert _verify(torch, _CorruptingDist(k), "all_reduce", 0, 1, 1000, 1000, torch.float32, "cpu") == k
    assert _verify(torch, _CorruptingDist(k), "all_gather", 0, 2, 200, 100, torch.float32, "cpu") == k
    # reduce_scatter that forgets to reduce: wrong wherever rank 1's value (i + 1) % 13 is non-zero, 12 of 13.
    assert _verify(torch, _CorruptingDist(0), "reduce_scatter", 0, 2, 26, 13, torch.float32, "cpu") == 12


def test_a_dead_rank_is_reported_not_hung(tmp_path):
    cfg = CollectiveConfig(collectives=["all_reduce"], sizes=[1024], backend="nccl", log_dir=str(tmp_path))
    if torch.cuda.is_available():
        pytest.skip("needs a machine without CUDA")
    res = run_probe(cfg, local_ranks=2, expect=None, timeout_s=60)
    assert res.failed and "needs CUDA" in res.error


def _nccl_result(tmp_path: Path, log: str) -> CollectiveResult:
    shutil.copy(H200_LOGS / log, tmp_path / "nccl.rank0.vm.466.log")
    return CollectiveResult(
        backend="nccl", world_size=1, rows=[], failed=False, error=None, log_dir=str(tmp_path), env={}
    )


def test_real_h200_forced_ib_log_is_a_failure(tmp_path):
    res = _nccl_result(tmp_path, "net-ib-forced-1rank.log")
    classify(res)
    assert res.failed and res.transport != "ib"
    assert res.nccl["failed"] is True


def test_real_h200_default_log_says_socket_not_rdma(tmp_path):
    res = _nccl_result(tmp_path, "default-1rank.log")
    classify(res)
    assert res.transport in ("socket", "none") and "Socket" in res.transport_why
    assert not res.failed


def test_exception_text_keeps_nccl_last_error():
    tb = (H200_LOGS / "net-ib-forced-1rank.log").read_text()
    tb = tb[tb.index("Traceback") : tb.index("[W1129")]
    msg = exception_text(tb)
    assert msg.startswith("torch.distributed.DistBackendError") and "Failed to initialize any NET plugin" in msg
