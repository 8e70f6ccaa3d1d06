"""Pure logic of the collective probe: message sizes, nccl-tests bandwidth formulas, the table, the verdict.

Nothing here starts a process or imports torch, so every rule is unit-tested directly.

Conventions follow nccl-tests (doc/PERFORMANCE.md): ``size`` S is the total array in bytes. For all_reduce
it is the buffer each rank reduces; for all_gather it is the gathered output (per-rank count x ranks); for
reduce_scatter the input that is scattered (per-rank count x ranks). ``algbw = S / t`` in GB/s (1e9 bytes)
and ``busbw = algbw x factor`` with factor 2(n-1)/n for all_reduce and (n-1)/n for all_gather and
reduce_scatter, so busbw is comparable with the hardware's link rate whatever the number of ranks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from fabricguard.probes.result import Check, Status, overall

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
DTYPE_BYTES = {"float": 4, "float32": 4, "half": 2, "float16": 2, "bfloat16": 2, "double": 8, "float64": 8}

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?B?)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def parse_size(text: str | int) -> int:
    """``"64M"`` -> 67108864. Like nccl-tests, K/M/G are powers of 1024; a bare number is bytes."""
    if isinstance(text, int):
        if text <= 0:
            raise ValueError(f"size must be positive, got {text}")
        return text
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a size; write bytes or a number with K, M or G (e.g. 8, 1M, 64M)")
    value = float(m.group(1)) * _UNITS[m.group(2).upper()]
    if value < 1:
        raise ValueError(f"size {text!r} is below one byte")
    return int(value)


def size_list(begin: int, end: int, factor: float = 2.0, step: int | None = None) -> list[int]:
    """The sizes nccl-tests would run for ``-b begin -e end -f factor`` (or ``-i step``), end included."""
    if begin <= 0 or end < begin:
        raise ValueError(f"need 0 < begin <= end, got begin={begin} end={end}")
    if step is None and factor <= 1:
        raise ValueError(f"factor must be > 1, got {factor}")
    if step is not None and step <= 0:
        raise ValueError(f"step must be > 0, got {step}")
    out: list[int] = []
    s: float = begin
    while s <= end:
        out.append(int(s))
        s = s + step if step is not None else s * factor
    return out


def bus_factor(collective: str, nranks: int) -> float:
    """nccl-tests' correction from algorithm to bus bandwidth."""
    if nranks < 1:
        raise ValueError("nranks must be >= 1")
    if collective == "all_reduce":
        return 2.0 * (nranks - 1) / nranks
    if collective in ("all_gather", "reduce_scatter"):
        return (nranks - 1) / nranks
    raise ValueError(f"unknown collective {collective!r}; choose from {', '.join(COLLECTIVES)}")


def element_counts(collective: str, size_bytes: int, dtype_bytes: int, nranks: int) -> tuple[int, int]:
    """(total elements, elements per rank chunk) for a requested size, rounded down like nccl-tests.

    For all_gather and reduce_scatter the total must split evenly over the ranks; a size too small to give
    each rank one element returns (0, 0), which the runner skips.
    """
    total = size_bytes // dtype_bytes
    if collective == "all_reduce":
        return total, total
    per_rank = total // nranks
    return per_rank * nranks, per_rank


def bandwidths(collective: str, size_bytes: int, seconds: float, nranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s (1e9 bytes per second) for an operation on S = size_bytes."""
    if seconds <= 0:
        raise ValueError("time must be positive")
    algbw = size_bytes / seconds / 1e9
    return algbw, algbw * bus_factor(collective, nranks)


@dataclass
class Row:
    """One line of the table: a collective at one size, timed over ``iters`` after the warm-up."""

    collective: str
    size: int
    count: int
    type: str
    redop: str
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def make_row(collective: str, size: int, dtype: str, nranks: int, seconds: float, wrong: int) -> Row:
    algbw, busbw = bandwidths(collective, size, seconds, nranks)
    return Row(
        collective=collective,
        size=size,
        count=size // DTYPE_BYTES[dtype],
        type=dtype,
        redop="none" if collective == "all_gather" else "sum",
        time_us=seconds * 1e6,
        algbw_gbps=algbw,
        busbw_gbps=busbw,
        wrong=wrong,
    )


class TableStream:
    """render_table's lines, produced as rows arrive: a block's header when its collective starts, each row
    as it comes, and the block's peak and average busbw when it ends (``close`` ends the last one)."""

    def __init__(self) -> None:
        self._block: list[Row] = []

    def add(self, row: Row) -> list[str]:
        out: list[str] = []
        if not self._block or self._block[-1].collective != row.collective:
            out += self.close()
            out += [
                f"# {row.collective}",
                f"#{'size':>11} {'count':>12} {'type':>8} {'redop':>6} {'time':>10} {'algbw':>8} {'busbw':>8} "
                f"{'#wrong':>7}",
                f"#{'(B)':>11} {'(elements)':>12} {'':>8} {'':>6} {'(us)':>10} {'(GB/s)':>8} {'(GB/s)':>8}",
            ]
        self._block.append(row)
        out.append(
            f"{row.size:>12} {row.count:>12} {row.type:>8} {row.redop:>6} {row.time_us:>10.1f} "
            f"{row.algbw_gbps:>8.3f} {row.busbw_gbps:>8.3f} {row.wrong:>7}"
        )
        return out

    def close(self) -> list[str]:
        mine, self._block = self._block, []
        if not mine:
            return []
        avg = sum(r.busbw_gbps for r in mine) / len(mine)
        return [
            f"# Peak bus bandwidth    : {max(r.busbw_gbps for r in mine):.3f} GB/s",
            f"# Avg bus bandwidth    : {avg:.3f}",
            "#",
        ]


def render_table(rows: Sequence[Row], *, header: str | None = None) -> str:
    """An nccl-tests style table, one block per collective, with its peak and average busbw."""
    out: list[str] = [f"# {header}"] if header else []
    stream = TableStream()
    for coll in dict.fromkeys(r.collective for r in rows):
        for r in rows:
            if r.collective == coll:
                out += stream.add(r)
    out += stream.close()
    return "\n".join(out)


def peak_busbw(rows: Iterable[Row], collective: str = "all_reduce") -> float | None:
    vals = [r.busbw_gbps for r in rows if r.collective == collective]
    return max(vals) if vals else None


@dataclass
class Expectation:
    """What the pool promises: the transports it accepts and the busbw floor (None: not judged)."""

    pool: str
    expected_transports: list[str]
    floor_gbps: float | None
    baseline_gbps: float | None = None
    floor_fraction: float | None = None
    nccl_net: str | None = None


@dataclass
class Judgement:
    status: Status
    checks: list[Check] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"status": str(self.status), "checks": [c.to_dict() for c in self.checks]}


def judge(
    rows: Sequence[Row],
    transport: str,
    transport_why: str,
    expect: Expectation,
    *,
    failed: bool = False,
    failure: str | None = None,
) -> Judgement:
    """Judge one run: it ran, the results were right, the transport is one the pool accepts, busbw >= floor.

    A run that failed (NCCL init refused the forced network, a rank died) is ``failed``: with NCCL_NET forced
    that is the loud failure the pool asked for instead of a silent socket fallback. A wrong transport is
    ``failed``; a busbw below the floor is ``degraded`` (the profile's meaning of floorFraction).
    """
    checks: list[Check] = []
    if failed or not rows:
        checks.append(Check("collective.ran", Status.failed, failure or "the collective produced no measurement"))
    else:
        checks.append(Check("collective.ran", Status.passed, f"{len(rows)} measurements"))
        wrong = sum(r.wrong for r in rows)
        checks.append(
            Check(
                "collective.correct",
                Status.failed if wrong else Status.passed,
                f"{wrong} wrong elements" if wrong else "every result matched the expected values",
                {"wrong": wrong},
            )
        )
    ok_transport = transport in expect.expected_transports
    checks.append(
        Check(
            "collective.transport",
            Status.passed if ok_transport else Status.failed,
            f"inter-node transport {transport} ({transport_why}); pool {expect.pool} accepts "
            f"{', '.join(sorted(expect.expected_transports))}",
            {"transport": transport, "expected": sorted(expect.expected_transports)},
        )
    )
    peak = peak_busbw(rows)
    if expect.floor_gbps is None:
        checks.append(
            Check("collective.busbw", Status.skipped, f"pool {expect.pool} has no baseline; busbw not judged")
        )
    elif peak is None:
        checks.append(Check("collective.busbw", Status.failed, "no all_reduce measurement to compare"))
    else:
        ok = peak >= expect.floor_gbps
        checks.append(
            Check(
                "collective.busbw",
                Status.passed if ok else Status.degraded,
                f"peak all_reduce busbw {peak:.3f} GB/s {'>=' if ok else '<'} "
                f"floor {expect.floor_gbps:.3f} GB/s"
                + (
                    f" ({expect.floor_fraction:g} x baseline {expect.baseline_gbps:g})"
                    if expect.baseline_gbps is not None
                    else ""
                ),
                {"peak_busbw_gbps": peak, "floor_gbps": expect.floor_gbps},
            )
        )
    return Judgement(overall([c.status for c in checks]), checks)


RAIL_RATIO = 0.75  # a rail below this share of the median rail is slow: the others prove the path can do better


@dataclass(frozen=True)
class SlowRail:
    """A rail (local rank k of every node: GPU k and its NIC) that ran well below the others, alone."""

    rail: int
    busbw_gbps: float
    median_gbps: float | None  # the median of the pair's rails, None with one rail (judged by the floor)
    nics: dict[str, str]  # node -> its NIC on this rail ("" when the probe could not tell)
    pcis: dict[str, str] = field(default_factory=dict)  # node -> that NIC's PCI address, where it is one NIC

    def text(self) -> str:
        where = ", ".join(f"{n} {nic or '?'}" for n, nic in sorted(self.nics.items()))
        than = (f"the median rail's {self.median_gbps:.1f}" if self.median_gbps is not None else "the floor")
        return f"rail {self.rail} ({where}): {self.busbw_gbps:.1f} GB/s alone, below {than}"

    def to_dict(self) -> dict[str, Any]:
        return {"rail": self.rail, "busbwGBps": round(self.busbw_gbps, 3), "medianGBps": self.median_gbps,
                "nics": dict(self.nics), "pcis": dict(self.pcis)}


def slow_rails(rails: Iterable[Any], floor_gbps: float | None) -> list[SlowRail]:
    """The slow rails of a ``probe collective --rails`` result: below ``RAIL_RATIO`` of the median rail (a rail
    down, a link trained slow, a miscabled port), or, with one rail only, below the floor. All rails slow alike
    names none: that is the node or the fabric, not one rail."""
    rows = [(r["rail"], float(bw), list(r.get("members") or ()) if isinstance(r.get("members"), list) else [])
            for r in rails if isinstance(r, dict) and isinstance(r.get("rail"), int) and not isinstance(r["rail"], bool)
            for bw in [r.get("busbw_gbps") or 0.0] if isinstance(bw, int | float) and not isinstance(bw, bool)]
    if not rows:
        return []
    bws = sorted(bw for _k, bw, _m in rows)
    median = bws[len(bws) // 2] if len(bws) % 2 else (bws[len(bws) // 2 - 1] + bws[len(bws) // 2]) / 2
    out = []
    for k, bw, members in rows:
        slow = bw < RAIL_RATIO * median if len(rows) > 1 else (floor_gbps is not None and bw < floor_gbps)
        if slow:
            ms = [m for m in members if isinstance(m, dict)]
            nics = {str(m.get("node") or "?"): str(m.get("nic") or "") for m in ms}
            pcis = {str(m.get("node") or "?"): str(m["nic_pci"]) for m in ms if isinstance(m.get("nic_pci"), str)}
            out.append(SlowRail(k, bw, round(median, 3) if len(rows) > 1 else None, nics, pcis))
    return out


def expectation_for(pool: Any) -> Expectation:
    """The Expectation of a profile Pool (duck-typed so this module stays import-light)."""
    b = pool.baseline
    return Expectation(
        pool=pool.name,
        expected_transports=sorted(str(t) for t in pool.fabric.expected_transports),
        floor_gbps=b.busbw_floor_gbps,
        baseline_gbps=b.allReduceBusBwGBps,
        floor_fraction=b.floorFraction,
        nccl_net=pool.fabric.effective_nccl_net,
    )
