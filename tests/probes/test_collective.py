"""The collective probe on real gloo ranks, its correctness check, and the NCCL log classification."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
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

# torch is imported by the tests that use it, not at collection: every xdist worker collects this module, and
# importing torch costs each of them 3 CPU-seconds.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")


@pytest.fixture
def torch() -> Any:
    return pytest.importorskip("torch")

H200_LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "nccl" / "h200-2.28.9"


def test_two_gloo_ranks_measure_verify_and_stream_rows(tmp_path):
    """One run of two real ranks (each costs a torch import): every collective measured and verified, and each row
    handed to ``on_row`` while rank 0 is still measuring (before its result file exists)."""
    seen: list[tuple[str, int, bool]] = []
    sizes = [4096, 1 << 20, 1 << 22]  # the later sizes keep rank 0 busy well after the first row
    cfg = CollectiveConfig(
        collectives=["all_reduce", "all_gather", "reduce_scatter"],
        sizes=sizes,
        warmup=1,
        iters=2,
        backend="gloo",
        log_dir=str(tmp_path),
    )
    expect = Expectation(pool="local", expected_transports=["none", "socket"], floor_gbps=1e-6)
    res = run_probe(cfg, local_ranks=2, expect=expect, timeout_s=120,
                    on_row=lambda row: seen.append((row.collective, row.size, (tmp_path / "result.json").exists())))
    assert not res.failed, res.error
    assert [(r.collective, r.size) for r in res.rows] == [
        (c, s) for c in ("all_reduce", "all_gather", "reduce_scatter") for s in sizes
    ]
    assert all(r.wrong == 0 and r.busbw_gbps > 0 for r in res.rows)
    assert res.transport == "socket" and res.judgement.status.value == "pass"
    assert res.world_size == 2 and len(res.hosts) == 2
    assert [(c, s) for c, s, _ in seen] == [(r.collective, r.size) for r in res.rows]
    assert seen[0][2] is False  # the first row arrived while rank 0 was still measuring
    assert not res.log_dir_removed and tmp_path.is_dir()


class _CorruptingDist:
    """A process group stand-in that delivers a result with ``k`` elements off by one."""

    def __init__(self, k: int) -> None:
        self.k = k

    def all_reduce(self, t):
        t[: self.k] += 1

    def all_gather_into_tensor(self, out, inp):
        import torch

        out.copy_(torch.cat([inp, (torch.arange(inp.numel()) + 1) % 13]).to(out.dtype))
        out[: self.k] -= 1

    def reduce_scatter_tensor(self, out, inp):
        out.copy_(inp[: out.numel()])


@pytest.mark.parametrize("k", [0, 7])
def test_verification_counts_wrong_elements(k, torch):
    # World of one for all_reduce (the sum is the input itself), of two for all_gather (rank 0's view).
    assert _verify(torch, _CorruptingDist(k), "all_reduce", 0, 1, 1000, 1000, torch.float32, "cpu") == k
    assert _verify(torch, _CorruptingDist(k), "all_gather", 0, 2, 200, 100, torch.float32, "cpu") == k
    # reduce_scatter that forgets to reduce: wrong wherever rank 1's value (i + 1) % 13 is non-zero, 12 of 13.
    assert _verify(torch, _CorruptingDist(0), "reduce_scatter", 0, 2, 26, 13, torch.float32, "cpu") == 12


def test_a_dead_rank_is_reported_not_hung(tmp_path, torch):
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


def _probe_cmd(*extra: str) -> list[str]:
    return [sys.executable, "-m", "fabricguard", "probe", "collective", "--backend", "gloo", "-w", "1", "-n", "3", *extra]


@pytest.mark.slow
def test_many_ranks_stream_rows_and_remove_their_temporary_logs():
    """Three ranks: each row is on stdout while the ranks are still measuring; the temp log dir is gone after."""
    cmd = _probe_cmd("--local-ranks", "3", "-b", "256K", "-e", "8M", "-c", "all_reduce,all_gather")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "200"})
    assert proc.stdout is not None
    lines, running_at_first_row = [], None
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        if running_at_first_row is None and re.match(r"^\s+262144\s", line):
            running_at_first_row = proc.poll() is None
    assert proc.wait(timeout=300) == 0, "\n".join(lines)
    assert running_at_first_row, "the first row came out only after the probe had finished"
    rows = [ln for ln in lines if re.match(r"^\s+\d+\s+\d+\s+float", ln)]
    assert len(rows) == 2 * 6
    [done] = [ln for ln in lines if "read and removed" in ln]
    log_dir = Path(re.search(r"logs in (\S+)", done).group(1))
    assert log_dir.name.startswith("fabricguard-collective-") and not log_dir.exists()


@pytest.mark.slow
def test_out_directory_is_kept_and_a_rerun_does_not_replay_old_rows(tmp_path):
    out = tmp_path / "logs"
    for _ in range(2):
        r = subprocess.run(
            _probe_cmd("--local-ranks", "2", "-b", "64K", "-e", "128K", "--out", str(out), "--json"),
            capture_output=True, text=True, timeout=300,
        )
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout)
        assert res["log_dir"] == str(out) and res["log_dir_removed"] is False
        schema = json.loads((Path(__file__).parents[2] / "docs/schemas/CollectiveProbe.schema.json").read_text())
        assert list(res)[:3] == ["apiVersion", "kind", "verdict"]
        assert not list(jsonschema.Draft202012Validator(schema).iter_errors(res))
    assert (out / "config.json").is_file() and (out / "rank0.stderr.txt").is_file()
    assert len((out / "rows.jsonl").read_text().splitlines()) == 2  # this run's two sizes, not four


@pytest.mark.slow
def test_rails_are_timed_alone_between_the_nodes(tmp_path):
    cfg = CollectiveConfig(collectives=["all_reduce"], sizes=[1 << 16], warmup=1, iters=2, backend="gloo",
                           log_dir=str(tmp_path), rails=True, local_world=2)
    res = run_probe(cfg, local_ranks=4, expect=None, timeout_s=120)  # 2 "nodes" x 2 ranks on this machine
    assert not res.failed, res.error
    assert [r["rail"] for r in res.rails] == [0, 1]
    assert all(r["busbw_gbps"] > 0 and r["bytes"] == 1 << 16 for r in res.rails)
    assert [[m["rank"] for m in r["members"]] for r in res.rails] == [[0, 2], [1, 3]]
    assert all(m["nic"] is None and m["node"] for r in res.rails for m in r["members"])  # gloo: no GPU, no NIC
