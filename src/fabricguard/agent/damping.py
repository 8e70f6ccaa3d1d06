"""Damping: a node turns ``True`` only after N consecutive passing runs; one failure turns it ``False`` at once.

A flapping link (up, down, up) must not open the node to a 64-node job between two flaps. The asymmetry is the
point: closing is immediate, reopening waits for evidence.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabricguard.agent.condition import Readiness, Reason


@dataclass
class Damper:
    required: int = 3
    streak: int = 0

    def __post_init__(self) -> None:
        if self.required < 1:
            raise ValueError("the number of consecutive passes must be at least 1")

    def seed_stable(self) -> None:
        """Start as if already stable: a restarted agent that finds its own fresh ``True`` keeps it."""
        self.streak = self.required

    def apply(self, verdict: Readiness) -> Readiness:
        """The verdict to report given this run's verdict and the streak of passes before it."""
        if not verdict.ready:
            self.streak = 0
            return verdict
        self.streak = min(self.streak + 1, self.required)
        if self.streak >= self.required:
            return verdict
        return Readiness(
            "False",
            Reason.stabilizing,
            f"checks passed {self.streak} of {self.required} consecutive runs required before the node opens "
            f"({verdict.message})",
            verdict.checks,
        )
