"""Step timings a job left behind: JSONL, CSV, or lines of a plain training log matched by a regex.

Median step time is the number that moved from 12.36 s to 6.07 s when a 2-node H200 job got RDMA
instead of sockets; it is what a job verdict compares with the pool's baseline.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from fabricguard.userfiles import read_text

# Field names seen in the wild for "seconds this step took".
_SECONDS_KEYS = ("seconds", "step_time", "step_time_s", "time", "duration", "elapsed", "sec", "step_seconds")
_STEP_KEYS = ("step", "iteration", "iter", "global_step")


class StepInputError(ValueError):
    """Step timings that cannot be read; names the file and line."""


@dataclass(frozen=True)
class StepTimes:
    steps: list[tuple[int, float]]
    sources: list[str]

    @property
    def count(self) -> int:
        return len(self.steps)

    @property
    def total_seconds(self) -> float:
        return sum(s for _i, s in self.steps)

    @property
    def median_seconds(self) -> float | None:
        if not self.steps:
            return None
        return statistics.median(s for _i, s in self.steps)

    def to_dict(self) -> dict[str, object]:
        return {
            "count": self.count,
            "total_seconds": round(self.total_seconds, 6),
            "median_seconds": self.median_seconds,
            "sources": self.sources,
        }


def _pick(d: dict[str, object], keys: tuple[str, ...]) -> object | None:
    for k in keys:
        if k in d:
            return d[k]
    return None


def _as_float(v: object, where: str) -> float:
    try:
        f = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise StepInputError(f"{where}: step time {v!r} is not a number") from None
    if not math.isfinite(f) or f < 0:
        raise StepInputError(f"{where}: step time {v!r} is not a finite, non-negative number of seconds")
    return f


def _as_step(v: object, default: int, where: str) -> int:
    if v is None or v == "":
        return default
    try:
        f = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise StepInputError(f"{where}: step {v!r} is not a number") from None
    if not math.isfinite(f):
        raise StepInputError(f"{where}: step {v!r} is not a finite number")
    return int(f)


def read_jsonl(path: Path) -> list[tuple[int, float]]:
    out: list[tuple[int, float]] = []
    for n, line in enumerate(read_text(path).splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise StepInputError(f"{path}:{n}: not JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise StepInputError(f"{path}:{n}: expected an object with 'step' and 'seconds'")
        sec = _pick(obj, _SECONDS_KEYS)
        if sec is None:
            continue  # other metrics (loss, lr) share the file
        step = _pick(obj, _STEP_KEYS)
        out.append((_as_step(step, len(out), f"{path}:{n}"), _as_float(sec, f"{path}:{n}")))
    return out


def read_csv(path: Path) -> list[tuple[int, float]]:
    out: list[tuple[int, float]] = []
    reader = csv.DictReader(io.StringIO(read_text(path), newline=""))
    if not reader.fieldnames:
        raise StepInputError(f"{path}: empty CSV; expected a header such as 'step,seconds'")
    fields = [f.strip().lower() for f in reader.fieldnames]
    sec_key = next((reader.fieldnames[i] for i, f in enumerate(fields) if f in _SECONDS_KEYS), None)
    step_key = next((reader.fieldnames[i] for i, f in enumerate(fields) if f in _STEP_KEYS), None)
    if sec_key is None:
        raise StepInputError(
            f"{path}:1: no step-time column; name one of {', '.join(_SECONDS_KEYS)} (got {reader.fieldnames})"
        )
    for n, row in enumerate(reader, 2):
        raw = (row.get(sec_key) or "").strip()
        if not raw:
            continue
        step_raw = (row.get(step_key) or "").strip() if step_key else ""
        step = _as_step(step_raw, len(out), f"{path}:{n}")
        out.append((step, _as_float(raw, f"{path}:{n}")))
    return out


def compile_step_regex(pattern: str) -> re.Pattern[str]:
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise StepInputError(f"--step-regex {pattern!r} is not a valid regular expression: {exc}") from None
    if "seconds" not in rx.groupindex and rx.groups != 1:
        raise StepInputError(
            "--step-regex needs a named group (?P<seconds>...) (and optionally (?P<step>...)), or exactly one group"
        )
    return rx


def read_log_with_regex(path: Path, rx: re.Pattern[str]) -> list[tuple[int, float]]:
    out: list[tuple[int, float]] = []
    with path.open(encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            m = rx.search(line)
            if not m:
                continue
            sec = m.group("seconds") if "seconds" in rx.groupindex else m.group(1)
            step = m.group("step") if "step" in rx.groupindex else None
            out.append((int(step) if step and step.isdigit() else len(out), _as_float(sec, f"{path}:{n}")))
    return out


def load_step_times(files: list[Path], log_files: list[Path], step_regex: str | None) -> StepTimes:
    """Timings from JSONL/CSV files, plus regex matches in log files when a regex is given."""
    steps: list[tuple[int, float]] = []
    sources: list[str] = []
    for f in files:
        got = read_jsonl(f) if f.suffix == ".jsonl" else read_csv(f)
        if not got:
            # A step-timing file with no timing in it would drop the step check and let the job pass.
            raise StepInputError(
                f"{f}: no step times in this file; give each step a seconds field "
                f"({', '.join(_SECONDS_KEYS)}), or remove the file from the job directory"
            )
        steps.extend(got)
        sources.append(str(f))
    if step_regex:
        rx = compile_step_regex(step_regex)
        for f in log_files:
            got = read_log_with_regex(f, rx)
            if got:
                steps.extend(got)
                sources.append(str(f))
    # Ranks of a synchronous job log the same steps; the slowest rank sets each step's time.
    by_step: dict[int, float] = {}
    for i, sec in steps:
        if sec > by_step.get(i, -1.0):
            by_step[i] = sec
    return StepTimes(sorted(by_step.items()), sources)
