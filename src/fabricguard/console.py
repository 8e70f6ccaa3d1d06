"""Terminal output shared by every command: one console, one printer that never reads text as markup,
one way to report an error and stop, and the rule that usage errors exit 3 like any other unusable input.

Every string a command prints may quote a log line (``[send] via NET/IB``), a path or user input
(``[host[:port]/]repo``), which rich would read as markup and silently drop. So text goes through
``text``/``say``/``row``: plain strings are literal, and style is given beside the text as
``(text, style)``, never inside it.

Exit codes (``fabricguard.exitcodes``, re-exported here): 0 pass, 1 degraded or findings, 2 failed, 3 the
input could not be read or used (the message says which file or option and what to change).

Layout, one place for every command (pipes, CI logs and Slack pastes are 80 columns, where rich tables collapse
to a letter per line):

- ``verdict_line``: line 1 of every judging command: the verdict word first (``PASS``, ``DEGRADED``,
  ``FAILED``, ``SKIPPED``, ``INVALID``), in its one colour, then what was judged.
- ``blocks``: the list layout, one item per block, failures first: a head line, then each field on its own
  line, prose wrapped at word boundaries only; a command (written between backticks in a fix) is never
  wrapped: it goes on its own line, whole, however long.
- ``table_or_blocks``: a table only on a terminal at least ``TABLE_MIN_WIDTH`` wide where every column fits its
  longest word; otherwise (any pipe, any narrower terminal) the same items as blocks.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
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
    "VERDICT_STYLE",
    "Block",
    "Column",
    "CommandGroup",
    "Part",
    "blocks",
    "console",
    "envelope",
    "err_console",
    "exit_code",
    "fail",
    "paragraph",
    "print_json",
    "row",
    "say",
    "table_or_blocks",
    "text",
    "verdict_line",
    "wrap",
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


# One colour per verdict word, for every command.
VERDICT_STYLE: dict[str, str] = {
    "pass": "bold green",
    "degraded": "bold yellow",
    "failed": "bold red",
    "skipped": "bold cyan",
    "invalid": "bold magenta",
    "unjudged": "bold cyan",  # nccl inspect without --expect or -p: reported, not judged
}
# Below this width (and whenever stdout is not a terminal) items are blocks, not table rows.
TABLE_MIN_WIDTH = 120
_CODE = re.compile(r"`([^`\n]+)`")


def verdict_line(verdict: str, subject: str, *details: str) -> None:
    """Line 1: ``DEGRADED  subject · detail · detail``; the word in the verdict's colour."""
    word = str(verdict)
    rest = " · ".join(d for d in (subject, *details) if d)
    say((word.upper(), VERDICT_STYLE.get(word, "bold")), "  ", rest)


def _tokens(value: str) -> list[tuple[str, bool]]:
    """Words and whole commands (backtick spans, without their backticks): (token, is_command)."""
    out: list[tuple[str, bool]] = []
    pos = 0
    for m in _CODE.finditer(value):
        out += [(w, False) for w in value[pos:m.start()].split()]
        out.append((m.group(1).strip(), True))
        pos = m.end()
    out += [(w, False) for w in value[pos:].split()]
    return out


def wrap(value: str, width: int, indent: str = "", first: str = "") -> list[str]:
    """``value`` wrapped at word boundaries to ``width``: a word longer than the line stays whole, and a command
    (a backtick span) sits on a line of its own, whole, two columns in from ``indent`` (copy-paste takes it in
    one piece). ``first`` starts line 1 (``"  fix: "``) instead of ``indent``."""
    lines: list[str] = []
    cur, empty = first or indent, True

    def flush() -> None:
        nonlocal cur, empty
        if not empty or cur.strip():  # a line holding only its label is kept
            lines.append(cur.rstrip())
        cur, empty = indent, True

    after_command = False
    for tok, cmd in _tokens(value):
        if cmd:
            flush()
            lines.append(f"{indent}  {tok}")
            after_command = True
            continue
        if after_command and not tok.strip(".,;:)"):
            continue  # the sentence's punctuation after a command would sit alone on a line
        after_command = False
        if not empty and len(cur) + 1 + len(tok) > width:
            flush()
        cur += tok if empty else " " + tok
        empty = False
    if not empty:
        lines.append(cur.rstrip())
    return lines


def paragraph(value: str, *, indent: str = "", first: str = "", style: str = "") -> None:
    """Print ``value`` wrapped by :func:`wrap` at the console's width (rich never re-wraps it)."""
    for line in wrap(value, console.width, indent, first):
        console.print(Text(line, style=style), soft_wrap=True)


@dataclass
class Block:
    """One item of a list layout: a head (a level word in its colour, a name) and fields in order."""

    head: Sequence[Part]
    fields: list[tuple[str, str]] = field(default_factory=list)


def blocks(items: Iterable[Block], *, indent: str = "  ") -> None:
    """One block per item, a blank line between: the head, then ``label: value`` per field (wrapped at words,
    commands on their own lines, whole)."""
    for n, b in enumerate(items):
        if n:
            console.print()
        console.print(text(*b.head), soft_wrap=True)
        for label, value in b.fields:
            if not value:
                continue
            for line in wrap(value, console.width, indent + "  ", f"{indent}{label}: "):
                console.print(Text(line), soft_wrap=True)


@dataclass
class Column:
    name: str
    justify: str = "left"
    # A cell that must never wrap (a number, a path, a command): its whole text is its narrowest width.
    no_wrap: bool = False


def _longest_word(value: str) -> int:
    return max((len(t) for t, _ in _tokens(value)), default=0)


def _fits(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> bool:
    need = 1  # the left border
    for i, c in enumerate(columns):
        cells = [r[i] for r in rows] + [c.name]
        narrow = max((len(x) if c.no_wrap else _longest_word(x)) for x in cells)
        need += narrow + 3  # padding 1 + 1, border 1
    return need <= width


def wide() -> bool:
    """Whether tables may be used: a terminal at least TABLE_MIN_WIDTH columns wide."""
    return console.is_terminal and console.width >= TABLE_MIN_WIDTH


def table_or_blocks(columns: Sequence[Column], rows: Sequence[Sequence[Part]], as_blocks: Iterable[Block],
                    *, title: str | None = None) -> None:
    """A table when :func:`wide` and every column fits its longest word; else ``as_blocks`` (the same items)."""
    plain_rows = [[c[0] if isinstance(c, tuple) else c for c in r] for r in rows]
    if wide() and _fits(columns, plain_rows, console.width):
        t = Table(title=title, show_lines=True, expand=False)
        for c in columns:
            t.add_column(c.name, justify=c.justify, no_wrap=c.no_wrap, overflow="fold")  # type: ignore[arg-type]
        for r in rows:
            row(t, *[_untick(c) for c in r])
        console.print(t)
        return
    if title:
        say((title, "bold"))
    blocks(as_blocks)


def _untick(cell: Part) -> Part:
    """A table cell: each command on a line of its own (the column is at least as wide as it, see _fits)."""
    def one(value: str) -> str:
        return re.sub(r" *\n *", "\n", _CODE.sub(lambda m: f"\n{m.group(1).strip()}\n", value)).strip("\n")

    return (one(cell[0]), cell[1]) if isinstance(cell, tuple) else one(cell)


def fail(message: str, *, hint: str | None = None, code: int = EXIT_INPUT) -> NoReturn:
    """Print ``error: message`` (and what to do next) on stderr and exit (3 unless told otherwise)."""
    say(("error:", "bold red"), " ", message, err=True)
    if hint:
        say(("hint:", "dim"), " ", hint, err=True)
    raise typer.Exit(code)


# Every command's JSON opens with the same two keys (docs/json.md): which schema version, which document.
JSON_API_VERSION = "fabricguard.io/v1"


def envelope(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    """``{"apiVersion": "fabricguard.io/v1", "kind": kind, ...data}``: the versioned form of a command's JSON."""
    head = {"verdict": data["verdict"]} if "verdict" in data else {}  # the answer first, whatever the dict's order
    return {"apiVersion": JSON_API_VERSION, "kind": kind, **head,
            **{k: v for k, v in data.items() if k not in ("apiVersion", "kind", "verdict")}}


def print_json(data: Any, kind: str | None = None) -> None:
    """Print a command's JSON; with ``kind``, in the versioned envelope (docs/json.md, docs/schemas/)."""
    if kind is not None:
        data = envelope(kind, data)
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
