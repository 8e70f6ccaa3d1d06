"""Storage probe: parsers on realistic tool output, refusals, the built-in and fio engines, clean-up."""

from __future__ import annotations

import os
import re
import shutil
from collections import namedtuple
from pathlib import Path

import pytest

from fabricguard.probes.result import Status
from fabricguard.probes.storage import (
    MIN_PHASE_S,
    MiB,
    StorageConfig,
    StorageRefused,
    bad_imports,
    lustre_checks,
    mark_meaningful,
    parse_fio,
    parse_health_check,
    parse_imports,
    parse_lfs_df,
    percentiles,
    prepare_workdir,
    probe_storage,
    size_for_meaning,
    space_problem,
)

FIX = Path(__file__).parent / "fixtures"

IMPORTS = """\
osc.lfsfs-OST0000-osc-ffff9c2a4b1e7800.import=
import:
    name: lfsfs-OST0000-osc-ffff9c2a4b1e7800
    target: lfsfs-OST0000_UUID
    state: FULL
    connect_flags: [ write_grant, server_lock, version, request_portal, max_byte_per_rpc ]
    import_flags: [ replayable, pingable, connect_tried ]
    connection:
       failover_nids: [ 10.1.0.5@tcp ]
       current_connection: 10.1.0.5@tcp
       connection_attempts: 1
       generation: 1
       in-progress_invalidations: 0
    state_history:
       - [ 1718000000, CONNECTING ]
       - [ 1718000000, FULL ]
osc.lfsfs-OST0001-osc-ffff9c2a4b1e7800.import=
import:
    name: lfsfs-OST0001-osc-ffff9c2a4b1e7800
    target: lfsfs-OST0001_UUID
    state: DISCONN
    connection:
       current_connection: 10.1.0.6@tcp
mdc.lfsfs-MDT0000-mdc-ffff9c2a4b1e7800.import=
import:
    name: lfsfs-MDT0000-mdc-ffff9c2a4b1e7800
    target: lfsfs-MDT0000_UUID
    state: IDLE
"""

LFS_DF = """\
UUID                   1K-blocks        Used   Available Use% Mounted on
lfsfs-MDT0000_UUID     1141472096     6170368  1096520000   1% /mnt/lustre[MDT:0]
lfsfs-OST0000_UUID    18888493056  1573463040 17124904960   9% /mnt/lustre[OST:0]
OST0001             : inactive device

filesystem_summary:   18888493056  1573463040 17124904960   9% /mnt/lustre
"""


def test_lustre_parsers():
    assert parse_health_check("health_check=healthy\n") == (True, "healthy")
    assert parse_health_check("health_check=NOT HEALTHY\n") == (False, "NOT HEALTHY")
    states = parse_imports(IMPORTS)
    assert states == {
        "osc.lfsfs-OST0000-osc-ffff9c2a4b1e7800": "FULL",
        "osc.lfsfs-OST0001-osc-ffff9c2a4b1e7800": "DISCONN",
        "mdc.lfsfs-MDT0000-mdc-ffff9c2a4b1e7800": "IDLE",
    }
    assert bad_imports(states) == {"osc.lfsfs-OST0001-osc-ffff9c2a4b1e7800": "DISCONN"}
    df = parse_lfs_df(LFS_DF)
    assert [(t["kind"], t["index"]) for t in df["targets"]] == [("MDT", 0), ("OST", 0)]
    assert df["problems"] == ["OST0001             : inactive device"]


def test_lustre_checks_with_recorded_tool_output():
    answers = {"health_check": "health_check=healthy\n", "osc.*.import": IMPORTS, "df": LFS_DF}

    def run(args):
        key = next(k for k in answers if k in args)
        return 0, answers[key]

    c = {x.name: x for x in lustre_checks("/mnt/lustre", run)}
    assert c["lustre.health"].status is Status.passed
    assert c["lustre.imports"].status is Status.failed and "DISCONN" in c["lustre.imports"].detail
    assert c["lustre.targets"].status is Status.failed and "inactive" in c["lustre.targets"].detail


def test_fio_json_from_real_fio():
    w = parse_fio((FIX / "fio-3.33-write.json").read_text())
    assert w["version"] == "fio-3.33" and w["write"]["io_bytes"] == 32 * MiB and w["write"]["jobs"] == 2
    assert set(w["write"]["latency_ms"]) == {"p50", "p90", "p99"} and not w["errors"]
    r = parse_fio((FIX / "fio-3.33-read-verify.json").read_text())
    assert r["read"]["MBps"] > 0 and not r["errors"]
    bad = parse_fio((FIX / "fio-3.33-read-verify-corrupt.json").read_text())
    assert bad["errors"] and "error 84" in bad["errors"][0]


def test_percentiles():
    p = percentiles([i / 1000 for i in range(1, 101)])
    assert p["p50"] == pytest.approx(50) and p["p99"] == pytest.approx(99) and p["max"] == pytest.approx(100)


def test_space_rules():
    assert "full" in space_problem(10 * MiB, 100_000 * MiB, 1 * MiB)
    assert "needs" in space_problem(1000 * MiB, 10_000 * MiB, 2000 * MiB)
    assert space_problem(5000 * MiB, 10_000 * MiB, 100 * MiB) is None


def test_refusals_before_writing(tmp_path):
    with pytest.raises(StorageRefused, match="does not exist"):
        prepare_workdir(StorageConfig(path=str(tmp_path / "nope")))
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(StorageRefused, match="not a directory"):
        prepare_workdir(StorageConfig(path=str(f)))
    free = shutil.disk_usage(tmp_path).free
    with pytest.raises(StorageRefused, match=r"only .* MiB are free"):
        prepare_workdir(StorageConfig(path=str(tmp_path), file_size=free))
    U = namedtuple("U", "total used free")
    with pytest.raises(StorageRefused, match="full"):
        prepare_workdir(StorageConfig(path=str(tmp_path)), usage=lambda _p: U(10**12, 10**12 - MiB, MiB))
    assert list(tmp_path.iterdir()) == [f]


def test_refuses_an_unwritable_path(tmp_path):
    if os.geteuid() == 0:
        target = "/proc/self"  # root may write anywhere writable; procfs refuses even root
    else:
        target = str(tmp_path / "ro")
        os.mkdir(target, 0o500)
    with pytest.raises(StorageRefused, match=r"not writable|cannot create"):
        prepare_workdir(StorageConfig(path=target, file_size=MiB, small_files=1))


@pytest.mark.parametrize("engine", ["builtin", "fio"])
def test_workload_runs_and_removes_only_its_files(tmp_path, engine):
    if engine == "fio" and shutil.which("fio") is None:
        pytest.skip("fio is not installed (make deps installs it)")
    keep = tmp_path / "someone-elses.txt"
    keep.write_text("mine")
    rep = probe_storage(
        StorageConfig(path=str(tmp_path), ranks=2, file_size=2 * MiB, block_size=MiB, small_files=20, engine=engine)
    )
    assert rep.status is Status.passed, rep.checks
    m = rep.metrics
    assert m["checksum_ok"] and m["write"]["MBps"] > 0 and m["read"]["MBps"] > 0
    assert m["create"]["ops"] == 40 and m["unlink"]["ops_per_s"] > 0 and "p99" in m["stat"]["latency_ms"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["someone-elses.txt"] and rep.left_behind == []


def test_expected_lustre_on_a_local_disk_fails(tmp_path):
    rep = probe_storage(
        StorageConfig(path=str(tmp_path), file_size=MiB, block_size=MiB, small_files=2, expect_fstype="lustre")
    )
    c = {x.name: x for x in rep.checks}
    assert c["storage.fstype"].status is Status.failed and "not lustre" in c["storage.fstype"].detail
    assert rep.status is Status.failed


def test_storage_baseline_judges_throughput(tmp_path):
    from fabricguard.probes.storage import throughput_floor_note, throughput_status

    cfg = StorageConfig(path=str(tmp_path), baseline_write_mbps=1000.0, baseline_read_mbps=2000.0, floor_fraction=0.8)
    fast = {"write": {"MBps": 900.0}, "read": {"MBps": 1700.0}}
    slow = {"write": {"MBps": 700.0}, "read": {"MBps": 1700.0}}
    assert throughput_status(fast, cfg) is Status.passed
    assert throughput_status(slow, cfg) is Status.degraded
    assert "write 700 < floor 800 MB/s" in throughput_floor_note(slow, cfg)
    assert "not judged" in throughput_floor_note(fast, StorageConfig(path=str(tmp_path)))
    # An impossible baseline on the real engine turns the run degraded, never failed.
    rep = probe_storage(
        StorageConfig(path=str(tmp_path), file_size=MiB, block_size=MiB, small_files=2, engine="builtin",
                      baseline_write_mbps=1e9)
    )
    c = {x.name: x for x in rep.checks}
    assert c["storage.throughput"].status is Status.degraded and rep.status is Status.degraded


def test_fio_rate_is_all_bytes_over_fios_own_clock():
    # Two jobs of 16 MiB, 28 and 27 ms of fio runtime (end_fsync included): 32 MiB over the longest job,
    # as the built-in engine divides all bytes by its first-start-to-last-end span.
    w = parse_fio((FIX / "fio-3.33-write.json").read_text())["write"]
    assert w["seconds"] == 0.028 and w["MBps"] == pytest.approx(32 * MiB / 0.028 / 1e6)
    r = parse_fio((FIX / "fio-3.33-read-verify.json").read_text())["read"]
    assert r["seconds"] == 0.029 and r["MBps"] == pytest.approx(32 * MiB / 0.029 / 1e6)


@pytest.mark.parametrize("engine", ["builtin", "fio"])
def test_small_sizes_are_reported_not_meaningful_with_the_size_to_use(tmp_path, engine):
    if engine == "fio" and shutil.which("fio") is None:
        pytest.skip("fio is not installed (make deps installs it)")
    rep = probe_storage(StorageConfig(path=str(tmp_path), ranks=2, file_size=MiB, block_size=MiB, small_files=2,
                                      engine=engine, baseline_write_mbps=1.0, baseline_read_mbps=1.0))
    w = rep.metrics["write"]
    assert 0 < w["seconds"] < MIN_PHASE_S and w["meaningful"] is False
    assert re.search(r"use \d+ MiB or more per rank", w["not_meaningful"])
    if engine == "fio":
        # fio's start-up is outside the rate: the process took longer than the I/O fio timed.
        assert w["process_s"] > w["seconds"]
    c = {x.name: x for x in rep.checks}["storage.throughput"]
    # Even a floor of 1 MB/s is not declared met by a figure that means nothing.
    assert c.status is Status.degraded and "not judged against its floor" in c.detail and "not meaningful" in c.detail


def test_size_for_a_meaningful_rate():
    # 2 MiB per rank written in 20 ms -> 10 MiB would take 0.1 s; doubled and rounded up to a power of two.
    assert size_for_meaning(0.020, 2 * MiB) == 32
    assert size_for_meaning(0.0, MiB) == 256  # a phase under fio's clock resolution counts as 1 ms
    m = {"write": {"seconds": 0.5, "MBps": 1.0}, "read": {"seconds": 0.02, "MBps": 1.0}}
    why = mark_meaningful(m, 64 * MiB)
    assert m["write"]["meaningful"] and not m["read"]["meaningful"] and "read took 20 ms" in why
    assert mark_meaningful({"write": {"seconds": MIN_PHASE_S}}, MiB) is None


def test_a_hung_fio_fails_the_probe_within_its_deadline(tmp_path, monkeypatch):
    """fio on a hung mount never returns: the probe stops it at ``timeout_s`` and says so, cleaning up."""
    import time

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "fio"
    fake.write_text("#!/bin/sh\nexec sleep 30\n")  # a real process that never answers, like fio in D state
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    target = tmp_path / "mnt"
    target.mkdir()
    cfg = StorageConfig(path=str(target), file_size=MiB, block_size=8 * MiB, small_files=2, engine="fio",
                        timeout_s=0.5)
    t0 = time.monotonic()
    rep = probe_storage(cfg)
    assert time.monotonic() - t0 < 10
    c = {x.name: x for x in rep.checks}
    assert c["storage.workload"].status is Status.failed and rep.status is Status.failed
    assert "fio did not finish within 0.5 s" in c["storage.workload"].detail
    assert cfg.block_size == 8 * MiB  # the caller's config is not changed (the probe clamps its own copy)
    assert list(target.iterdir()) == [] and rep.left_behind == []


def test_fio_results_are_judged_apart_from_running_fio():
    from fabricguard.probes.storage import ToolRun, judge_fio

    w = ToolRun(0, (FIX / "fio-3.33-write.json").read_text(), "", 1.5)
    r = ToolRun(0, (FIX / "fio-3.33-read-verify.json").read_text(), "", 1.0)
    out = judge_fio(w, r)
    assert out["checksum_ok"] and out["write"]["process_s"] == 1.5 and out["read"]["MBps"] > 0
    bad = judge_fio(w, ToolRun(0, (FIX / "fio-3.33-read-verify-corrupt.json").read_text(), "", 1.0))
    assert not bad["checksum_ok"] and bad["fio_errors"]
    with pytest.raises(RuntimeError, match="fio produced no JSON"):
        judge_fio(ToolRun(1, "", "fio: engine psync not loadable", 0.1), r)
