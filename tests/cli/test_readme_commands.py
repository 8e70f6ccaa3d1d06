"""README.md's Commands table against the CLI: every command that exists has its row, and every row names a
command that exists (so a new command cannot ship undocumented, nor a removed one stay documented)."""

from __future__ import annotations

import re
from pathlib import Path

import typer

from fabricguard.cli import app

README = Path(__file__).resolve().parents[2] / "README.md"


def commands() -> set[str]:
    out: set[str] = set()

    def walk(cmd: object, path: list[str]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, [*path, name])
        if not subs or getattr(cmd, "invoke_without_command", False):
            out.add(" ".join(path))

    walk(typer.main.get_command(app), [])
    return {c for c in out if c}


def table() -> str:
    text = README.read_text()
    return text[text.index("## Commands\n"):text.index("\nExit codes everywhere")]


def test_every_command_has_a_row_and_every_row_a_command() -> None:
    rows = table()
    cmds = commands()
    missing = sorted(c for c in cmds if f"| `fabricguard {c}" not in rows)
    assert missing == [], f"README.md Commands table lacks: {missing}"
    named = set(re.findall(r"^\| `fabricguard ([a-z][a-z -]*?)(?: [-A-Z\[]|`)", rows, re.M))
    assert named and named <= cmds, sorted(named - cmds)


def test_the_kubectl_plugin_has_its_rows() -> None:
    from fabricguard.kubectl.commands import app as plugin

    rows = table()
    cmds = {c.name for c in typer.main.get_command(plugin).commands.values()}  # type: ignore[attr-defined]
    assert cmds == {"why", "pools"}
    assert all(f"| `kubectl fabricguard {c}" in rows for c in cmds), sorted(cmds)


def test_readme_opens_with_the_two_set_up_commands() -> None:
    first = README.read_text().split("```")[1]
    assert [ln.split("#")[0].strip() for ln in first.splitlines()[1:] if ln.strip()] == ["make demo", "make test"]
