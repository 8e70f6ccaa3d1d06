"""CLI commands of `fabricguard.doctor`: ``doctor``, ``doctor diff A B`` and ``snapshot DIR``.

``fabricguard doctor`` audits a live cluster (kr8s, read-only) or ``--snapshot DIR``; exit 0 without a
finding at or above ``--fail-on`` (critical by default), 1 with one, 3 when the input cannot be used.
This is the I/O edge of the doctor: files, the cluster and the registries are read here, and the rules
get plain data.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

import typer

from fabricguard.console import console, fail, say
from fabricguard.doctor.diff import diff_snapshots, drift_scope
from fabricguard.doctor.engine import Report, run_doctor
from fabricguard.doctor.model import SEVERITY_ORDER, Severity
from fabricguard.doctor.report import render, render_table
from fabricguard.doctor.rules import RuleFn
from fabricguard.doctor.snapshot import Snapshot, SnapshotError, load_snapshot
from fabricguard.options import JSON_ALIAS, now_value, output_option, profile_option
from fabricguard.profile import PlatformProfile
from fabricguard.profile.commands import profile_or_exit
from fabricguard.userfiles import SourceError, output_file, write_text

T = TypeVar("T")


class Format(StrEnum):
    table = "table"
    json = "json"
    markdown = "markdown"
    html = "html"


FORMAT_OPTION: Any = typer.Option(Format.table, "--format", help="Output format: table, json, markdown or html.")

doctor_app = typer.Typer(
    help="Audit a cluster or a snapshot for fabric failures that hide for months.",
    invoke_without_command=True,
    no_args_is_help=False,
)


def _load_profile(path: str | None, snap: Snapshot | None) -> PlatformProfile | None:
    chosen: str | Path | None = path
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
        fail(f"cannot read {path}: {exc.strerror or exc}")


def _format(fmt: Format, as_json: bool) -> Format:
    return Format.json if as_json else fmt


def _check_output(output: Path | None) -> None:
    """Refuse an unusable -o before any work is done (a directory, a FIFO, a missing folder)."""
    if output is not None:
        try:
            output_file(output)
        except SourceError as exc:
            fail(f"-o/--output {exc}")


def _emit(report: Report, fmt: Format, output: Path | None) -> None:
    if fmt is Format.table and output is None:
        render_table(report, console)
        return
    text = render(report, "markdown" if fmt is Format.table else fmt.value)
    if output is None:
        typer.echo(text, nl=False)
        return
    try:
        write_text(output, text)
    except SourceError as exc:
        fail(f"-o/--output {exc}")
    say(f"wrote {output} ({len(report.findings)} findings)")


def _live(kubeconfig: str | None, context: str | None) -> Snapshot:
    from fabricguard.doctor.snapshot import snapshot_from_lists

    return snapshot_from_lists(_collect(kubeconfig, context), source=f"live ({context or 'current context'})")


def _read_cluster(read: Callable[[Any], Awaitable[T]], kubeconfig: str | None, context: str | None, hint: str) -> T:
    """Run ``read(kube)`` against the cluster; a kubeconfig problem names the file, a server that refuses or never
    answers names the server (one line, exit 3, within the request timeouts of ``fabricguard.kube``)."""
    from fabricguard.kube import Kube, KubeError
    from fabricguard.kubeconfig import check_kubeconfig, kubeconfig_path

    path = kubeconfig_path(kubeconfig)
    if path is not None:
        try:
            check_kubeconfig(path, context)
        except SourceError as exc:
            fail(f"--kubeconfig {exc}", hint=hint)
    where = str(path) if path is not None else "the pod's service account"

    async def run() -> T:
        kube = await Kube.connect(str(path) if path else None, context)
        try:
            return await read(kube)
        finally:
            await kube.close()

    try:
        return asyncio.run(run())
    except KubeError as exc:
        fail(f"cannot read the cluster (from {where}): {exc}")
    except SourceError as exc:
        fail(str(exc))


def _collect(kubeconfig: str | None, context: str | None) -> dict[str, dict[str, Any]]:
    """The live cluster as the doctor reads it (``_read_cluster``'s one-line refusals)."""
    from fabricguard.doctor.snapshot import collect_live

    return _read_cluster(lambda kube: collect_live(kube=kube), kubeconfig, context,
                         "pass --snapshot DIR, or a kubeconfig with the cluster's context")


def _registry_rule(snap: Snapshot, prof: PlatformProfile | None, registry: list[str]) -> RuleFn:
    """Ask each registry named with --registry for the platforms of the images the rules will judge."""
    from fabricguard.doctor.registry import RegistryClient, RegistryError
    from fabricguard.doctor.rules.images import images_on_hosts, registry_rule

    hosts, insecure = [], set()
    for r in registry:
        host = r.split("://", 1)[-1].rstrip("/")
        hosts.append(host)
        if r.startswith("http://"):
            insecure.add(host)
    client = RegistryClient(insecure=insecure)
    platforms: dict[str, list[str]] = {}
    for image in images_on_hosts(snap, prof, hosts):
        try:
            platforms[image] = client.platforms(image)
        except RegistryError as exc:
            snap.notes.append(f"registry: {image}: {exc}")
    return registry_rule(platforms)


@doctor_app.callback()
def doctor(
    ctx: typer.Context,
    snapshot: Path | None = typer.Option(None, "--snapshot", help="Directory of kubectl get -o json/yaml output."),
    profile: str | None = profile_option(help="Platform profile (default: the profile.yaml in --snapshot DIR)."),
    now: str | None = typer.Option(None, "--now", help="Reference time, ISO 8601 (default: the clock)."),
    registry: list[str] = typer.Option(
        [], "--registry", help="Check image platforms on this registry host (repeatable; http://HOST for plain HTTP)."
    ),
    fmt: Format = FORMAT_OPTION,
    as_json: bool = JSON_ALIAS,
    output: Path | None = output_option(),
    fail_on: Severity = typer.Option(Severity.critical, "--fail-on", help="Lowest severity that exits 1."),
    kubeconfig: str | None = typer.Option(None, "--kubeconfig", help="Live mode: kubeconfig file."),
    context: str | None = typer.Option(None, "--context", help="Live mode: kubeconfig context."),
) -> None:
    """Audit a live cluster, or a snapshot with --snapshot DIR."""
    if ctx.invoked_subcommand is not None:
        return
    when = now_value(now)
    fmt = _format(fmt, as_json)
    _check_output(output)
    snap = _load_snapshot(snapshot) if snapshot is not None else _live(kubeconfig, context)
    prof = _load_profile(profile, snap)
    extra: tuple[RuleFn, ...] = (_registry_rule(snap, prof, registry),) if registry else ()
    report = run_doctor(snap, prof, when, extra, with_visuals=fmt in (Format.html, Format.markdown))
    report.fail_on = fail_on
    _emit(report, fmt, output)
    raise typer.Exit(report.exit_code)


def _side_labels(a: Path, b: Path, label_a: str | None, label_b: str | None) -> tuple[str, str]:
    """Each side is named by its directory (``staging``, ``production``); the longer path where the names
    are the same; ``--label-a/--label-b`` win."""
    la, lb = a.name or str(a), b.name or str(b)
    if la == lb:
        la, lb = str(a), str(b)
    if la == lb:
        la, lb = "A", "B"
    return label_a or la, label_b or lb


@doctor_app.command("diff")
def diff(
    a: Path = typer.Argument(..., help="First snapshot directory (e.g. staging)."),
    b: Path = typer.Argument(..., help="Second snapshot directory (e.g. production)."),
    profile: str | None = profile_option(
        help="Profile whose device-plugin namespaces are always compared (default: each snapshot's profile.yaml)."
    ),
    namespace: list[str] = typer.Option(
        [], "--namespace", "-n", help="Compare DaemonSets only in these namespaces, and their ConfigMaps (repeatable)."
    ),
    label_a: str | None = typer.Option(None, "--label-a", help="Name of the first side (default: its directory)."),
    label_b: str | None = typer.Option(None, "--label-b", help="Name of the second side (default: its directory)."),
    fmt: Format = FORMAT_OPTION,
    as_json: bool = JSON_ALIAS,
    output: Path | None = output_option(),
    fail_on: Severity = typer.Option(Severity.critical, "--fail-on", help="Lowest severity that exits 1."),
) -> None:
    """Drift between two snapshots on what matters for the fabric: every DaemonSet, webhooks, NADs, Kueue."""
    fmt = _format(fmt, as_json)
    _check_output(output)
    sa, sb = _load_snapshot(a), _load_snapshot(b)
    if profile is not None:
        pa = pb = _load_profile(profile, None)
    else:
        pa, pb = _load_profile(None, sa), _load_profile(None, sb)
    la, lb = _side_labels(a, b, label_a, label_b)
    if la == lb:
        fail(f"both sides are labelled {la!r}", hint="give --label-a and --label-b different names")
    findings = diff_snapshots(sa, sb, drift_scope((pa, pb), namespace), la, lb)
    findings.sort(key=lambda f: SEVERITY_ORDER[f.severity])
    named = pa or pb
    report = Report(
        findings=findings,
        now=datetime.now(UTC),
        source=f"{la} ({a}) vs {lb} ({b})",
        profile_name=named.metadata.name if named is not None else None,
        notes=sa.notes + sb.notes,
        title="fabricguard doctor diff",
        fail_on=fail_on,
    )
    _emit(report, fmt, output)
    raise typer.Exit(report.exit_code)


def snapshot_command(
    directory: Path = typer.Argument(..., help="Directory to write (one <resource>.json per kind)."),
    kubeconfig: str | None = typer.Option(None, "--kubeconfig", help="kubeconfig file."),
    context: str | None = typer.Option(None, "--context", help="kubeconfig context."),
    replace: bool = typer.Option(
        False, "--replace",
        help="Replace the snapshot already in DIR: its files that this one does not rewrite are removed "
             "(without it, a directory that is not empty is refused, so two clusters never mix)."),
    publish: str | None = typer.Option(
        None, "--publish",
        help="Also publish the objects doctor diff compares as a reference ConfigMap NAMESPACE/NAME, for the "
             "controller of another environment (--reference) to diff against continuously."),
    publish_namespace: list[str] = typer.Option(
        [], "--publish-namespace",
        help="Only DaemonSets and ConfigMaps of this namespace (repeatable) go into the reference, plus the "
             "profile's device-plugin namespaces (default: DaemonSets of every namespace)."),
    publish_kubeconfig: str | None = typer.Option(
        None, "--publish-kubeconfig", help="Cluster to publish into (default: the one read)."),
    publish_context: str | None = typer.Option(None, "--publish-context", help="Its kubeconfig context."),
    environment: str | None = typer.Option(
        None, "--environment", help="Name of this environment in the reference (default: the directory's name)."),
    profile: str | None = profile_option(help="Profile whose device-plugin namespaces the reference includes."),
) -> None:
    """Save what the doctor reads from a live cluster (never Secrets) as kubectl-shaped JSON lists.

    The cluster is read a page at a time, each page written out as it arrives; only the --publish reference is kept.

    Memory stays bounded however large the cluster: 85 MiB peak at 5,000 nodes and 60,000 pods (bench/doctor)."""
    from fabricguard.doctor.diff import normalize
    from fabricguard.doctor.reference import ReferenceError, parse_target
    from fabricguard.doctor.snapshot import SNAPSHOT_SUFFIXES, SnapshotWriter
    from fabricguard.userfiles import output_dir

    target = None
    if publish is not None:
        try:
            target = parse_target(publish)
        except ReferenceError as exc:
            fail(f"--publish {exc}")
        from fabricguard.kubeconfig import check_kubeconfig, kubeconfig_path

        where = kubeconfig_path(publish_kubeconfig) if publish_kubeconfig else None
        try:  # before the snapshot is read and written, under its own option's name
            if where is not None:
                check_kubeconfig(where, publish_context)
        except SourceError as exc:
            fail(f"--publish-kubeconfig {exc}", hint="pass the kubeconfig of the cluster to publish into")
    elif publish_kubeconfig or publish_context:
        fail("--publish-kubeconfig and --publish-context say where --publish writes", hint="add --publish NS/NAME")
    if publish is None and publish_namespace:
        fail("--publish-namespace narrows the reference that --publish sends", hint="add --publish NAMESPACE/NAME")
    prof = _load_profile(profile, None)
    try:
        output_dir(directory)
        before = sorted(p.name for p in directory.iterdir())
    except SourceError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{directory}: cannot list: {exc.strerror or exc}")
    if before and not replace:
        shown = ", ".join(before[:3]) + (f" and {len(before) - 3} more" if len(before) > 3 else "")
        fail(f"{directory} is not empty ({shown}): writing there would mix this cluster with what it holds",
             hint="pass an empty or new directory, or --replace to replace the snapshot in it")
    scope = drift_scope([prof], publish_namespace)

    def keep(obj: dict[str, Any]) -> dict[str, Any] | None:
        meta = obj.get("metadata") or {}
        return normalize(obj) if scope.covers(str(obj.get("kind", "")), str(meta.get("namespace") or "")) else None

    writer = SnapshotWriter(directory, keep if target is not None else None)
    notes = _collect_into(writer, kubeconfig, context)
    if replace:
        rewritten = {p.name for p in writer.written}
        for name in before:
            old = directory / name
            if name not in rewritten and old.suffix in SNAPSHOT_SUFFIXES and old.is_file() and not old.is_symlink():
                old.unlink()
                say((f"removed {name} (not in this cluster's snapshot)", "dim"))
    for note in notes:
        say((f"note: {note}", "dim"))
    say(f"wrote {len(writer.written)} files, {sum(writer.counts.values())} objects to {directory}")
    if target is not None:
        _publish(list(writer.kept.values()), target, environment or directory.resolve().name,
                 publish_kubeconfig or kubeconfig, publish_context if publish_kubeconfig else context)


def _collect_into(writer: Any, kubeconfig: str | None, context: str | None) -> list[str]:
    """``stream_live`` into ``writer``, with ``_read_cluster``'s one-line refusals (the server named, exit 3)."""
    from fabricguard.doctor.snapshot import stream_live

    return _read_cluster(lambda kube: stream_live(writer, kube=kube), kubeconfig, context,
                         "pass a kubeconfig with the cluster's context")


def _publish(objects: list[dict[str, Any]], target: tuple[str, str], environment: str,
             kubeconfig: str | None, context: str | None) -> None:
    from fabricguard.doctor.reference import ReferenceError, configmap, encode_objects
    from fabricguard.kube import Kube, KubeError, TimedOut, Unreachable

    try:
        data = encode_objects(objects)
    except ReferenceError as exc:
        fail(f"--publish: {exc}")
    cm = configmap(target[1], target[0], data, environment, datetime.now(UTC))

    async def put() -> None:
        kube = await Kube.connect(kubeconfig, context)
        try:
            if await kube.get("v1", "configmaps", target[1], target[0]) is None:
                await kube.create("v1", "configmaps", cm)
            else:
                await kube.patch("v1", "configmaps", target[1], {"metadata": cm["metadata"],
                                                                 "binaryData": cm["binaryData"]},
                                 namespace=target[0], patch_type="merge")
        finally:
            await kube.close()

    try:
        asyncio.run(put())
    except (Unreachable, TimedOut) as exc:
        fail(f"--publish {target[0]}/{target[1]}: cannot reach the cluster: {exc}")
    except KubeError as exc:
        fail(f"--publish {target[0]}/{target[1]}: the API server refused: {exc}",
             hint="the publisher needs get, create and patch on configmaps in that namespace")
    say(f"published the {environment} reference ({len(data) // 1024 + 1} KiB) to ConfigMap {target[0]}/{target[1]}")


def register(app: typer.Typer) -> None:
    """Add this area's commands to the root app."""
    app.add_typer(doctor_app, name="doctor")
    app.command("snapshot")(snapshot_command)
