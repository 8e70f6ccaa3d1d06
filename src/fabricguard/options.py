"""The options every command spells the same way, so a person learns them once.

- ``--format table|json`` (the doctor adds ``markdown|html``); ``--json`` is a hidden alias of
  ``--format json`` kept for scripts written before the convention.
- ``-o/--output PATH`` where a command writes a file or a folder (``--out`` is a hidden alias).
- ``-p/--profile FILE`` for the platform profile; ``--profile local`` names the profile embedded in the
  package (this machine, no RDMA), and no command that judges a job falls back to it silently.
- ``--now TIME`` fixes the clock for replays and tests: an RFC 3339 time (no zone: UTC), read by
  :func:`now_value`; without it, the wall clock.
- Every JSON document a command prints carries its overall answer under the key ``verdict``
  (``pass``, ``degraded``, ``failed`` or ``invalid``; see ``fabricguard.exitcodes``); the parts of a
  report (a probe section, a check) carry theirs under ``status``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer

from fabricguard import dnsnames
from fabricguard.console import fail
from fabricguard.times import parse_time


class Format(StrEnum):
    table = "table"
    json = "json"


def format_option(default: str = "table", choices: str = "table or json") -> Any:
    return typer.Option(default, "--format", help=f"Output format: {choices}.")


JSON_ALIAS: Any = typer.Option(False, "--json", hidden=True, help="Same as --format json.")


def wants_json(fmt: str, as_json: bool) -> bool:
    """``--format json``, or the hidden ``--json`` alias."""
    return as_json or str(fmt) == "json"


class Mode(StrEnum):
    """``--mode``: observe (report what would be held, denied or tainted; act on nothing) or enforce."""

    observe = "observe"
    enforce = "enforce"


def mode_option(default: str = "enforce") -> Any:
    return typer.Option(default, "--mode", help="observe: report what enforce would deny, hold or taint, and act on "
                        "nothing; enforce: act. A pool's own profile field mode wins.")


def monitoring_option() -> Any:
    return typer.Option("prometheus-operator", "--monitoring",
                        help="Who scrapes: prometheus-operator, gmp (GKE Managed Prometheus) or none. The "
                             "NetworkPolicies admit only these scrapers (and the kubelet) to the metrics ports.")


def check_monitoring(value: str) -> str:
    """``--monitoring`` as given, or exit 3 naming the choices."""
    from fabricguard.netpolicy import MONITORING

    if value not in MONITORING:
        fail(f"--monitoring {value!r}: use one of {', '.join(MONITORING)}")
    return value


def profile_option(required: bool = False, help: str = "Platform profile YAML ('local': the embedded one).") -> Any:
    return typer.Option(... if required else None, "--profile", "-p", help=help)


def output_option(help: str = "Write the report to this file.") -> Any:
    return typer.Option(None, "--output", "-o", help=help)


def html_option(what: str) -> Any:
    return typer.Option(None, "--html", help=f"Also write {what} as one self-contained HTML page to this file "
                        "(verdict first, what to change, the evidence and plots; no script, nothing fetched).")


OUT_ALIAS: Any = typer.Option(None, "--out", hidden=True, help="Same as --output.")


def output_path(output: Path | None, out: Path | None) -> Path | None:
    """``-o/--output``, or the hidden ``--out`` alias; both at once is a usage error."""
    if output is not None and out is not None and output != out:
        raise typer.BadParameter("give -o/--output once (--out is the same option)", param_hint="--output")
    return output if output is not None else out


def now_value(value: str | None) -> datetime:
    """``--now``: the time given (RFC 3339, read by fabricguard.times; no zone is UTC), else the wall clock.
    An unreadable time is one line naming the option, exit 3."""
    if value is None:
        return datetime.now(UTC)
    t = parse_time(value)
    if t is None:
        fail(f"--now {value!r} is not an RFC 3339 time", hint="e.g. --now 2026-11-30T12:00:00Z")
    return t


def namespace_problem(value: str) -> str | None:
    """Why ``value`` is not a namespace name (an RFC 1123 label), or None."""
    if dnsnames.is_label(value):
        return None
    return (
        f"{value!r} is not a namespace name: at most 63 lowercase letters, digits and '-', starting and ending "
        "with a letter or digit (RFC 1123 label)"
    )


def check_namespace(option: str, value: str, example: str = "fabricguard-system") -> str:
    """``value`` when it is a namespace name; otherwise one ``error:`` line naming ``option`` and exit 3."""
    problem = namespace_problem(value)
    if problem:
        fail(f"{option} {problem}", hint=f"e.g. {option} {example}")
    return value


def check_port(option: str, port: int, *, zero: str | None = None) -> int:
    """A TCP port (1-65535; 0 too when ``zero`` says what it means), else one line naming ``option`` and exit 3."""
    if port == 0 and zero:
        return port
    if not 1 <= port <= 65535:
        fail(f"{option} {port}: a TCP port is 1-65535" + (f" (0: {zero})" if zero else ""),
             hint=f"e.g. {option} 8080")
    return port
