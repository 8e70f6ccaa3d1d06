"""CLI commands of `fabricguard.placement`: ``fabricguard render kueue`` prints Kueue's side of the profile."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
import yaml

from fabricguard.admission.commands import render_app
from fabricguard.console import fail
from fabricguard.profile.commands import profile_or_exit


@render_app.command("kueue")
def render_kueue_cmd(
    profile: Path = typer.Option(..., "--profile", "-p", help="Platform profile YAML."),
    configuration: bool = typer.Option(
        False, "--configuration",
        help="Print only the fragment of Kueue's Configuration (waitForPodsReady, frameworks, exclusions).",
    ),
) -> None:
    """Print the profile's Kueue v1beta2 objects: Topologies, ResourceFlavors, the fabric AdmissionCheck, queues."""
    from fabricguard.placement.kueue import KueueRenderError, objects
    from fabricguard.placement.kueue import configuration as kueue_configuration

    prof = profile_or_exit(profile)
    try:
        if configuration:
            head = "# Merge into Kueue's Configuration (the kueue-manager-config ConfigMap), then restart Kueue.\n"
            docs = [kueue_configuration(prof)]
        else:
            head = (f"# Kueue objects of profile {prof.metadata.name}. Apply after Kueue v0.19+; "
                    "see also: fabricguard render kueue --configuration\n")
            docs = objects(prof)
    except KueueRenderError as exc:
        fail(f"{profile}: {exc}")
    if not docs:
        fail(f"{profile}: no pool names a queue, so there is nothing to render for Kueue",
             hint="give the fabric pools a queue: {name: ...}")
    sys.stdout.write(head + yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False, width=120))


def register(app: typer.Typer) -> None:
    """The commands above attach to the shared ``render`` group on import; nothing else to add."""
