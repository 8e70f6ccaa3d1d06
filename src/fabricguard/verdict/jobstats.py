"""The servers' side of a job's I/O: Lustre ``job_stats`` as ``lctl get_param`` prints them, for ``verify-job
--jobstats``.

The webhook tags every request of a job with ``<namespace>.<job>`` (``FG_LUSTRE_JOBID``, docs/storage.md §2);
the OSS and MDS count what each tag did in ``obdfilter.*.job_stats`` and ``mdt.*.job_stats``. The format is
lustre-release ``obdclass/lprocfs_jobstats.c`` (``lprocfs_jobstats_seq_show``): a ``job_stats:`` YAML list, one
item per job with ``job_id`` (quoted, with ``\\xHH`` escapes, when it holds other characters than letters,
digits and ``.@-_:/``), ``snapshot_time`` / ``start_time`` / ``elapsed_time`` (``<secs>.<nsecs> secs.nsecs``;
older servers print whole seconds) and one ``{ samples, unit, min, max, sum[, sumsq] }`` map per counter
(``read_bytes``, ``write_bytes``, ``read``, ``write``, ``getattr``, ...; servers before 2.7 counted bytes in
``read``/``write`` with ``unit: bytes``). ``lctl get_param`` puts ``<device>.job_stats=`` before each target's
block. A job id is kept to 31 characters (``LUSTRE_JOBID_SIZE``), so a longer ``namespace.job`` is matched by its
first 31.

Pure: text in, figures out. What the files hold is a person's paste, so each block is bounded and a block that
is not this format is named and skipped, never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from fabricguard.verdict.job import Level, Reason

JOBID_MAX = 31  # LUSTRE_JOBID_SIZE - 1
MAX_BLOCK = 64 * 1024**2
SKEW_SHARE = 0.5  # one target taking more than this of a job's bytes over >= SKEW_TARGETS targets: poor striping
SKEW_TARGETS = 4
_DEVICE = re.compile(r"^(?P<device>(?:obdfilter|mdt|ost|mds)\.[^=\s]+)\.job_stats=\s*$")


@dataclass(frozen=True)
class JobStat:
    """One job's counters on one target."""

    target: str  # lustre-OST0001 (from the lctl line), or the file's name when the paste has none
    job_id: str
    snapshot: float | None
    start: float | None
    read_bytes: int
    write_bytes: int
    ops: dict[str, int] = field(default_factory=dict)  # counter -> samples (read, write, open, getattr, ...)


@dataclass
class Parsed:
    stats: list[JobStat] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # blocks that were not job_stats, each with why


def _seconds(v: Any) -> float | None:
    try:
        return float(str(v).split()[0])
    except (ValueError, IndexError):
        return None


def _counter(v: Any) -> tuple[int, int, str]:
    """(samples, sum, unit) of a counter map; zeros for anything else."""
    if not isinstance(v, dict):
        return 0, 0, ""
    def num(x: Any) -> int:
        return x if isinstance(x, int) and not isinstance(x, bool) and x >= 0 else 0
    return num(v.get("samples")), num(v.get("sum")), str(v.get("unit") or "")


def _stat(target: str, item: dict[str, Any]) -> JobStat:
    ops: dict[str, int] = {}
    sizes = {"read": 0, "write": 0}
    for key, v in item.items():
        if key in ("job_id", "snapshot_time", "start_time", "elapsed_time"):
            continue
        samples, total, unit = _counter(v)
        if key in ("read_bytes", "write_bytes"):
            sizes[key[:-6]] = total
            continue
        ops[str(key)] = samples
        if key in sizes and unit == "bytes" and "read_bytes" not in item and "write_bytes" not in item:
            sizes[key] = total  # before 2.7: read/write counted bytes
    return JobStat(target, str(item.get("job_id")), _seconds(item.get("snapshot_time")),
                   _seconds(item.get("start_time")), sizes["read"], sizes["write"], ops)


def parse(text: str, source: str) -> Parsed:
    """Every job's counters in ``lctl get_param obdfilter.*.job_stats mdt.*.job_stats`` output (or one target's
    ``job_stats`` file)."""
    out = Parsed()
    blocks: list[tuple[str, list[str]]] = [(source, [])]
    for line in text.splitlines():
        m = _DEVICE.match(line)
        if m:
            blocks.append((m.group("device").split(".", 1)[1], []))
        else:
            blocks[-1][1].append(line)
    for target, lines in blocks:
        body = "\n".join(lines)
        if not body.strip():
            continue
        if len(body) > MAX_BLOCK:
            out.skipped.append(f"{source}: {target}: over {MAX_BLOCK // 2**20} MiB, not read")
            continue
        try:
            doc = yaml.safe_load(body)
        except (yaml.YAMLError, RecursionError) as exc:
            out.skipped.append(f"{source}: {target}: not job_stats YAML ({str(exc).splitlines()[0][:120]})")
            continue
        items = doc.get("job_stats") if isinstance(doc, dict) else None
        if doc is None or (isinstance(doc, dict) and "job_stats" in doc and items is None):
            continue  # a target with no job: "job_stats:" and nothing under it
        if not isinstance(items, list):
            out.skipped.append(f"{source}: {target}: no job_stats list")
            continue
        out.stats += [_stat(target, i) for i in items if isinstance(i, dict) and "job_id" in i]
    return out


def matches(job_id: str, wanted: str) -> bool:
    """The servers' job id is the wanted one, or its first 31 characters (Lustre cuts longer ones)."""
    return job_id == wanted or (len(wanted) > JOBID_MAX and job_id == wanted[:JOBID_MAX])


def summary(stats: list[JobStat], jobid: str) -> dict[str, Any]:
    mine = [s for s in stats if matches(s.job_id, jobid)]
    per_target: dict[str, tuple[int, int]] = {}
    for s in mine:
        r, w = per_target.get(s.target, (0, 0))
        per_target[s.target] = (r + s.read_bytes, w + s.write_bytes)
    ops: dict[str, int] = {}
    for s in mine:
        for k, n in s.ops.items():
            ops[k] = ops.get(k, 0) + n
    total = sum(r + w for r, w in per_target.values())
    top = max(per_target.items(), key=lambda kv: sum(kv[1]), default=None)
    starts = [s.start for s in mine if s.start]
    ends = [s.snapshot for s in mine if s.snapshot]
    return {"jobid": jobid, "targets": len(per_target), "read_bytes": sum(r for r, _ in per_target.values()),
            "write_bytes": sum(w for _, w in per_target.values()), "ops": ops,
            "top_target": top[0] if top else None,
            "top_share": round(sum(top[1]) / total, 4) if top and total else None,
            "seconds": round(max(ends) - min(starts), 3) if starts and ends else None,
            "seen_job_ids": len({s.job_id for s in stats})}


def reason(parsed: Parsed, jobid: str, sources: list[str]) -> tuple[Reason, dict[str, Any]]:
    """The ``storage-server`` row: what the servers counted for the job (info), a skew over its targets
    (warning: poor striping, one OST does the work), or no entry for it (warning: the clients do not tag)."""
    s = summary(parsed.stats, jobid)
    ev = [{"file": f, "line": None, "why": "job_stats"} for f in sources]
    ev += [{"file": b.split(": ", 1)[0], "line": None, "why": b} for b in parsed.skipped[:3]]
    if not s["targets"]:
        return Reason(Level.warning, "storage-server",
                      f"no job_stats entry for job id {jobid!r} in {len(parsed.stats)} entries "
                      f"({s['seen_job_ids']} job ids): the clients do not tag this job's requests",
                      ev, "set jobid_var=FG_LUSTRE_JOBID on the clients (lctl set_param -P jobid_var=FG_LUSTRE_JOBID "
                      "on the MGS) and read job_stats while the job runs (servers drop idle entries after "
                      "job_cleanup_interval)"), s
    gb = (s["read_bytes"] + s["write_bytes"]) / 1e9
    msg = (f"the servers counted {s['write_bytes'] / 1e9:,.1f} GB written and {s['read_bytes'] / 1e9:,.1f} GB read "
           f"for {jobid} on {s['targets']} target(s)"
           + (f" over {s['seconds']:,.0f} s" if s["seconds"] else ""))
    if s["targets"] >= SKEW_TARGETS and s["top_share"] and s["top_share"] > SKEW_SHARE and gb > 0:
        return Reason(Level.warning, "storage-server",
                      f"{msg}; {s['top_target']} alone served {s['top_share']:.0%} of it: one target did the work",
                      ev, "stripe the job's checkpoint directory over more OSTs (lfs setstripe -c -1 DIR) or "
                      "write one file per rank"), s
    return Reason(Level.info, "storage-server", msg, ev), s
