"""The ``fabricguard`` command line: one Typer app, each concept contributing its own commands.

Each area's commands module is imported when one of its commands runs (or when help lists them all), not on
every start: importing every area cost each invocation about half of its start-up, a command that reads one
file paid for the doctor's rules, the controller and the install trees. ``AREAS`` names which module adds
which top-level command; tests/cli/test_cli_areas.py holds it to what the modules really register.
"""

from __future__ import annotations

import importlib
from typing import Any

import typer

from fabricguard import __version__
from fabricguard.console import CommandGroup

# Top-level command -> the module whose ``register(app)`` adds it (``:app`` for a Typer added whole under the
# command's name; ``render`` is assembled below from five areas). In the order help lists them.
AREAS: dict[str, str] = {
    "agent": "fabricguard.agent.commands",
    "agent-sweep": "fabricguard.agent.commands",
    "verify-job": "fabricguard.verdict.commands",
    "validate": "fabricguard.probes.commands",
    "snapshot": "fabricguard.doctor.commands",
    "controller": "fabricguard.controller.commands",
    "preflight": "fabricguard.placement.render_commands",
    "profile": "fabricguard.profile.commands:app",
    "nccl": "fabricguard.nccl.commands:app",
    "storage": "fabricguard.storage.commands:app",
    "probe": "fabricguard.probes.commands",
    "doctor": "fabricguard.doctor.commands",
    "admission": "fabricguard.admission.commands",
    "render": "",
    "placement": "fabricguard.placement.commands",
    "pool": "fabricguard.placement.commands",
    "breaker": "fabricguard.controller.commands",
}


def _render_app() -> typer.Typer:
    """``fabricguard render <what>``: every part's manifests, in one group owned here (the glue on top)."""
    from fabricguard.admission import commands as admission_commands
    from fabricguard.agent import render_commands as agent_render_commands
    from fabricguard.controller import commands as controller_commands
    from fabricguard.placement import commands as placement_commands
    from fabricguard.placement import render_commands as install_commands

    render_app = typer.Typer(help="Print Kubernetes manifests.", no_args_is_help=True)
    render_app.command("webhook")(admission_commands.render_webhook_cmd)
    render_app.command("kueue")(placement_commands.render_kueue_cmd)
    render_app.command("transition-rbac")(placement_commands.render_transition_rbac_cmd)
    render_app.command("readiness")(agent_render_commands.render_readiness_cmd)
    render_app.command("agent")(agent_render_commands.render_agent_cmd)
    render_app.command("controller")(controller_commands.render_controller_cmd)
    render_app.command("kueue-check")(controller_commands.render_kueue_check_cmd)
    render_app.command("alerts")(controller_commands.render_alerts_cmd)
    render_app.command("dashboard")(controller_commands.render_dashboard_cmd)
    render_app.command("exporters")(controller_commands.render_exporters_cmd)
    render_app.command("install")(install_commands.render_install_cmd)
    render_app.command("namespace")(install_commands.render_namespace_cmd)
    render_app.command("storage")(install_commands.render_storage_cmd)
    return render_app


def area_commands(spec: str, name: str) -> dict[str, Any]:
    """The click commands that the area ``spec`` (an ``AREAS`` value) adds to the root, by name."""
    scratch = typer.Typer()
    if not spec:
        scratch.add_typer(_render_app(), name=name)
    else:
        module, _, attr = spec.partition(":")
        mod = importlib.import_module(module)
        if attr:
            scratch.add_typer(getattr(mod, attr), name=name)
        else:
            mod.register(scratch)
    return dict(typer.main.get_group(scratch).commands)


class LazyGroup(CommandGroup):
    """The root group: an area's commands are built the first time one of them is asked for."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._built: dict[str, Any] = {}
        super().__init__(*args, **kwargs)

    @property  # type: ignore[override]
    def commands(self) -> dict[str, Any]:  # every command, built (help, and tests that walk the tree)
        for name in AREAS:
            self._build(name)
        return self._built

    @commands.setter
    def commands(self, value: dict[str, Any]) -> None:
        self._built = dict(value)

    def _build(self, name: str) -> None:
        if name in AREAS and name not in self._built:
            for built, cmd in area_commands(AREAS[name], name).items():
                self._built.setdefault(built, cmd)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        self._build(cmd_name)
        return self._built.get(cmd_name)

    def list_commands(self, ctx: Any) -> list[str]:
        return [*AREAS, *(n for n in self._built if n not in AREAS)]


app = typer.Typer(
    name="fabricguard",
    cls=LazyGroup,  # usage errors exit 3 (input unusable) for every command, not click's 2 (CommandGroup)
    help="Prove that multi-node GPU training used the fabric and storage it paid for.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"fabricguard {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """fabricguard: the job ran is not success."""


def main() -> None:
    app()
