"""Verdict words and the exit codes they map to: the one mapping every command uses.

Exit codes are part of the contract with cron jobs and CI: 0 pass, 1 degraded (or findings at or above
``--fail-on``, or a denied review), 2 failed, 3 the input could not be read or used (a bad file, a bad
option, a usage error: the message says which file or option and what to change). This module imports
nothing from the terminal side (typer, rich), so pure modules such as ``probes.result`` can use it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

EXIT_PASS: Final = 0
EXIT_DEGRADED: Final = 1
EXIT_FAILED: Final = 2
EXIT_INPUT: Final = 3

# Every verdict word any command prints under the JSON key "verdict"; "skipped" judges nothing and so
# exits like a pass only where something else was judged (validate refuses a run that judged nothing);
# "invalid" is input that cannot be used (``profile check`` of a broken profile); "unjudged" reports without
# judging (``nccl inspect`` without --expect or -p): it exits 0 and is never "pass", so no gate reads it as one.
VERDICT_EXIT: Final[dict[str, int]] = {
    "pass": EXIT_PASS,
    "skipped": EXIT_PASS,
    "degraded": EXIT_DEGRADED,
    "failed": EXIT_FAILED,
    "invalid": EXIT_INPUT,
    "unjudged": EXIT_PASS,
}


class Verdict(StrEnum):
    """A command's overall answer, the words printed under ``verdict`` (one vocabulary for every part)."""

    pass_ = "pass"
    degraded = "degraded"
    failed = "failed"
    skipped = "skipped"
    invalid = "invalid"
    unjudged = "unjudged"

    @property
    def exit_code(self) -> int:
        return VERDICT_EXIT[self.value]


def exit_code(verdict: str) -> int:
    """The exit code of a verdict word (``pass``, ``degraded``, ``failed``, ``skipped``)."""
    try:
        return VERDICT_EXIT[str(verdict)]
    except KeyError:
        raise ValueError(f"unknown verdict {verdict!r}; expected one of {sorted(VERDICT_EXIT)}") from None
