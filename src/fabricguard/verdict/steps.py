"""Step timings a job left behind: JSONL, CSV, or lines of a plain training log matched by a regex.

Median step time is the number that moved from 12.36 s to 6.07 s when a 2-node H200 job got RDMA
instead of sockets; it is what a job verdict compares with the pool's baseline.

The files are the tenant's: each is read as a stream of lines capped at ``MAX_LINE_BYTES`` (a longer line, or
JSON nested too deep to parse, is a ``StepInputError`` naming the file and line, never a crash), at most
``MAX_STEP_BYTES`` per file and ``MAX_STEPS`` steps in all. Each is opened once, inside the job's directory it
was listed in (``userfiles.open_in``): a file swapped for a link between the listing and the read is refused,
naming the file, never followed into another tenant's folder.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from fabricguard.userfiles import MAX_LINE_BYTES, LineCutter, SourceError, open_in, read_text

MAX_STEP_BYTES = 256 * 1024**2  # per step-timing file: tens of millions of steps' worth
MAX_STEPS = 2_000_000
MAX_CSV_BYTES = 64 * 1024**2

# Field names seen in the wild for "seconds this step took".
_SECONDS_KEYS = ("seconds", "step_time", "step_time_s", "time", "duration", "elapsed", "sec", "step_seconds")
_STEP_KEYS = ("step", "iteration", "iter", "global_step")


class StepInputError(ValueError):
    """Step timings that cannot be read; names the file and line."""


@dataclass(frozen=True)
class IoRecord:
    """One rank's I/O phase as the job logged it: ``{"phase": "checkpoint-write", "seconds": 41.2, "bytes":
    123456789, "step": 500}`` in the same JSONL as its steps (docs/storage.md). ``seconds`` is wall time spent in
    the phase, apart from the step times."""

    phase: str
    seconds: float
    bytes: int | None
    step: int | None
    source: str


@dataclass(frozen=True)
class StepTimes:
    steps: list[tuple[int, float]]
    sources: list[str]
    io: list[IoRecord] = field(default_factory=list)

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


def _open(path: Path, within: Path | None, max_bytes: int | None = None) -> BinaryIO:
    """The tenant's file, opened inside ``within`` (default: its own folder) by ``userfiles.open_in``: never
    through a link, only a regular file, at most ``max_bytes`` when given. Refusals are StepInputError."""
    try:
        return open_in(within or path.parent, path, max_bytes=max_bytes)
    except SourceError as exc:
        raise StepInputError(str(exc)) from None


def _lines(path: Path, max_bytes: int = MAX_STEP_BYTES, within: Path | None = None
           ) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of a file, streamed in bounded memory; an over-long line raises StepInputError."""
    fh = _open(path, within, max_bytes)
    cutter = LineCutter()
    n = 0
    read = 0
    with fh:
        while True:
            try:
                block = fh.read(1 << 20)
            except OSError as exc:
                raise StepInputError(f"{path}: cannot read: {exc.strerror or exc}") from None
            read += len(block)
            if read > max_bytes:  # grown since it was opened
                raise StepInputError(f"{path}: is more than the {max_bytes:,} bytes this input may be")
            lines = cutter.feed(block) if block else cutter.finish()
            if cutter.overlong:
                raise StepInputError(f"{path}:{cutter.overlong_line}: a line longer than {MAX_LINE_BYTES:,} bytes; "
                                     "a step record is one short JSON object per line")
            for line in lines.split(b"\n")[:-1]:
                n += 1
                yield n, line
            if not block:
                return


IO_PHASES = ("checkpoint-write", "checkpoint-read", "data-read")
MAX_IO_BYTES = 2**62  # a phase's bytes above this is a corrupt record, not a checkpoint (4 EiB)


def read_jsonl(path: Path, within: Path | None = None) -> list[tuple[int, float]]:
    """The step times of a JSONL file (I/O phase records left out)."""
    return read_jsonl_records(path, within)[0]


def _io_record(obj: dict[str, object], path: Path, n: int) -> IoRecord:
    where = f"{path}:{n}"
    phase = obj.get("phase")
    if phase not in IO_PHASES:
        raise StepInputError(f"{where}: phase {phase!r} is not one of {', '.join(IO_PHASES)}")
    sec = _pick(obj, _SECONDS_KEYS)
    if sec is None:
        raise StepInputError(f"{where}: an I/O phase record needs its seconds (e.g. \"seconds\": 41.2)")
    raw_bytes = obj.get("bytes")
    size: int | None = None
    if raw_bytes is not None:
        b = _as_float(raw_bytes, where)
        if b > MAX_IO_BYTES:
            raise StepInputError(f"{where}: bytes {raw_bytes!r} is not a plausible size for one phase")
        size = int(b)
    step = _pick(obj, _STEP_KEYS)
    return IoRecord(str(phase), _as_float(sec, where), size, None if step is None else _as_step(step, 0, where),
                    str(path))


def parse_record(raw: bytes, path: Path | str, n: int) -> IoRecord | tuple[object, float] | None:
    """One JSONL line: an I/O phase record (it has ``phase``), a step's ``(raw step or None, seconds)``, or None
    for a blank line or a record without a seconds field (loss, lr). Shared by the files read after the job
    (``read_jsonl_records``) and the controller's live reader (``controller/live_io.py``)."""
    line = raw.strip()
    if not line:
        return None
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise StepInputError(f"{path}:{n}: not JSON ({exc.msg})") from None
    except UnicodeDecodeError:
        raise StepInputError(f"{path}:{n}: not UTF-8 text") from None
    except RecursionError:
        raise StepInputError(f"{path}:{n}: JSON nested too deeply to read; a step record is a flat object "
                             "such as {\"step\": 1, \"seconds\": 6.1}") from None
    if not isinstance(obj, dict):
        raise StepInputError(f"{path}:{n}: expected an object with 'step' and 'seconds'")
    if "phase" in obj:
        return _io_record(obj, Path(path), n)
    sec = _pick(obj, _SECONDS_KEYS)
    if sec is None:
        return None  # other metrics (loss, lr) share the file
    return _pick(obj, _STEP_KEYS), _as_float(sec, f"{path}:{n}")


def step_number(raw: object, default: int, where: str) -> int:
    """A step record's step (its ``step``/``iteration``/... field), ``default`` when it has none."""
    return _as_step(raw, default, where)


def read_jsonl_records(path: Path, within: Path | None = None) -> tuple[list[tuple[int, float]], list[IoRecord]]:
    """(step times, I/O phase records) of a JSONL file: a record with ``phase`` is an I/O phase, one with a
    seconds field a step, anything else (loss, lr) is left alone."""
    out: list[tuple[int, float]] = []
    io: list[IoRecord] = []
    for n, raw in _lines(path, within=within):
        rec = parse_record(raw, path, n)
        if rec is None:
            continue
        if isinstance(rec, IoRecord):
            io.append(rec)
            if len(io) > MAX_STEPS:
                raise StepInputError(f"{path}:{n}: more than {MAX_STEPS:,} I/O phase records")
            continue
        step, sec = rec
        out.append((_as_step(step, len(out), f"{path}:{n}"), sec))
        if len(out) > MAX_STEPS:
            raise StepInputError(f"{path}:{n}: more than {MAX_STEPS:,} step times; keep one record per step")
    return out, io


def read_csv(path: Path, within: Path | None = None) -> list[tuple[int, float]]:
    out: list[tuple[int, float]] = []
    try:
        text = read_text(path, max_bytes=MAX_CSV_BYTES, within=within or path.parent)
    except SourceError as exc:
        raise StepInputError(str(exc)) from None
    try:
        return _read_csv_rows(path, csv.DictReader(io.StringIO(text, newline="")), out)
    except csv.Error as exc:
        raise StepInputError(f"{path}: not CSV step timings ({exc})") from None


def _read_csv_rows(path: Path, reader: csv.DictReader[str], out: list[tuple[int, float]]) -> list[tuple[int, float]]:
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


def read_log_with_regex(path: Path, rx: re.Pattern[str], within: Path | None = None) -> list[tuple[int, float]]:
    out: list[tuple[int, float]] = []
    cutter = LineCutter()
    n = 0
    try:
        with _open(path, within) as fh:
            while True:
                block = fh.read(1 << 20)
                lines = cutter.feed(block) if block else cutter.finish()
                for raw in lines.split(b"\n")[:-1]:
                    n += 1
                    m = rx.search(raw.decode("utf-8", "replace"))
                    if not m:
                        continue
                    sec = m.group("seconds") if "seconds" in rx.groupindex else m.group(1)
                    step = m.group("step") if "step" in rx.groupindex else None
                    out.append((int(step) if step and step.isdigit() else len(out), _as_float(sec, f"{path}:{n}")))
                    if len(out) > MAX_STEPS:
                        raise StepInputError(f"{path}:{n}: more than {MAX_STEPS:,} step times matched --step-regex")
                if not block:
                    break
    except OSError as exc:
        raise StepInputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return out


def load_step_times(files: list[Path], log_files: list[Path], step_regex: str | None,
                    within: Path | None = None) -> StepTimes:
    """Timings from JSONL/CSV files, plus regex matches in log files when a regex is given. ``within``: the job's
    directory the files were listed in; each is opened inside it (``userfiles.open_in``), never through a link."""
    steps: list[tuple[int, float]] = []
    sources: list[str] = []
    io: list[IoRecord] = []
    for f in files:
        got, got_io = read_jsonl_records(f, within) if f.suffix == ".jsonl" else (read_csv(f, within), [])
        io.extend(got_io)
        if not got and got_io:
            sources.append(str(f))
            continue
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
            got = read_log_with_regex(f, rx, within)
            if got:
                steps.extend(got)
                sources.append(str(f))
    # Ranks of a synchronous job log the same steps; the slowest rank sets each step's time.
    by_step: dict[int, float] = {}
    for i, sec in steps:
        if sec > by_step.get(i, -1.0):
            by_step[i] = sec
    return StepTimes(sorted(by_step.items()), sources, io)
