"""nccl-tests conventions: sizes, bus-bandwidth factors, the table and the judgement."""

from __future__ import annotations

import pytest

from fabricguard.probes.bw import (
    Expectation,
    bandwidths,
    bus_factor,
    element_counts,
    expectation_for,
    judge,
    make_row,
    parse_size,
    render_table,
    size_list,
)
from fabricguard.probes.result import Status
from fabricguard.profile import embedded_profile


def test_sizes_like_nccl_tests():
    assert parse_size("64M") == 64 * 1024 * 1024 and parse_size("8") == 8 and parse_size("1K") == 1024
    assert size_list(8, 128, 2) == [8, 16, 32, 64, 128]
    assert size_list(parse_size("1M"), parse_size("64M"), 4) == [1 << 20, 1 << 22, 1 << 24, 1 << 26]
    assert size_list(100, 400, step=100) == [100, 200, 300, 400]
    with pytest.raises(ValueError):
        parse_size("64X")
    with pytest.raises(ValueError):
        size_list(64, 8)


def test_bus_factors_from_performance_md():
    assert bus_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert bus_factor("all_gather", 8) == pytest.approx(7 / 8)
    assert bus_factor("reduce_scatter", 2) == pytest.approx(0.5)
    assert bus_factor("all_reduce", 1) == 0.0
    # 1 GiB in 10 ms over 16 ranks: algbw = S/t, busbw = algbw x 2(n-1)/n.
    alg, bus = bandwidths("all_reduce", 1 << 30, 0.01, 16)
    assert alg == pytest.approx(107.374, rel=1e-4) and bus == pytest.approx(alg * 30 / 16)


def test_element_counts_split_evenly_over_ranks():
    assert element_counts("all_reduce", 1000, 4, 3) == (250, 250)
    assert element_counts("all_gather", 1000, 4, 3) == (249, 83)  # total rounded down to a multiple of ranks
    assert element_counts("reduce_scatter", 8, 4, 4) == (0, 0)


def test_table_reads_like_nccl_tests():
    rows = [
        make_row("all_reduce", 1 << 20, "float", 2, 0.002, 0),
        make_row("all_reduce", 1 << 22, "float", 2, 0.004, 3),
    ]
    t = render_table(rows)
    assert "#wrong" in t and "(elements)" in t
    assert "     1048576       262144    float    sum     2000.0    0.524    0.524       0" in t
    assert "Peak bus bandwidth    : 1.049 GB/s" in t


def _expect(floor: float | None = 1.0) -> Expectation:
    return Expectation(
        pool="p", expected_transports=["ib", "roce"], floor_gbps=floor, baseline_gbps=2.0, floor_fraction=0.5
    )


def test_judgement():
    good = [make_row("all_reduce", 1 << 26, "float", 2, 0.01, 0)]  # 6.7 GB/s
    assert judge(good, "ib", "", _expect()).status is Status.passed
    j = judge(good, "socket", "fell back", _expect())
    assert j.status is Status.failed and "socket" in j.checks[2].detail
    slow = [make_row("all_reduce", 1 << 20, "float", 2, 0.01, 0)]
    j = judge(slow, "ib", "", _expect())
    assert j.status is Status.degraded and "< floor 1.000" in j.checks[-1].detail
    wrong = [make_row("all_reduce", 1 << 26, "float", 2, 0.01, 5)]
    assert judge(wrong, "ib", "", _expect()).status is Status.failed
    failed = judge([], "unknown", "", _expect(), failed=True, failure="Failed to initialize any NET plugin")
    assert failed.status is Status.failed and "NET plugin" in failed.checks[0].detail
    assert judge(good, "ib", "", _expect(None)).checks[-1].status is Status.skipped


def test_local_profile_expects_sockets():
    e = expectation_for(embedded_profile("local").pool())
    assert "socket" in e.expected_transports and e.nccl_net is None and e.floor_gbps is not None
