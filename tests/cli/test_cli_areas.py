"""cli.py's AREAS against the areas' own registrations: the root builds an area's commands only when one of them
is asked for, so every command an area registers must be routed to that area (or it could not be run), and a
command runs without importing the other areas."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fabricguard.cli import AREAS, area_commands

SRC = Path(__file__).resolve().parents[2] / "src"


def test_every_command_an_area_registers_is_routed_to_that_area() -> None:
    for name, spec in AREAS.items():
        built = area_commands(spec, name)
        assert name in built, f"{spec or 'render'} does not add {name!r}"
        wrong = {other: AREAS.get(other) for other in built if AREAS.get(other) != spec}
        assert not wrong, f"{spec} also adds {sorted(wrong)}, routed elsewhere in cli.AREAS: {wrong}"


def test_every_module_that_registers_commands_is_an_area() -> None:
    modules = {".".join(p.relative_to(SRC).with_suffix("").parts) for p in SRC.glob("fabricguard/*/*commands.py")
               if "\ndef register(" in p.read_text()}
    routed = {spec.partition(":")[0] for spec in AREAS.values()}
    assert modules and modules <= routed, sorted(modules - routed)


def test_a_command_imports_only_its_own_area() -> None:
    code = ("import sys; from fabricguard.cli import main; sys.argv = ['fabricguard', 'storage', 'where', '--help']\n"
            "try:\n main()\nexcept SystemExit as e:\n assert e.code == 0, e.code\n"
            "print(sorted(m for m in sys.modules if m.startswith('fabricguard.') and m.endswith('commands')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert r.stdout.strip().splitlines()[-1] == "['fabricguard.storage.commands']", r.stdout[-500:]
