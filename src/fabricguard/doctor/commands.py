"""CLI commands of `fabricguard.doctor`: ``doctor``, ``doctor diff A B`` and ``snapshot DIR``.

``fabricguard doctor`` audits a live cluster (kr8s, read-only) or ``--snapshot DIR``; exit 0 without a
critical finding, 1 with one, 3 when the input cannot be used.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

import typer

from fabricguard.console import EXIT_INPUT, console, fail
from fabricguard.doctor.diff import diff_snapshots, drift_namespaces
from fabricguard.doctor.engine import Report, run_doctor
from fabricguard.doctor.model import SEVERITY_ORDER, Severity
from fabricguard.doctor.report import render, render_table
from fabricguard.doctor.snapshot import Snapshot, SnapshotError, load_snapshot
from fabricguard.profile import PlatformProfile
from fabricguard.profile.commands import profile_or_exit


class Format(StrEnum):
    table = "table"
    json = "json"
    markdown = "markdown"
    html = "html"


doctor_app = typer.Typer(
    help="Audit a cluster or a snapshot for fabric failures that hide for months.",
    invoke_without_command=True,
    no_args_is_help=False,
)


def parse_now(value: str | None) -> datetime:
    if value is None:
        return datetime.now(UTC)
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        fail(f"--now {value!r} is not an ISO 8601 time", hint="e.g. --now 2025-06-30T12:00:00Z")
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def _load_profile(path: Path | None, snap: Snapshot | None) -> PlatformProfile | None:
    chosen = path
    if chosen is None and snap is not None and snap.profile_path is not None:
        chosen = snap.profile_path
        snap.notes.append(f"using the profile found in the snapshot: {chosen}")
    if chosen is None:
        return None
    return profile_or_exit(chosen)


def _load_snapshot(path: Path) -> Snapshot:
    try:
        return load_snapshot(path)
    except SnapshotError as exc:
        fail(str(exc), hint="every file must be kubectl get -o json/yaml output")
    except OSError as exc:
        fail(f"cannot read {path}: {exc}")


def _emit(report: Report, fmt: Format, output: Path | None) -> None:
    if fmt is Format.table and output is None:
        render_table(report, console)
        return
    text = render(report, "markdown" if fmt is Format.table else fmt.value)
    if output is None:
        typer.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        console.print(f"wrote {output} ({len(report.findings)} findings)")


def _live(kubeconfig: str | None, context: str | None) -> Snapshot:
    from fabricguard.doctor.snapshot import collect_live, snapshot_from_lists

    try:
        lists = asyncio.run(collect_live(kubeconfig=kubeconfig, context=context))
    except Exception as exc:  # kr8s raises many kinds: no config, TLS, connection refused
        fail(f"cannot read the cluster: {exc}", hint="pass --snapshot DIR, or check the kubeconfig/context")
    return snapshot_from_lists(lists, source=f"live ({context or 'current context'})")


@doctor_app.callback()
def doctor(
    ctx: typer.Context,
    snapshot: Path | None = typer.Option(None, "--snapshot", help="Directory of kubectl get -o json/yaml output."),
    profile: Path | None = typer.Option(None, "--profile", help="Platform profile (default: profile.yaml in DIR)."),
    now: str | None = typer.Option(None, "--now", help="Reference time, ISO 8601 (default: the clock)."),
    registry: list[str] = typer.Option(
        [], "--registry", help="Check image platforms on this registry host (repeatable; http://HOST for plain HTTP)."
    ),
    fmt: Format = typer.Option(Format.table, "--format", help="table, json, markdown or html."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the report to this file."),
    fail_on: Severity = typer.Option(Severity.critical, "--fail-on", help="Lowest severity that exits 1."),
    kubeconfig: str | None = typer.Option(None, "--kubeconfig", help="Live mode: kubeconfig file."),
    context: str | None = typer.Option(None, "--context", help="Live mode: kubeconfig context."),
) -> None:
    """Audit a live cluster, or a snapshot with --snapshot DIR."""
    if ctx.invoked_subcommand is not None:
        return
    when = parse_now(now)
    snap = _load_snapshot(snapshot) if snapshot is not None else _live(kubeconfig, context)
    prof = _load_profile(profile, snap)
    extra = ()
    if registry:
        from fabricguard.doctor.registry import RegistryClient
        from fabricguard.doctor.rules.images import registry_rule

        hosts, insecure = [], set()
        for r in registry:
            host = r.split("://", 1)[-1].rstrip("/")
            hosts.append(host)
            if r.startswith("http://"):
                insecure.add(host)
        client = RegistryClient(insecure=insecure)
        extra = (registry_rule(client.platforms, hosts),)
    report = run_doctor(snap, prof, when, extra, with_visuals=fmt in (Format.html, Format.markdown))
    _emit(report, fmt, output)
    raise typer.Exit(report.exit_code(fail_on))


def _label(path: Path, prof: PlatformProfile | None) -> str:
    env = str(prof.metadata.environment) if prof is not None else ""
    return path.name if not env or env == path.name else f"{env} ({path.name})"


@doctor_app.command("diff")
def diff(
    a: Path = typer.Argument(..., help="First snapshot directory (e.g. staging)."),
    b: Path = typer.Argument(..., help="Second snapshot directory (e.g. production)."),
    profile: Path | None = typer.Option(None, "--profile", help="Profile naming the device plugin namespaces."),
    namespace: list[str] = typer.Option([], "--namespace", "-n", help="Also compare this namespace (repeatable)."),
    fmt: Format = typer.Option(Format.table, "--format", help="table, json, markdown or html."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the report to this file."),
    fail_on: Severity = typer.Option(Severity.critical, "--fail-on", help="Lowest severity that exits 1."),
) -> None:
    """Drift between two snapshots on what matters for the fabric (images, args, env, selectors, ...)."""
    sa, sb = _load_snapshot(a), _load_snapshot(b)
    if profile is not None:
        pa = pb = _load_profile(profile, None)
    else:
        pa, pb = _load_profile(None, sa), _load_profile(None, sb)
    la, lb = _label(a, pa), _label(b, pb)
    if la == lb:
        la, lb = f"A({a})", f"B({b})"
    findings = diff_snapshots(sa, sb, drift_namespaces((pa, pb), namespace), la, lb)
    findings.sort(key=lambda f: SEVERITY_ORDER[f.severity])
    report = Report(
        findings=findings,
        now=datetime.now(UTC),
        source=f"{a} vs {b}",
        profile_name=(pa or pb).metadata.name if (pa or pb) else None,
        notes=sa.notes + sb.notes,
        title="fabricguard doctor diff",
    )
    _emit(report, fmt, output)
    raise typer.Exit(report.exit_code(fail_on))


def snapshot_command(
    directory: Path = typer.Argument(..., help="Directory to write (one <resource>.json per kind)."),
    kubeconfig: str | None = typer.Option(None, "--kubeconfig", help="kubeconfig file."),
    context: str | None = typer.Option(None, "--context", help="kubeconfig context."),
) -> None:
    """Save what the doctor reads from a live cluster (never Secrets) as kubectl-shaped JSON lists."""
    from fabricguard.doctor.snapshot import collect_live, write_snapshot

    try:
        lists = asyncio.run(collect_live(kubeconfig=kubeconfig, context=context))
    except Exception as exc:
        fail(f"cannot read the cluster: {exc}", hint="check the kubeconfig/context", code=EXIT_INPUT)
    written = write_snapshot(lists, directory)
    for note in lists.get("_notes", {}).get("notes", []):
        console.print(f"[dim]note: {note}[/]")
    total = sum(len(v.get("items", [])) for k, v in lists.items() if k != "_notes")
    console.print(f"wrote {len(written)} files, {total} objects to {directory}")


def register(app: typer.Typer) -> None:
    """Add this area's commands to the root app."""
    app.add_typer(doctor_app, name="doctor")
    app.command("snapshot")(snapshot_command)
