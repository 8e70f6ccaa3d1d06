"""CLI commands of `fabricguard.storage`."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add this area's commands to the root app."""
