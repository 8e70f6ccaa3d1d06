"""Terminal output shared by every command: one console, one way to report an error and stop.

Exit codes are part of the contract with cron jobs and CI: 0 pass, 1 degraded or findings, 2 failed,
3 the input could not be read or used (the message says which file and what to change).
"""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

EXIT_PASS = 0
EXIT_DEGRADED = 1
EXIT_FAILED = 2
EXIT_INPUT = 3

console = Console(highlight=False, soft_wrap=False)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(message: str, *, hint: str | None = None, code: int = EXIT_INPUT) -> NoReturn:
    """Print ``error: message`` (and what to do next) on stderr and exit."""
    # Messages quote user input and paths ("[host[:port]/]repo"), which rich must not read as markup.
    err_console.print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False)
    if hint:
        err_console.print(f"[dim]hint:[/] {escape(hint)}")
    raise typer.Exit(code)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
