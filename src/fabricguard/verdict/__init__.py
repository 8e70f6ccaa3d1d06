"""Per-job verdicts: transport, storage path and time against the pool's baseline."""

from fabricguard.exitcodes import Verdict
from fabricguard.verdict.job import JobInputError, JobVerdict, Level, Reason, judge_job
from fabricguard.verdict.steps import StepInputError, StepTimes, load_step_times

__all__ = [
    "JobInputError",
    "JobVerdict",
    "Level",
    "Reason",
    "StepInputError",
    "StepTimes",
    "Verdict",
    "judge_job",
    "load_step_times",
]
