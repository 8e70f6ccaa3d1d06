"""What the pure reconcile pass is handed besides the listing: values, no I/O.

The Lustre edge (``lustre.py``) reads canary results and finished jobs' logs into ``LustreFacts`` before the
pass; ``live.running_jobs`` names the jobs being followed as ``RunningJob``. They live here, below every pure
module, so that the pass and its parts (canaries, jobs, live, busbw) import no edge and no module imports in a
circle (``layers.py`` checks module cycles inside a package).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from fabricguard.controller.outcome import Judged
from fabricguard.verdict.job import JobVerdict


@dataclass(frozen=True)
class CanaryFiles:
    """What one canary run left on Lustre: its judgement, or why its files could not be judged."""

    run_dir: str
    judged: Judged | None = None
    error: str | None = None  # "TypeName: message" of what reading the files raised
    results_written: datetime | None = None  # newest mtime in the run's result directory


@dataclass(frozen=True)
class JobFiles:
    """What a finished job's NCCL logs say (``verdict``), or the error reading them raised."""

    log_dir: str
    verdict: JobVerdict | None = None
    error: Exception | None = None


@dataclass
class LustreFacts:
    """Everything a pass read from Lustre, by key; a key that is absent was not read (the pass waits)."""

    root: Path | None = None
    runs: dict[str, list[str]] = field(default_factory=dict)  # pool -> run names on Lustre, newest first
    canaries: dict[tuple[str, str], CanaryFiles] = field(default_factory=dict)  # (namespace, run) -> files
    jobs: dict[tuple[str, str], JobFiles] = field(default_factory=dict)  # (namespace, job) -> its logs
    jobs_waiting: int = 0  # finished jobs awaiting a verdict whose logs this pass had no time to read


@dataclass(frozen=True)
class RunningJob:
    kind: str
    api_version: str
    plural: str
    namespace: str
    name: str
    pool: str
    obj: dict[str, Any] = field(compare=False, hash=False)
    # The {job} of its Lustre directory when it is not the object's name: ``<name>/<group index>`` for one
    # replica group of a LeaderWorkerSet, the RayCluster's name for a RayJob (fabricguard.kinds).
    log_name: str = ""

    @property
    def job(self) -> str:
        """The job name its logs are under (``canary.log_dir(profile, namespace, job)``)."""
        return self.log_name or self.name

    @property
    def key(self) -> tuple[str, str, str]:
        return self.kind, self.namespace, self.job


def not_served_note(plural: str, api_version: str) -> str:
    """The pass's note for an optional kind the API server does not serve (the edge writes it, the pass reads it)."""
    return f"{plural}.{api_version}: not served (not installed); left out"


def served(notes: list[str], plural: str, api_version: str) -> bool:
    """Whether the listing served ``plural`` (an optional kind that was not served left its note)."""
    return not_served_note(plural, api_version) not in notes
