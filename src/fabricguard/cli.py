"""The ``fabricguard`` command line: one Typer app, each concept contributing its own commands."""

from __future__ import annotations

import typer

import fabricguard.agent.commands as agent_commands
from fabricguard import __version__
from fabricguard.admission import commands as admission_commands
from fabricguard.agent import render_commands as agent_render_commands
from fabricguard.console import CommandGroup
from fabricguard.controller import commands as controller_commands
from fabricguard.doctor import commands as doctor_commands
from fabricguard.nccl import commands as nccl_commands
from fabricguard.placement import commands as placement_commands
from fabricguard.placement import render_commands as install_commands
from fabricguard.probes import commands as probe_commands
from fabricguard.profile import commands as profile_commands
from fabricguard.storage import commands as storage_commands
from fabricguard.verdict import commands as verdict_commands

app = typer.Typer(
    name="fabricguard",
    cls=CommandGroup,  # usage errors exit 3 (input unusable) for every command, not click's 2
    help="Prove that multi-node GPU training used the fabric and storage it paid for.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


# ``fabricguard render <what>``: every part's manifests, in one group owned here (the glue on top).
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


def _version(value: bool) -> None:
    if value:
        typer.echo(f"fabricguard {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """fabricguard: the job ran is not success."""


app.add_typer(profile_commands.app, name="profile")
app.add_typer(nccl_commands.app, name="nccl")
app.add_typer(storage_commands.app, name="storage")
agent_commands.register(app)
verdict_commands.register(app)
probe_commands.register(app)
doctor_commands.register(app)
admission_commands.register(app)
app.add_typer(render_app, name="render")
placement_commands.register(app)
controller_commands.register(app)
install_commands.register(app)


def main() -> None:
    app()
