"""CLI of the controller: ``fabricguard controller`` and ``fabricguard render controller|alerts|dashboard``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from fabricguard import yamlout
from fabricguard.console import Block, blocks, console, err_console, fail, paragraph, print_json, verdict_line
from fabricguard.options import (
    JSON_ALIAS,
    Format,
    Mode,
    check_namespace,
    check_port,
    format_option,
    mode_option,
    now_value,
    wants_json,
)

if TYPE_CHECKING:
    from fabricguard.controller.storage_proof import StorageStanding
    from fabricguard.profile.model import PlatformProfile

PROFILE_OPT = typer.Option(..., "--profile", "-p", help="Platform profile (YAML).")


def controller_cmd(
    profile: Path = PROFILE_OPT,
    once: bool = typer.Option(False, "--once", help="Run one reconcile pass and exit (0 healthy, 1 not)."),
    now: str = typer.Option(None, "--now", help="Fix the clock (RFC 3339), for replays; only with --once."),
    namespace: str = typer.Option("fabricguard-system", "--namespace", "-n", help="Where canaries run."),
    image: str = typer.Option(None, "--canary-image",
                              help="Image of the canary pods: fabricguard with the probe extra (torch with NCCL); "
                                   "a pool's canary.image wins."),
    lustre_root: Path = typer.Option(None, "--lustre-root",
                                     help="Where the Lustre claim's root is mounted here (read-only is enough)."),
    kubeconfig: str = typer.Option(None, "--kubeconfig", help="Kubeconfig (default: in-cluster or ~/.kube)."),
    context: str = typer.Option(None, "--context"),
    identity: str = typer.Option(None, "--identity", help="Leader-election identity (default: host-pid)."),
    metrics_port: int = typer.Option(None, "--metrics-port",
                                     help="Port of the long-running controller's /metrics (default 8080; 0: none)."),
    metrics_textfile: Path = typer.Option(
        None, "--metrics-textfile",
        help="With --once: write the pass's metrics to this file in the node-exporter textfile format "
             "(replaced atomically; name it *.prom in the collector's --collector.textfile.directory)."),
    resync: float = typer.Option(30.0, "--resync", help="Seconds between passes without changes."),
    full_every: float = typer.Option(
        300.0, "--full-every", min=0.0,
        help="Seconds between full passes; in between, a pass re-judges only what the watch events since the "
             "previous pass touched (0: every pass is full)."),
    reference: str = typer.Option(
        None, "--reference",
        help="ConfigMap NAMESPACE/NAME holding another environment's snapshot (fabricguard snapshot --publish): "
             "every pass diffs this cluster against it and exports fabricguard_drift_findings."),
    fmt: Format = format_option(choices="table or json (with --once)"),
    as_json: bool = JSON_ALIAS,
    force: bool = typer.Option(False, "--force", help="With --once: act even while another controller leads."),
    lease: int = typer.Option(15, "--lease", min=2, max=120,
                              help="Lease duration in seconds (longer by itself when API requests are slow)."),
    live_interval: float = typer.Option(10.0, "--live-interval", min=1.0,
                                        help="Seconds between two reads of each running job's NCCL logs."),
    live_workers: int = typer.Option(4, "--live-workers", min=1, max=256,
                                     help="Running jobs' logs read at once (each a round trip per file on Lustre; "
                                          "one file descriptor each at most)."),
    verdict_budget: float = typer.Option(
        20.0, "--verdict-budget", min=0.0,
        help="Seconds a pass may spend reading finished jobs' NCCL logs for their verdicts; the rest wait for "
             "the next pass (fabricguard_job_verdicts_waiting), least recently read first. Keep it well under "
             "--stall."),
    stall: float = typer.Option(300.0, "--stall", min=10.0,
                                help="A leader with no finished pass for this many seconds gives the Lease up "
                                     "and fails /healthz."),
    stale_after: float = typer.Option(
        150.0, "--stale-after", min=30.0, max=3600.0,
        help="Admit nothing (hold would-be Ready Workloads Pending) and fail /healthz while a watched kind has "
             "not been heard from (list, event or bookmark) for this many seconds; a watch silent for 60% of "
             "it is listed again."),
    mode: Mode = mode_option(),
) -> None:
    """Validate every pool with canaries, hold Kueue workloads off broken fabrics, judge finished jobs."""
    from fabricguard.controller.runner import RunConfig, run_once
    from fabricguard.profile.commands import profile_or_exit

    check_namespace("--namespace", namespace)
    if not (math.isfinite(resync) and resync > 0):
        fail(f"--resync {resync:g}: the seconds between full passes must be more than 0", hint="e.g. --resync 30")
    if once and metrics_port is not None:
        fail("--metrics-port serves the long-running controller's /metrics; a --once pass exits before anything "
             "scrapes it", hint="with --once, write the pass's metrics for node-exporter: --metrics-textfile "
                                "/var/lib/node-exporter/textfile/fabricguard.prom")
    if metrics_textfile is not None:
        if not once:
            fail("--metrics-textfile is for --once (a CronJob's pass); the long-running controller serves "
                 "--metrics-port", hint="drop --metrics-textfile, or add --once")
        from fabricguard.userfiles import SourceError, output_file

        try:
            output_file(metrics_textfile)
        except SourceError as exc:
            fail(f"--metrics-textfile {exc}")
    if verdict_budget * 2 > stall:
        fail(f"--verdict-budget {verdict_budget:g} is more than half of --stall {stall:g}: a pass reading that "
             "long could be taken for a stalled one", hint="lower --verdict-budget or raise --stall")
    port = check_port("--metrics-port", 8080 if metrics_port is None else metrics_port, zero="no /metrics")
    prof = profile_or_exit(profile)
    fixed = now_value(now) if now is not None else None
    if fixed is not None and not once:
        fail("--now fixes the clock of one pass; use it with --once")
    if lustre_root is not None and not lustre_root.is_dir():
        fail(f"--lustre-root {lustre_root}: not a directory", hint="mount the Lustre claim's root and pass its path")
    if lustre_root is None and any(prof.canary(p) for p in prof.spec.pools):
        err_console.print("[yellow]warning:[/] no --lustre-root: finished canaries are recorded as failed (their "
                          "logs cannot be read) and finished jobs get no verdict")
    missing = [p.name for p in prof.spec.pools if (c := prof.canary(p)) is not None and not c.image]
    if missing and not image:
        fail(f"pool(s) {', '.join(missing)} run canaries but have no canary.image",
             hint="pass --canary-image REF (fabricguard with the probe extra: torch with NCCL), or set canary.image")
    target = None
    if reference is not None:
        from fabricguard.doctor.reference import ReferenceError, parse_target

        try:
            target = parse_target(reference)
        except ReferenceError as exc:
            fail(f"--reference {exc}")
    from fabricguard.kubeconfig import kubeconfig_problem

    problem = kubeconfig_problem(kubeconfig, context)
    if problem:
        fail(problem, hint="pass a kubeconfig with the cluster's context, or run in the cluster")
    cfg = RunConfig(prof, namespace, image or "", lustre_root, kubeconfig, context, identity or "", resync,
                    lease_s=lease, reference=target, stall_s=stall, live_interval_s=live_interval,
                    live_workers=live_workers, stale_s=stale_after, watch_idle_s=stale_after * 0.6, mode=mode.value,
                    full_every_s=full_every, verdict_budget_s=verdict_budget)
    if once:
        from fabricguard.kube import KubeError, unreachable

        try:
            rep = asyncio.run(run_once(cfg, fixed, force=force))
        except KubeError as exc:
            # the API server unreachable, silent or refusing a read the pass needs: one line naming it
            fail(f"cannot reach the cluster: {exc}" if unreachable(exc) else str(exc))
        if metrics_textfile is not None:
            _write_textfile(metrics_textfile, prof, rep)
        if rep.lease_holder:
            err_console.print(f"[yellow]warning:[/] controller {rep.lease_holder!r} holds the Lease: this pass only "
                              "read the cluster and changed nothing (--force to act anyway)")
        _print_pass(rep.result, rep.errors, wants_json(fmt, as_json), rep.acted, rep.live)
        raise typer.Exit(rep.result.exit_code)
    _serve(cfg, port)


def _write_textfile(path: Path, prof, rep) -> None:  # type: ignore[no-untyped-def]
    """The pass's metrics in the Prometheus text format, replaced atomically (a collector never reads half), with
    the per-job series of the running jobs the pass followed (``fabricguard_job_on_sockets``, transport, busbw):
    without them the socket alert could never fire in CronJob mode."""
    from prometheus_client import generate_latest

    from fabricguard.controller.live import LiveCost
    from fabricguard.controller.metrics import Metrics

    metrics = Metrics()
    metrics.observe(prof, rep.result, rep.seconds, len(rep.errors))
    metrics.observe_live(prof, rep.live, LiveCost(jobs=len(rep.live), followed=len(rep.live)))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(generate_latest(metrics.registry))
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        fail(f"--metrics-textfile {path}: cannot write: {exc.strerror or exc}")


def _storage_field(st: StorageStanding | None) -> str:
    """``ready (write 4,000 MB/s, floor 3,200)`` / ``degraded (…)`` / ``not proven``: the pool's storage canary."""
    if st is None:
        return ""
    p = st.proof
    figures = ", ".join(f"{what} {got:,.0f} MB/s" + (f" (floor {floor:,.0f})" if floor else "")
                        for what, got, floor in (("write", p.writeMBps, p.floorWriteMBps),
                                                 ("read", p.readMBps, p.floorReadMBps)) if got is not None) if p else ""
    state = "ready" if st.ready else (p.outcome if p is not None and p.outcome != "passed" else "not proven")
    return state + (f": {figures}" if figures else "")


def _print_pass(result, errors: list[str], as_json: bool, acted: bool, live=()) -> None:  # type: ignore[no-untyped-def]
    from rich.markup import escape

    from fabricguard.controller.live_io import io_row

    running = [{"kind": ob.job.kind, "namespace": ob.job.namespace, "name": ob.job.name, "pool": ob.job.pool,
                "transport": ob.verdict.transport.value, "final": ob.verdict.final} for ob in live]
    for r, ob in zip(running, live, strict=True):
        if ob.busbw is not None and ob.busbw.figures:  # the pool's jobs run NCCL's Inspector
            r["busbw"] = [{"collective": c, "ranks_per_node": k, "gbps": round(f.busbw_gbps, 3),
                           "floor_gbps": f.floor_gbps, "below_minutes": f.below_minutes}
                          for (c, k), f in ob.busbw.figures.items()]
            r["busbw_floor_gbps"] = ob.busbw.floor_gbps
        r |= io_row(ob.io, ob.bound)
    if as_json:
        print_json(result.summary() | {"running": running, "errors": errors, "acted": acted}, "ControllerPass")
        return
    summary = result.summary()
    verdict_line(summary["verdict"], "controller pass", f"{sum(1 for s in result.pools.values() if s.ready)} of "
                 f"{len(result.pools)} pool(s) validated", f"actions {len(result.actions)}"
                 + ("" if acted else " (not carried out)") + (f", {len(errors)} refused" if errors else ""))
    items = []
    for name, s in sorted(result.pools.items(), key=lambda kv: kv[1].ready):  # not validated first
        state = ("VALIDATED", "bold green") if s.ready else (("HELD", "bold red") if s.canary else
                                                            ("UNHEALTHY", "bold yellow"))
        items.append(Block(head=[state, "  ", f"pool {name}"], fields=[
            ("outcome", s.outcome or "-"), ("held workloads", str(result.pending.get(name, 0))),
            ("storage", _storage_field(s.storage)), ("root cause", s.root_cause), ("why", s.message)]))
    for r in running:
        busbw = ", ".join(f"{b['collective']} {b['gbps']:g} GB/s" for b in r.get("busbw") or ())
        io = r.get("io") or {}
        items.append(Block(head=[("RUNNING", "bold"), "  ", f"{r['kind']} {r['namespace']}/{r['name']}"], fields=[
            ("pool", r["pool"]), ("transport", r["transport"] + (" (final)" if r["final"] else " so far")),
            ("busbw", busbw), ("I/O", f"{io['share']:.0%} of its time" if io.get("share") is not None else ""),
            ("bound", r["bound"] if r["bound"] != "none" else "")]))
    blocks(items)
    if result.reference is not None:
        paragraph(f"drift from {result.reference.environment}: {len(result.drift)} object(s)", first="", indent="  ")
        for f in result.drift:
            paragraph(f.message[:300], first="  • ", indent="    ")
    crit = [f for f in result.findings if str(f.severity) == "critical"]
    if crit:
        paragraph(f"doctor: {len(crit)} critical finding(s): " + ", ".join(sorted({f.rule for f in crit})),
                  first="", indent="  ")
    for e in errors:
        err_console.print(f"[red]refused:[/] {escape(e)}")


def _serve(cfg, port: int) -> None:  # type: ignore[no-untyped-def]
    from fabricguard.controller.metrics import Metrics, serve
    from fabricguard.controller.runner import Health, run_forever

    metrics = Metrics()
    health = Health(cfg.stall_s)
    if port:
        try:
            serve(metrics, port)  # /metrics, and /healthz for the liveness probe
        except OSError as exc:
            fail(f"--metrics-port {port}: cannot serve /metrics: {exc.strerror or exc}",
                 hint="pick a free port, or --metrics-port 0 for none")

    async def main() -> None:
        from fabricguard.controller.lease import read_lease
        from fabricguard.controller.runner import connect
        from fabricguard.kube import KubeError, unreachable

        try:  # a server that cannot be reached at start is one line, not a traceback from the first pass
            kube = await connect(cfg)
            try:
                await read_lease(kube, cfg.namespace)
            finally:
                await kube.close()
        except KubeError as exc:
            fail(f"cannot reach the cluster: {exc}" if unreachable(exc) else str(exc),
                 hint="check --kubeconfig/--context, or run in a cluster")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await run_forever(cfg, metrics, stop, health)

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())


def images_or_exit(profile: Path, prof: PlatformProfile, *, image: str | None, canary_image: str | None) -> None:
    """Exit with one line when ``--image`` or ``--canary-image`` (checked when given) or a pool's canary.image
    cannot run the controller or its canaries (``manifests.image_problem``)."""
    from fabricguard.controller.manifests import image_problem, profile_image_problems

    for opt, ref in (("--image", image), ("--canary-image", canary_image)):
        problem = image_problem(ref) if ref is not None else None
        if problem:
            fail(f"{opt}: {problem}", hint=f"e.g. {opt} registry.example.com/fabricguard:0.1.0@sha256:<index digest>")
    for problem in profile_image_problems(prof):
        fail(f"{profile}: {problem}")


def render_controller_cmd(
    profile: Path = PROFILE_OPT,
    image: str = typer.Option(..., "--image", help="fabricguard image, ideally repo@sha256:<index digest>."),
    canary_image: str = typer.Option(None, "--canary-image",
                                     help="Image of the canary pods: fabricguard with the probe extra (torch, NCCL)."),
    namespace: str = typer.Option("fabricguard-system", "--namespace", "-n"),
    monitoring: str = typer.Option("prometheus-operator", "--monitoring",
                                   help="prometheus-operator (ServiceMonitor), gmp (GKE Managed Prometheus "
                                        "PodMonitoring) or none."),
    release: str = typer.Option(None, "--release", help="release label kube-prometheus-stack selects monitors by."),
) -> None:
    """Print the controller's Deployment, CRD, AdmissionCheck, RBAC, ServiceMonitor, PDB and ClusterQueue fragment.

    The namespace is not printed (one owner: ``fabricguard render namespace``, or ``render install``)."""
    from fabricguard.controller.manifests import manifests, pod_monitoring, service_monitor, to_yaml
    from fabricguard.profile.commands import profile_or_exit

    check_namespace("--namespace", namespace)
    prof = profile_or_exit(profile)
    images_or_exit(profile, prof, image=image or None, canary_image=canary_image or None)
    if monitoring not in ("prometheus-operator", "gmp", "none"):
        fail(f"--monitoring {monitoring!r}: use prometheus-operator, gmp or none")
    if prof.spec.storage.lustre is None:
        fail(f"{profile}: spec.storage.lustre is not set; the controller judges canaries and jobs from the NCCL "
             "logs the ranks write to Lustre, so without storage it could never pass a canary",
             hint="add spec.storage.lustre (claimName, mountPath) for the claim the training namespaces mount")
    missing = [p.name for p in prof.spec.pools if (c := prof.canary(p)) is not None and not c.image]
    if missing and not canary_image:
        fail(f"pool(s) {', '.join(missing)} run canaries but have no canary.image",
             hint="pass --canary-image REF: the controller's image has no torch; canaries need the probe extra")
    objs = manifests(prof, profile.read_text(), image, namespace, canary_image, monitoring=monitoring)
    if monitoring == "prometheus-operator":
        objs.append(service_monitor(namespace, release))
    elif monitoring == "gmp":
        objs.append(pod_monitoring(namespace))
    sys.stdout.write(to_yaml(objs, prof))


def render_kueue_check_cmd(profile: Path = PROFILE_OPT) -> None:
    """Print the AdmissionCheck and the ClusterQueue fragment that attaches it to the fabric pools' flavors."""

    from fabricguard.controller.manifests import admission_check, clusterqueue_fragment
    from fabricguard.profile.commands import profile_or_exit

    prof = profile_or_exit(profile)
    frag = yamlout.dump({"spec": clusterqueue_fragment(prof)}, sort_keys=False).rstrip("\n")
    sys.stdout.write("# Add to each ClusterQueue (kueue.x-k8s.io/v1beta2) that serves these flavors:\n"
                     + "".join(f"#   {line}\n" for line in frag.splitlines())
                     + yamlout.dump(admission_check(), sort_keys=False))


def render_alerts_cmd(
    profile: Path = PROFILE_OPT,
    plain: bool = typer.Option(False, "--plain", help="A Prometheus rules file instead of a PrometheusRule."),
    namespace: str = typer.Option("fabricguard-system", "--namespace", "-n"),
    runbook_base_url: str = typer.Option(
        None, "--runbook-base-url", metavar="URL",
        help="Where docs/runbooks/ is served (an internal mirror); each rule's runbook_url is URL/<alert>.md."),
) -> None:
    """Print the alerting rules (PrometheusRule, or --plain a rules file for promtool/Prometheus)."""

    from fabricguard.controller.alerts import prometheus_rule, rule_groups, with_runbook_base
    from fabricguard.profile.commands import profile_or_exit

    check_namespace("--namespace", namespace)
    if runbook_base_url is not None and not runbook_base_url.startswith(("https://", "http://")):
        fail(f"--runbook-base-url {runbook_base_url!r}: give an http(s) URL, e.g. "
             "https://git.example.com/fabricguard/blob/main/docs/runbooks")
    prof = profile_or_exit(profile)
    doc = rule_groups(prof) if plain else prometheus_rule(prof, namespace)
    if runbook_base_url is not None:
        with_runbook_base(doc if plain else doc["spec"], runbook_base_url)
    sys.stdout.write(yamlout.dump(doc, sort_keys=False, width=120))


def render_dashboard_cmd(
    profile: Path = PROFILE_OPT,
    configmap: bool = typer.Option(False, "--configmap", help="A ConfigMap labelled grafana_dashboard: \"1\" (what "
                                   "Grafana's sidecar in kube-prometheus-stack loads) instead of the raw JSON."),
    namespace: str = typer.Option("fabricguard-system", "--namespace", "-n", help="The ConfigMap's namespace."),
) -> None:
    """Print the Grafana dashboard JSON (or, with --configmap, a ConfigMap for Grafana's dashboard sidecar)."""
    from fabricguard.controller.dashboard import configmap as dashboard_configmap
    from fabricguard.controller.dashboard import dashboard
    from fabricguard.profile.commands import profile_or_exit

    prof = profile_or_exit(profile)
    if configmap:

        check_namespace("--namespace", namespace)
        sys.stdout.write(yamlout.dump(dashboard_configmap(prof, namespace), sort_keys=False, width=120))
        return
    sys.stdout.write(json.dumps(dashboard(prof), indent=2) + "\n")


def render_exporters_cmd(
    namespace: str = typer.Option("monitoring", "--namespace", "-n", help="Where the monitors live."),
    platform: str = typer.Option("gpu-operator", "--platform",
                                 help="Where DCGM exporter runs: gpu-operator (NVIDIA GPU Operator), dcgm-exporter "
                                      "(its own Helm chart, e.g. on EKS), or gke (GKE's managed DCGM: nothing to "
                                      "scrape here)."),
    dcgm_namespace: str = typer.Option(None, "--dcgm-namespace",
                                       help="Namespace of DCGM exporter's Service (default: the platform's)."),
    node_exporter_namespace: str = typer.Option("monitoring", "--node-exporter-namespace",
                                                help="Namespace of node-exporter's Service."),
    agent_namespace: str = typer.Option("fabricguard-system", "--agent-namespace",
                                        help="Namespace of the fabricguard node agent."),
) -> None:
    """Print ServiceMonitors for DCGM exporter and node-exporter and a PodMonitor for the node agent, all
    labelling series with the pod's ``node``, which the per-node alerts and the dashboard's job view join on."""
    import dataclasses

    from fabricguard.controller.exporters import DCGM_PLATFORMS, ExporterTargets, monitors

    for opt, value, example in (("--namespace", namespace, "monitoring"), ("--dcgm-namespace", dcgm_namespace,
                                "gpu-operator"), ("--node-exporter-namespace", node_exporter_namespace, "monitoring"),
                                ("--agent-namespace", agent_namespace, "fabricguard-system")):
        if value is not None:
            check_namespace(opt, value, example)
    if platform not in DCGM_PLATFORMS:
        fail(f"--platform {platform!r}: use one of {', '.join(DCGM_PLATFORMS)}")
    preset = DCGM_PLATFORMS[platform]
    t = dataclasses.replace(preset or ExporterTargets(), node_exporter_namespace=node_exporter_namespace,
                            agent_namespace=agent_namespace)
    if dcgm_namespace:
        t = dataclasses.replace(t, dcgm_namespace=dcgm_namespace)
    objs = monitors(t, namespace)
    head = ""
    if preset is None:
        # GKE runs no GPU Operator: its managed DCGM metrics go to Cloud Monitoring (Managed Prometheus).
        objs = [o for o in objs if o["metadata"]["name"] != "fabricguard-dcgm-exporter"]
        head = ("# GKE: DCGM metrics come from GKE's managed DCGM (Cloud Monitoring); no DCGM ServiceMonitor is\n"
                "# rendered. Query them in Managed Prometheus (docs/install.md, what cannot be proven here).\n")
    sys.stdout.write(head + yamlout.dump_all(objs, sort_keys=False, width=120))


breaker_app = typer.Typer(help="The blast-radius breakers: which are open, and a person's reset.",
                          no_args_is_help=True)


def _breaker_call(kubeconfig: str | None, context: str | None, work: Callable[[Any], Awaitable[Any]]) -> Any:
    from fabricguard.cluster_call import run_on_cluster
    from fabricguard.controller.kube import breaker_permissions

    return run_on_cluster(kubeconfig, context, breaker_permissions(), work,
                          kubeconfig_hint="pass a kubeconfig with the cluster's context",
                          needs="the reads and write this needs: render controller's fabricguard-breaker role",
                          refused_code=2)


@breaker_app.command("status")
def breaker_status_cmd(
    kubeconfig: str = typer.Option(None, "--kubeconfig", help="Kubeconfig (default: in-cluster or ~/.kube)."),
    context: str = typer.Option(None, "--context"),
    fmt: Format = format_option(),
    as_json: bool = JSON_ALIAS,
) -> None:
    """Every pool's breakers (exit 0 none open, 1 some open)."""
    from fabricguard import names
    from fabricguard.controller.blast import stored

    async def work(kube: Any) -> Any:
        return await kube.list(names.FV_API, names.FV_PLURAL)

    fvs = _breaker_call(kubeconfig, context, work)
    rows = [{"pool": fv["metadata"]["name"], "check": c, **s.to_dict()}
            for fv in fvs for c, s in stored(fv).items()]
    # The taint slots' budget the controller published per pool (agent/taint_slots.py): what --manage-taints
    # agents may taint before a breaker can open.
    budgets = [{"pool": fv["metadata"]["name"], **bb} for fv in fvs
               if isinstance(bb := (fv.get("status") or {}).get("blastBudget"), dict)]
    opened = [r for r in rows if r["open"]]
    if wants_json(fmt, as_json):
        print_json({"verdict": "degraded" if opened else "pass", "breakers": rows, "budgets": budgets},
                   "BreakerStatus")
    else:
        verdict_line("degraded" if opened else "pass", "breaker status",
                     f"{len(opened)} open breaker(s)" if opened else "no breaker is open")
        items: list[Block] = []
        for r in sorted(rows, key=lambda r: not r["open"]):  # open ones first
            members = r.get("members", [])
            fields = [("since", r.get("since", "?")), ("why", r.get("reason", "")),
                      ("nodes", ", ".join(members[:10]) + (f" and {len(members) - 10} more" if len(members) > 10
                                                          else "")),
                      ("reset", f"`fabricguard breaker reset --pool {r['pool']} --check {r['check']}`")
                      ] if r["open"] else []
            items.append(Block(head=[("OPEN", "bold yellow") if r["open"] else ("closed", "green"), "  ",
                                     f"{r['pool']} / {r['check']}"], fields=[*fields, ("resets", str(r["resets"]))]))
        if items:
            console.print()
            blocks(items)
        if budgets:
            console.print()
            for b in budgets:
                paragraph(f"pool {b['pool']}: {b.get('allowed', '?')} node(s) may newly fail a check within "
                          f"{b.get('windowSeconds', '?')} s of {b.get('nodes', '?')} (the agents' taint slots; "
                          f"counted {b.get('observedAt', '?')})", first="", indent="  ")
    raise typer.Exit(1 if opened else 0)


@breaker_app.command("reset")
def breaker_reset_cmd(
    pool: str = typer.Option(..., "--pool", help="The pool whose breaker to reset."),
    check: str = typer.Option(None, "--check", help="The check (default: every open breaker of the pool)."),
    kubeconfig: str = typer.Option(None, "--kubeconfig", help="Kubeconfig (default: in-cluster or ~/.kube)."),
    context: str = typer.Option(None, "--context"),
    now: str = typer.Option(None, "--now", help="Fix the clock (RFC 3339), for replays."),
) -> None:
    """Close a breaker a person has looked at: from now on the nodes failing that check are tainted and held."""
    from fabricguard import names
    from fabricguard.controller.blast import ResetError, reset_status

    at = now_value(now)

    async def work(kube: Any) -> str | None:
        fv = await kube.get(names.FV_API, names.FV_PLURAL, pool)
        if fv is None:
            return f"pool {pool!r} has no FabricValidation (is the controller running, is the pool in its profile?)"
        try:
            status = reset_status(fv, check, at)
        except ResetError as exc:
            return str(exc)
        await kube.patch(names.FV_API, names.FV_PLURAL, pool, {"status": {"breakers": status}},
                         subresource="status", patch_type="merge", field_manager="fabricguard-breaker-reset")
        return None

    problem = _breaker_call(kubeconfig, context, work)
    if problem:
        fail(problem, hint="fabricguard breaker status lists the open breakers")
    console.print(f"reset: pool {pool} check {check or 'every open one'}; failures from now on count again")


def register(app: typer.Typer) -> None:
    """Add ``controller`` and ``breaker`` to the root app (its ``render`` commands are added by cli.py)."""
    app.command("controller")(controller_cmd)
    app.add_typer(breaker_app, name="breaker")
