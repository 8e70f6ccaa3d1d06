"""After the fact: the late rank and the slow node from a finished job's Inspector records, and the rank a saved
NCCL RAS report pointed at.

The records are replayed into ``nccl.ranks.Attribution`` round by round, a round being each process's next dump
(its own count of distinct dump times: no clock is compared across nodes), exactly as the controller saw them
while the job ran, so ``verify-job`` and the live annotation agree. A saved RAS report (``ncclras -f json >
ras-<time>.json`` in the job directory, or what the controller printed) is parsed by ``nccl.ras``; two reports
apply Ray's rule (mismatched and not advancing), one is said as "pointed at".
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from fabricguard.nccl.inspector import CollRecord
from fabricguard.nccl.ranks import Attribution, AttributionView
from fabricguard.nccl.ras import RasError, RasStatus, WaitedFor, hang_verdict, parse_status, waited_for
from fabricguard.userfiles import SourceError, read_text

RAS_GLOBS = ("ras*.json", "*-ras.json", "*.ras.json", "ncclras*.json")
MAX_RAS_BYTES = 16 << 20


def replay(records: Iterable[CollRecord], large_bytes: int, rounds: int = 3) -> AttributionView | None:
    """The findings after the last dump round (None: no record of a communicator across nodes)."""
    recs = list(records)
    if not any(r.nnodes > 1 for r in recs):
        return None
    dumps: dict[tuple[str, int], list[int]] = {}
    for r in recs:
        dumps.setdefault((r.hostname, r.pid), []).append(r.dump_us)
    ordinal = {p: {d: i for i, d in enumerate(sorted(set(ds)))} for p, ds in dumps.items()}
    by_round: dict[int, list[CollRecord]] = {}
    for r in recs:
        by_round.setdefault(ordinal[(r.hostname, r.pid)][r.dump_us], []).append(r)
    a = Attribution(large_bytes, rounds=rounds)
    view = a.judge()
    for i in sorted(by_round):
        a.add(by_round[i])
        view = a.judge()
    return view


def is_ras_name(path: Path) -> bool:
    return any(fnmatch.fnmatchcase(path.name.lower(), g) for g in RAS_GLOBS)


@dataclass(frozen=True)
class SavedRas:
    file: str
    status: RasStatus


@dataclass(frozen=True)
class RasFinding:
    hung: bool | None  # True: two reports, Ray's rule holds; False: it does not; None: one report only
    waited_for: list[WaitedFor]
    files: list[str]
    why: str


def read_saved(paths: Iterable[Path], within: Path) -> tuple[list[SavedRas], list[tuple[str, str]]]:
    """(reports read, (file, why not) for the ones that could not be). The paths come from the bounded walk of
    the job directory ``within`` (``userfiles.walk_files``) and are opened inside it (``userfiles.open_in``:
    a report swapped for a link after the walk is refused, never followed)."""
    out: list[SavedRas] = []
    bad: list[tuple[str, str]] = []
    for p in sorted(paths):
        try:
            out.append(SavedRas(str(p), parse_status(read_text(p, max_bytes=MAX_RAS_BYTES, within=within))))
        except (SourceError, RasError) as exc:
            bad.append((str(p), str(exc)))
    return out, bad


def ras_finding(saved: list[SavedRas]) -> RasFinding | None:
    if not saved:
        return None
    ordered = sorted(saved, key=lambda s: (s.status.timestamp, s.file))
    last = ordered[-1]
    if len(ordered) >= 2:
        v = hang_verdict(ordered[-2].status, last.status)
        return RasFinding(v.hung, v.waited_for if v.hung else waited_for(last.status),
                          [ordered[-2].file, last.file], v.why)
    w = waited_for(last.status)
    return RasFinding(None, w, [last.file], "one RAS report: a snapshot, not yet Ray's two-query rule")
