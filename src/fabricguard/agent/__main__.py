"""``python -m fabricguard.agent``: the agent alone, as the DaemonSet runs it.

Same options as ``fabricguard agent``; it skips loading every other command of the CLI, which keeps the
agent's resident memory ~2 MiB lower on every GPU node (bench/agent/README.md).
"""

from __future__ import annotations

import typer

from fabricguard.agent.commands import agent_cmd


def main() -> None:
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(agent_cmd)
    app(prog_name="fabricguard agent")


if __name__ == "__main__":
    main()
