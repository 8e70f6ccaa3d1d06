"""``python -m fabricguard.agent``: the agent alone, as the DaemonSet runs it.

Same options as ``fabricguard agent``; it skips loading every other command of the CLI, which keeps the
agent's resident memory ~2 MiB lower on every GPU node (bench/agent/README.md). A usage error exits 3 like
any other unusable input, as in the main CLI.
"""

from __future__ import annotations

import sys

import typer

try:  # typer vendors its own click since 0.2x; its usage errors are that copy's classes
    from typer._click.exceptions import ClickException
except ImportError:  # pragma: no cover - a typer that uses the installed click
    from click.exceptions import ClickException  # type: ignore[no-redef,assignment,import-not-found,unused-ignore]

from fabricguard.agent.commands import agent_cmd
from fabricguard.console import EXIT_INPUT


def main(argv: list[str] | None = None) -> int:
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(agent_cmd)
    try:
        rc = app(args=argv, prog_name="fabricguard agent", standalone_mode=False)
    except ClickException as e:
        e.show()
        return EXIT_INPUT
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
