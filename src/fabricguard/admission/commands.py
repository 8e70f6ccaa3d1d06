"""CLI commands of `fabricguard.admission` (registered on the root app by `register`)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this area's commands to the root app."""
