"""NCCL's RAS service: its client protocol, its JSON status, and the rule that confirms a hang (pure).

Read from NVIDIA/nccl ``src/ras/`` (``client.cc``, ``client_support.cc``, ``ras_internal.h``) at v2.28.7-1 to
v2.30.7-1 (RAS since 2.24; JSON since 2.28.7; monitor mode since 2.29):

* Every NCCL process listens on ``localhost:28028`` (``NCCL_RAS_ADDR`` moves it): reachable only from inside the
  pod's network namespace. The protocol is lines: the client sends ``CLIENT PROTOCOL 2``, the server answers
  ``SERVER PROTOCOL 2``; ``TIMEOUT <s>`` -> ``OK``; ``SET FORMAT json`` -> ``OK``; ``STATUS`` (``VERBOSE STATUS``)
  -> the report, then the server closes. :data:`QUERY` is that exchange; :data:`CLIENT` is a dependency-free
  Python client (what ``ncclras -f json`` does) that runs in any Python image.
* The JSON report: ``nccl_version``, ``cuda_runtime_version``, ``cuda_driver_version``, ``timestamp`` (the
  process's local time, ``%F %T``), ``communicators_count``, ``communicators[]`` of ``{hash, secondary_hash, size,
  ranks_count, missing_ranks_count, ranks[], missing_ranks[]}``, ``ras{collection_time_sec, timeouts_count}``. A
  rank: ``rank`` (in its communicator), ``host`` (the **IP address** of its process's RAS socket, not a
  hostname), ``pid``, ``cuda_dev``, ``nvml_dev``, ``status{init_state, async_error, finalize_called,
  destroy_flag, abort_flag}``, ``collective_counts{Broadcast, Reduce, AllGather, ReduceScatter, AllReduce}`` (how
  many of each the rank has *launched*: the communicator's per-function sequence number, the Inspector's
  ``coll_sn``). A missing rank: ``rank, host, pid, cuda_dev, nvml_dev, status{unresponsive, considered_dead}``.
* 2.28.7 and 2.28.9 write a missing rank's ``"nvml_dev": N`` with no comma before its ``"status"``: the report is
  not valid JSON whenever a rank is missing (fixed in 2.29.2). :func:`parse_status` repairs exactly that.

**The rule** (Ray's NCCL RAS health callback, ray-project/ray #64928): a job is hung only when, in some
communicator, the ranks' launch counts are *mismatched* and *not advancing* between two queries. RAS alone can
report every rank fine while a framework-side timeout fires (NVIDIA/nccl #1730), and a job in a long checkpoint
has matched counts: neither is a hang. The ranks the others wait for are the ones with the *lowest* count of the
mismatched collective (they have not launched the operation the others are blocked in), and any missing rank.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

PORT = 28028
PROTOCOL = 2
COLLECTIVES = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
QUERY = f"CLIENT PROTOCOL {PROTOCOL}\nSET FORMAT json\nSTATUS\n"
MAX_REPORT = 16 << 20  # a 4,096-rank job's report is a few MB

# Run as ``python3 -c CLIENT`` inside the job's container: speaks the protocol above, prints the report. Waits at
# most 30 s (RAS's own collective gives up after 5 + 5 s); exits non-zero when nothing listens.
CLIENT = (
    "import socket,sys\n"
    f"s=socket.create_connection(('localhost',{PORT}),timeout=5)\n"
    "f=s.makefile('rwb')\n"
    f"f.write(b'CLIENT PROTOCOL {PROTOCOL}\\n');f.flush();f.readline()\n"
    "f.write(b'SET FORMAT json\\n');f.flush();ok=f.readline()\n"
    "s.settimeout(30);f.write(b'STATUS\\n');f.flush()\n"
    "n=0\n"
    f"while n<{MAX_REPORT}:\n"
    " b=f.read1(65536)\n"
    " if not b:break\n"
    " n+=len(b);sys.stdout.buffer.write(b)\n"
)

_NO_COMMA = re.compile(rb'("nvml_dev": -?\d+)\n(\s*"status": \{)')


class RasError(ValueError):
    """A RAS report that cannot be read; the message says what it is."""


@dataclass(frozen=True)
class RasRank:
    rank: int
    host: str  # an IP address
    pid: int
    cuda_dev: int
    counts: dict[str, int]
    async_error: int = 0
    abort: bool = False


@dataclass(frozen=True)
class RasMissing:
    rank: int
    host: str
    pid: int
    cuda_dev: int
    unresponsive: bool
    dead: bool


@dataclass(frozen=True)
class RasComm:
    hash: str
    size: int
    ranks: list[RasRank]
    missing: list[RasMissing]

    def mismatched(self) -> dict[str, tuple[int, int]]:
        """Per collective whose launch counts differ between ranks: (lowest, highest)."""
        out = {}
        for c in COLLECTIVES:
            vals = [r.counts.get(c, 0) for r in self.ranks]
            if vals and min(vals) != max(vals):
                out[c] = (min(vals), max(vals))
        return out


@dataclass(frozen=True)
class RasStatus:
    nccl_version: str
    timestamp: str
    comms: list[RasComm]
    timeouts: int
    repaired: bool = False  # the 2.28.7/2.28.9 missing-comma bug was repaired


def parse_status(text: bytes | str) -> RasStatus:
    """A ``STATUS`` report in JSON (``ncclras -f json``), from any NCCL 2.28.7 to 2.30."""
    raw = text.encode() if isinstance(text, str) else text
    if len(raw) > MAX_REPORT:
        raise RasError(f"RAS report of {len(raw)} bytes is larger than {MAX_REPORT}")
    start = raw.find(b"{")
    if start < 0:
        raise RasError("no JSON object in the RAS output (was it queried with SET FORMAT json / ncclras -f json?)")
    body = raw[start:]
    fixed, n = _NO_COMMA.subn(rb"\1,\n\2", body)
    try:
        doc = json.loads(fixed)
    except (ValueError, RecursionError) as exc:
        raise RasError(f"RAS output is not the JSON report: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("communicators"), list):
        raise RasError("RAS JSON has no communicators list")
    comms = []
    for c in doc["communicators"]:
        if not isinstance(c, dict):
            continue
        ranks = [RasRank(_i(r.get("rank")), str(r.get("host") or ""), _i(r.get("pid")), _i(r.get("cuda_dev")),
                         {k: _i(v) for k, v in (r.get("collective_counts") or {}).items() if k in COLLECTIVES},
                         _i((r.get("status") or {}).get("async_error")),
                         bool((r.get("status") or {}).get("abort_flag")))
                 for r in c.get("ranks") or () if isinstance(r, dict)]
        missing = [RasMissing(_i(m.get("rank")), str(m.get("host") or ""), _i(m.get("pid")), _i(m.get("cuda_dev")),
                              bool((m.get("status") or {}).get("unresponsive")),
                              bool((m.get("status") or {}).get("considered_dead")))
                   for m in c.get("missing_ranks") or () if isinstance(m, dict)]
        comms.append(RasComm(str(c.get("hash") or ""), _i(c.get("size")), ranks, missing))
    ras: dict[str, Any] = doc["ras"] if isinstance(doc.get("ras"), dict) else {}
    return RasStatus(str(doc.get("nccl_version") or ""), str(doc.get("timestamp") or ""), comms,
                     _i(ras.get("timeouts_count")), repaired=n > 0)


def _i(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


@dataclass(frozen=True)
class WaitedFor:
    """A rank the others wait for: behind on a collective (or missing), with where RAS says it runs."""

    comm: str
    rank: int
    host: str  # an IP address (join it to a pod's podIP, or hostIP for hostNetwork pods)
    pid: int
    cuda_dev: int
    why: str


@dataclass
class HangVerdict:
    hung: bool
    why: str
    waited_for: list[WaitedFor] = field(default_factory=list)


def waited_for(status: RasStatus) -> list[WaitedFor]:
    """The ranks behind in each communicator whose launch counts are mismatched, and the missing ranks."""
    out: list[WaitedFor] = []
    for c in status.comms:
        for m in c.missing:
            state = "considered dead" if m.dead else "unresponsive" if m.unresponsive else "missing"
            out.append(WaitedFor(c.hash, m.rank, m.host, m.pid, m.cuda_dev, f"{state} in RAS"))
        for coll, (low, high) in sorted(c.mismatched().items()):
            for r in c.ranks:
                if r.counts.get(coll, 0) == low:
                    out.append(WaitedFor(c.hash, r.rank, r.host, r.pid, r.cuda_dev,
                                         f"launched {coll} {low} times, others up to {high}"))
    return out


def _counts(status: RasStatus) -> dict[tuple[str, int], dict[str, int]]:
    return {(c.hash, r.rank): r.counts for c in status.comms for r in c.ranks}


def hang_verdict(first: RasStatus, second: RasStatus) -> HangVerdict:
    """Ray's rule over two queries: hung only when counts are mismatched (or ranks missing) in both and no
    rank's count advanced between them."""
    w1, w2 = waited_for(first), waited_for(second)
    if not w2:
        return HangVerdict(False, "RAS: every rank of every communicator launched the same collectives")
    if not w1:
        return HangVerdict(False, "RAS: counts were matched at the first query (the job moves)")
    a, b = _counts(first), _counts(second)
    moved = [k for k, v in b.items() if k in a and v != a[k]]
    if moved:
        return HangVerdict(False, f"RAS: {len(moved)} rank(s) launched collectives between the two queries")
    return HangVerdict(True, "RAS: launch counts mismatched and not advancing over two queries", w2)
