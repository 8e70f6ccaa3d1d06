"""Terminal output shared by every command: one console, one printer that never reads text as markup,
one way to report an error and stop, and the rule that usage errors exit 3 like any other unusable input.

Every string a command prints may quote a log line (``[send] via NET/IB``), a path or user input
(``[host[:port]/]repo``), which rich would read as markup and silently drop. So text goes through
``text``/``say``/``row``: plain strings are literal, and style is given beside the text as
``(text, style)``, never inside it.

Exit codes (``fabricguard.exitcodes``, re-exported here): 0 pass, 1 degraded or findings, 2 failed, 3 the
input could not be read or used (the message says which file or option and what to change).
"""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

try:  # typer vendors its own copy of click since 0.2x; the usage errors are that copy's classes
    from typer._click import exceptions as _click_errors
except ImportError:  # pragma: no cover - typer that uses the installed click
    from click import exceptions as _click_errors  # type: ignore[no-redef,import-not-found,unused-ignore]

from fabricguard.exitcodes import EXIT_DEGRADED, EXIT_FAILED, EXIT_INPUT, EXIT_PASS, exit_code

__all__ = [
    "EXIT_DEGRADED",
    "EXIT_FAILED",
    "EXIT_INPUT",
    "EXIT_PASS",
    "CommandGroup",
    "Part",
    "console",
    "err_console",
    "exit_code",
    "fail",
    "print_json",
    "row",
    "say",
    "text",
]

console = Console(highlight=False, soft_wrap=False)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

# A piece of output: literal text, or (literal text, rich style).
Part = str | tuple[str, str]


def text(*parts: Part) -> Text:
    """One ``Text`` from literal parts: brackets in them stay brackets (``[send]``, ``[0]mlx5_0``)."""
    out = Text()
    for p in parts:
        if isinstance(p, tuple):
            out.append(p[0], style=p[1])
        else:
            out.append(p)
    return out


def say(*parts: Part, err: bool = False) -> None:
    """Print one line of literal parts (see ``text``) on stdout, or stderr with ``err``."""
    (err_console if err else console).print(text(*parts))


def row(table: Table, *cells: Part | None) -> None:
    """Add a table row whose cells are literal text (``None`` is an empty cell)."""
    table.add_row(*(text(c) if c is not None else Text() for c in cells))


def fail(message: str, *, hint: str | None = None, code: int = EXIT_INPUT) -> NoReturn:
    """Print ``error: message`` (and what to do next) on stderr and exit (3 unless told otherwise)."""
    say(("error:", "bold red"), " ", message, err=True)
    if hint:
        say(("hint:", "dim"), " ", hint, err=True)
    raise typer.Exit(code)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


class CommandGroup(TyperGroup):
    """The root command group: a usage error (a missing option, a bad choice, a number out of range, an
    unknown command) is input that cannot be used, so it is one ``error:`` line and exit 3 for every
    command, instead of click's exit 2, which would read as "failed"."""

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except _click_errors.UsageError as exc:
            _usage_error(exc)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except _click_errors.UsageError as exc:
            _usage_error(exc)


def _usage_error(exc: Any) -> NoReturn:
    ctx = exc.ctx
    if isinstance(exc, _click_errors.NoArgsIsHelpError) and ctx is not None:
        # Typer's rich help prints itself (on stdout) and returns no text; plain click returns the text.
        help_text = ctx.get_help()
        if help_text.strip():
            typer.echo(help_text)
        raise typer.Exit(EXIT_INPUT)
    where = f"{ctx.command_path}: " if ctx is not None else ""
    fail(
        f"{where}{exc.format_message()}",
        hint=f"run '{ctx.command_path} --help' for the options" if ctx is not None else None,
    )
