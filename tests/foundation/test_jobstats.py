"""The servers' job_stats for ``verify-job --jobstats``, in the layout of lustre-release's
``lprocfs_jobstats_seq_show`` (``obdclass/lprocfs_jobstats.c``) as ``lctl get_param`` prints it: one
``<device>.job_stats=`` line per target, a ``job_stats:`` list, ``job_id`` quoted with ``\\xHH`` escapes when it
holds other characters, ``snapshot_time``/``start_time``/``elapsed_time`` in ``secs.nsecs``, counters as
``{ samples, unit, min, max, sum, sumsq }``; and the pre-2.7 form (whole seconds, bytes under ``read``/``write``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from fabricguard.cli import app
from fabricguard.verdict.jobstats import parse, reason

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "examples" / "jobs" / "rdma-healthy"
GKE = ROOT / "examples" / "profiles" / "gke-a3-ultra.yaml"
JOBID = "ml-search.llm-sft"


def _counter(name: str, samples: int, unit: str, size: int) -> str:
    pad = " " * max(1, 16 - len(name) - 1)
    return (f"  {name}:{pad}{{ samples: {samples:11d}, unit: {unit:>5}, min: {size if samples else 0:8d}, "
            f"max: {size if samples else 0:8d}, sum: {samples * size:16d}, sumsq: {samples * size * size:18d} }}\n")


def _job(job_id: str, write: int, read: int, *, start: float = 1764590000.0) -> str:
    return (f"- job_id:          {job_id}\n"
            f"  snapshot_time:   {start + 3600:.9f} secs.nsecs\n"
            f"  start_time:      {start:.9f} secs.nsecs\n"
            f"  elapsed_time:    3600.000000000 secs.nsecs\n"
            + _counter("read_bytes", read, "bytes", 4 << 20) + _counter("write_bytes", write, "bytes", 4 << 20)
            + _counter("read", read, "usecs", 900) + _counter("write", write, "usecs", 1800)
            + _counter("getattr", 12, "usecs", 40) + _counter("punch", 0, "usecs", 0))


def lctl(per_ost: dict[str, str]) -> str:
    return "".join(f"obdfilter.{ost}.job_stats=\njob_stats:\n{body}" for ost, body in per_ost.items())


def test_the_servers_counts_for_the_job_across_its_osts(tmp_path: Path) -> None:
    text = lctl({f"lfsfs-OST000{i}": _job(JOBID, 1000, 250) + _job('"kube\\x20proxy"', 5, 5) for i in range(4)})
    text += "mdt.lfsfs-MDT0000.job_stats=\njob_stats:\n"  # a target with no job yet
    parsed = parse(text, "oss.txt")
    assert not parsed.skipped and len(parsed.stats) == 8
    assert {s.job_id for s in parsed.stats} == {JOBID, "kube proxy"}  # the YAML escape, read as Lustre meant it
    r, s = reason(parsed, JOBID, ["oss.txt"])
    assert r.level.value == "info" and s["targets"] == 4 and s["write_bytes"] == 4 * 1000 * (4 << 20)
    assert s["ops"]["getattr"] == 48 and s["seconds"] == 3600.0
    assert "16.8 GB written and 4.2 GB read for ml-search.llm-sft on 4 target(s) over 3,600 s" in r.message


def test_one_ost_doing_the_work_and_a_job_never_tagged_are_warnings() -> None:
    skewed = lctl({"lfsfs-OST0000": _job(JOBID, 9000, 0), **{f"lfsfs-OST000{i}": _job(JOBID, 100, 0)
                                                               for i in range(1, 5)}})
    r, _ = reason(parse(skewed, "oss.txt"), JOBID, ["oss.txt"])
    assert r.level.value == "warning" and "lfsfs-OST0000 alone served 96%" in r.message and "setstripe" in r.fix
    r, _ = reason(parse(skewed, "oss.txt"), "other.job", ["oss.txt"])
    assert r.level.value == "warning" and "no job_stats entry for job id 'other.job'" in r.message
    assert "jobid_var=FG_LUSTRE_JOBID" in r.fix


def test_long_ids_are_matched_by_lustres_31_characters_and_old_servers_are_read() -> None:
    long_id = "research-foundation-models.llama-pretrain-70b"
    old = ("job_stats:\n- job_id:          " + long_id[:31] + "\n  snapshot_time:   1409071436\n"
           "  read:            { samples:           4, unit: bytes, min:  1048576, max:  1048576, sum:          4194304 }\n"
           "  write:           { samples:           2, unit: bytes, min:  1048576, max:  1048576, sum:          2097152 }\n")
    parsed = parse(old, "ost0.job_stats")
    (st,) = parsed.stats
    assert st.read_bytes == 4194304 and st.write_bytes == 2097152 and st.snapshot == 1409071436.0
    r, s = reason(parsed, long_id, ["ost0.job_stats"])
    assert r.level.value == "info" and s["targets"] == 1


def test_a_paste_that_is_not_job_stats_is_named_not_guessed() -> None:
    parsed = parse("obdfilter.x-OST0000.job_stats=\njob_stats: [: {\n", "bad.txt")
    assert parsed.stats == [] and "not job_stats YAML" in parsed.skipped[0] and "x-OST0000" in parsed.skipped[0]


def test_verify_job_reports_the_servers_row(tmp_path: Path) -> None:
    job = tmp_path / "job"
    shutil.copytree(JOB, job)
    stats = tmp_path / "oss.txt"
    stats.write_text(lctl({f"lfsfs-OST000{i}": _job(JOBID, 1000, 250) for i in range(4)}))
    r = CliRunner().invoke(app, ["verify-job", str(job), "-p", str(GKE), "--pool", "h200-rdma", "--format", "json",
                                 "--jobstats", str(stats), "--jobid", JOBID])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["server_io"]["targets"] == 4
    assert any(x["check"] == "storage-server" for x in doc["reasons"])
    r = CliRunner().invoke(app, ["verify-job", str(job), "-p", str(GKE), "--jobstats", str(stats)])
    assert r.exit_code == 3 and "--jobstats needs --jobid" in r.output
