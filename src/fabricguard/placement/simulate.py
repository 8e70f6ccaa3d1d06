"""Where a gang lands on a pool spread across topology blocks, when it waits, and what that costs in bus bandwidth.

A model of Kueue's topology-aware scheduling at one level (the pool queue's ``topology.level``), small enough to
reason about and to write down: it answers the field report's open question ("whether topology-aware scheduling
can help once an allocation spans blocks") for a given reservation shape.

- ``required``: every pod in one block. The gang takes the fullest block that still fits it (best fit, as TAS
  does, which keeps big holes for big gangs); when no block has room it waits, and when no block is *large*
  enough it waits forever.
- ``preferred``: one block when one fits; otherwise it is admitted spread over the blocks with the most free
  nodes first (the fewest blocks), and pays the cross-block bandwidth penalty.
- ``unconstrained``: anywhere, the same spread.

Bandwidth: inside one block the pool's baseline; across blocks the baseline times ``crossBlockFactor``. A ring
all-reduce runs at the speed of its slowest link, so one crossing is enough to pay the whole penalty.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Mode = Literal["required", "preferred", "unconstrained"]


@dataclass(frozen=True)
class Placement:
    gang: int
    mode: Mode
    placed: dict[str, int] = field(default_factory=dict)
    waits: Literal["no", "until-free", "forever"] = "no"
    busbw_gbps: float | None = None

    @property
    def blocks(self) -> int:
        return len(self.placed)

    def describe(self) -> str:
        if self.waits == "forever":
            return f"waits forever: no block has {self.gang} nodes"
        if self.waits == "until-free":
            return f"waits until {self.gang} nodes are free" + (" in one block" if self.mode == "required" else "")
        where = ", ".join(f"{b}:{n}" for b, n in self.placed.items())
        return f"{'one block' if self.blocks == 1 else f'{self.blocks} blocks'} ({where})"


def _one_block(gang: int, free: dict[str, int]) -> str | None:
    fits = [b for b, n in free.items() if n >= gang]
    # Best fit: the block with the fewest free nodes that still holds the gang.
    return min(fits, key=lambda b: (free[b], b)) if fits else None


def _spread(gang: int, free: dict[str, int]) -> dict[str, int] | None:
    if sum(free.values()) < gang:
        return None
    placed: dict[str, int] = {}
    left = gang
    for b in sorted(free, key=lambda b: (-free[b], b)):
        take = min(left, free[b])
        if take:
            placed[b] = take
            left -= take
        if left == 0:
            break
    return placed


def place(
    gang: int,
    mode: Mode,
    free: dict[str, int],
    *,
    size: dict[str, int] | None = None,
    baseline_gbps: float | None = None,
    cross_block_factor: float | None = None,
) -> Placement:
    """One gang of ``gang`` nodes (one pod per node) on blocks with ``free`` nodes out of ``size`` (default: free)."""
    if gang < 1:
        raise ValueError("a gang has at least one node")
    size = size or free

    def bw(blocks: int) -> float | None:
        if baseline_gbps is None:
            return None
        if blocks <= 1:
            return baseline_gbps
        return None if cross_block_factor is None else round(baseline_gbps * cross_block_factor, 1)

    block = _one_block(gang, free)
    if block is not None and mode != "unconstrained":
        return Placement(gang, mode, {block: gang}, busbw_gbps=bw(1))
    if mode == "required":
        waits: Literal["until-free", "forever"] = (
            "until-free" if any(n >= gang for n in size.values()) else "forever"
        )
        return Placement(gang, mode, waits=waits)
    placed = _spread(gang, free)
    if placed is None:
        return Placement(gang, mode, waits="until-free" if sum(size.values()) >= gang else "forever")
    return Placement(gang, mode, placed, busbw_gbps=bw(len(placed)))


def table(
    gangs: list[int],
    modes: list[Mode],
    free: dict[str, int],
    *,
    size: dict[str, int] | None = None,
    baseline_gbps: float | None = None,
    cross_block_factor: float | None = None,
) -> list[Placement]:
    """Every (gang, mode) pair, each placed on the same free capacity (independent what-ifs, not a queue)."""
    return [
        place(g, m, free, size=size, baseline_gbps=baseline_gbps, cross_block_factor=cross_block_factor)
        for g in gangs
        for m in modes
    ]


def verdict(outcomes: list[Placement]) -> str:
    """``failed`` when a gang can never run, ``degraded`` when one spans blocks or waits, else ``pass``."""
    if any(o.waits == "forever" for o in outcomes):
        return "failed"
    if any(o.blocks > 1 or o.waits != "no" for o in outcomes):
        return "degraded"
    return "pass"
