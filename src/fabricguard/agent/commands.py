"""CLI of the node agent: ``fabricguard agent`` (the DaemonSet's command, and ``--once --dry-run`` for a
person at a node's console), ``fabricguard agent-sweep`` (stale conditions -> Unknown), and the
``render readiness`` / ``render agent`` manifests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import sys
import time
from pathlib import Path
from typing import Any

import typer

from fabricguard.console import console, err_console, fail, paragraph, print_json, verdict_line
from fabricguard.exitcodes import EXIT_FAILED, exit_code
from fabricguard.options import (
    JSON_ALIAS,
    Format,
    Mode,
    check_namespace,
    format_option,
    mode_option,
    profile_option,
    wants_json,
)

KUBECONFIG_OPT = typer.Option(None, "--kubeconfig", help="Kubeconfig (default: in-cluster service account).")

log = logging.getLogger("fabricguard.agent")


def _load(profile: Path, pool: str | None):  # type: ignore[no-untyped-def]
    from fabricguard.profile import UnknownPoolError
    from fabricguard.profile.commands import profile_or_exit

    prof = profile_or_exit(profile)
    if pool is not None:
        try:
            prof.pool(pool)
        except UnknownPoolError as e:
            fail(f"--pool: {e}")
    return prof


def _node_json(path: Path, name: str) -> dict[str, Any]:
    from fabricguard.userfiles import SourceError, read_text

    try:  # read_text refuses a FIFO, a device or an oversized file before opening it
        node = json.loads(read_text(path, max_bytes=64 * 1024**2))
    except SourceError as e:
        fail(f"--node-json {e}", hint="save one with kubectl get node NAME -o json")
    except (ValueError, RecursionError) as e:
        fail(f"--node-json {path}: cannot read it as JSON ({str(e) or type(e).__name__})",
             hint="save one with kubectl get node NAME -o json")
    if not isinstance(node, dict) or node.get("kind") != "Node":
        fail(f"--node-json {path}: not a Node object", hint="save one with kubectl get node NAME -o json")
    got = (node.get("metadata") or {}).get("name")
    if got != name:
        fail(f"--node-json {path} holds Node {got!r}, not --node {name!r}")
    return node


def _slices_json(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError) as e:
        fail(f"--slices-json {path}: cannot read it as JSON ({e})",
             hint="save one with kubectl get resourceslices --field-selector spec.nodeName=NODE -o json")
    items = data.get("items") if isinstance(data, dict) and data.get("kind", "").endswith("List") else [data]
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        fail(f"--slices-json {path}: not a ResourceSlice or a List of them")
    bad = [i.get("kind") for i in items if i.get("kind", "ResourceSlice") != "ResourceSlice"]
    if bad:
        fail(f"--slices-json {path}: holds {bad[0]}, not ResourceSlices")
    return items


def verdict_word(status: str, reason: str) -> str:
    """The command's answer in the words every fabricguard JSON output uses under ``verdict``."""
    from fabricguard.agent.condition import Reason

    if status != "True":
        return "failed"
    return "degraded" if reason == Reason.warnings else "pass"


def _print_human(out: dict[str, Any]) -> None:
    """Line 1 the verdict and the condition written; the message's head (it names the failing checks); every
    check, failures first, one block each (fabricguard.probes.report.print_checks)."""
    from fabricguard.probes.report import print_checks

    verdict_line(verdict_word(out["status"], out["reason"]), f"agent node {out['node']} pool {out['pool']}",
                 f"FabricReady={out['status']} ({out['reason']})")
    # The message's details repeat what the check blocks below say; its head names the failing checks.
    paragraph(out["message"].split(" | ")[0], first="  ", indent="  ")
    if out.get("breakerWithheld"):
        paragraph(f"taint withheld: pool {out['pool']}'s breaker is open for {', '.join(out['breakerWithheld'])} "
                  "(`fabricguard breaker status`)", first="  ", indent="    ")
    tb = out.get("taintBudget")
    if tb:  # --manage-taints: the taint slot this run needed (agent/taint_slots.py)
        if tb["withheld"]:
            said = (f"taint withheld: no taint slot of pool {tb['pool']} free ({tb['taken']} of {tb['slots']} held "
                    f"by other nodes; {tb['source']}); the node stays schedulable")
        else:
            said = f"taint slot {tb['held']} held ({tb['slots']} in pool {tb['pool']}: {tb['source']})"
        paragraph(said, first="  ", indent="    ")
    console.print()
    print_checks([("", c["status"], c["name"], c.get("detail") or "") for c in out["checks"]])


def agent_cmd(
    node: str = typer.Option(None, "--node", envvar="NODE_NAME", help="This node's name (the pod's spec.nodeName)."),
    profile: Path = profile_option(required=True, help="Platform profile YAML."),
    pool: str = typer.Option(None, "--pool", help="Pool to check for (default: the pool whose nodeSelector matches)."),
    root: Path = typer.Option(Path("/"), "--root", help="Read /sys, /proc and libraries below this directory."),
    nvml_json: Path = typer.Option(None, "--nvml-json", help="Recorded NVML data instead of live NVML."),
    node_json: Path = typer.Option(None, "--node-json", help="With --dry-run: a saved Node (kubectl get node -o json)."
                                   ),
    slices_json: Path = typer.Option(None, "--slices-json", help="With --dry-run on a DRA pool (or DRA GPUs): saved "
                                     "ResourceSlices (kubectl get resourceslices --field-selector "
                                     "spec.nodeName=NODE -o json)."),
    gpu_ceilings: Path = typer.Option(None, "--gpu-ceilings", help="Run the GPU performance check against these."),
    lnetctl: str = typer.Option("auto", "--lnetctl", help="Command that runs lnetctl for the Lustre client's LNet "
                                "health (auto: lnetctl on PATH; none: do not read LNet health)."),
    once: bool = typer.Option(False, "--once", help="Check once and exit (0 True, 1 True with warnings, 2 False)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the condition instead of writing it."),
    fmt: Format = format_option(),
    as_json: bool = JSON_ALIAS,
    interval: float = typer.Option(60.0, "--interval", min=1.0, help="Seconds between runs."),
    passes: int = typer.Option(3, "--passes", min=1, help="Consecutive passing runs before True."),
    stale_intervals: int = typer.Option(3, "--stale-intervals", min=1, help="Heartbeat age (in intervals) = stale."),
    heartbeat: float = typer.Option(300.0, "--heartbeat", min=1.0, help="Seconds between writes of an unchanged "
                                    "condition; a change is written at once. Stale after this plus "
                                    "--stale-intervals runs."),
    check_timeout: float = typer.Option(30.0, "--check-timeout", min=1.0, help="Deadline of one run's checks."),
    manage_taints: bool = typer.Option(False, "--manage-taints", help="Keep the readiness taints on this Node "
                                       "(where the Node Readiness Controller is not installed)."),
    listen: str = typer.Option("0.0.0.0:9400", "--listen", help="HOST:PORT of /healthz and /metrics."),
    kubeconfig: str = KUBECONFIG_OPT,
    mode: Mode = mode_option(),
    namespace: str = typer.Option("fabricguard-system", "--namespace", envvar="POD_NAMESPACE",
                                  help="The agent's own namespace: with --manage-taints, where its pool's taint "
                                  "slots (Leases) are kept."),
) -> None:
    """Prove this node's fabric for its pool and report it as the Node's FabricReady condition."""
    from fabricguard.agent.kube import KubeError, NodeClient, agent_grants, connect
    from fabricguard.agent.loop import Agent, AgentConfig

    if not node:
        fail("--node is required (or NODE_NAME from the downward API)", hint="pass --node $(hostname)")
    as_json = wants_json(fmt, as_json)
    prof = _load(profile, pool)
    if not root.is_dir():
        fail(f"--root {root} is not a directory")
    from fabricguard.userfiles import SourceError, input_file

    for opt, p in (("--nvml-json", nvml_json), ("--gpu-ceilings", gpu_ceilings)):
        try:
            if p is not None:
                input_file(p)  # names a FIFO, a directory or a device as what it is, never "does not exist"
        except SourceError as exc:
            fail(f"{opt} {exc}")
    if node_json is not None and not dry_run:
        fail("--node-json is only for --dry-run: a real report reads the Node from the cluster")
    if slices_json is not None and not dry_run:
        fail("--slices-json is only for --dry-run: a real report lists the ResourceSlices from the cluster")
    host, _, port_s = listen.rpartition(":")
    if not once and (not host or not port_s.isdigit()):
        fail(f"--listen {listen!r} is not HOST:PORT", hint="e.g. --listen 0.0.0.0:9400")
    if not once and not 1 <= int(port_s) <= 65535:
        fail(f"--listen {listen!r}: port {int(port_s)} is not a TCP port (1-65535)", hint="e.g. --listen 0.0.0.0:9400")
    cfg = AgentConfig(
        node=node, profile=prof, pool=pool, root=root, nvml_json=nvml_json, gpu_ceilings=gpu_ceilings, lnetctl=lnetctl,
        interval=interval, passes=passes, stale_intervals=stale_intervals, manage_taints=manage_taints,
        heartbeat=heartbeat,
        check_timeout=check_timeout, mode=mode.value, namespace=check_namespace("--namespace", namespace),
    )
    saved = _node_json(node_json, node) if node_json is not None else None

    async def once_run() -> dict[str, Any]:
        client, conn_error = None, None
        if saved is None:
            try:
                client = NodeClient(await connect(kubeconfig, table=agent_grants(manage_taints, _dra(prof)),
                                                  namespace=cfg.namespace))
            except KubeError as e:
                if not dry_run:
                    fail(str(e), hint="check `kubectl get node NAME` with that kubeconfig, or add --dry-run")
                conn_error = str(e)
        agent = Agent(cfg, client)
        if slices_json is not None:
            agent.saved_slices = _slices_json(slices_json)
        if saved is not None or client is None:
            res = await agent.report(saved, conn_error, [], time.monotonic(), dry_run=True, damp=False)
        else:
            try:
                res = await agent.run_once(dry_run=dry_run, damp=False, give_up_unreachable=not dry_run)
            except KubeError as e:  # no API server answering: input unusable, one line naming it
                fail(str(e))
        out = res.to_dict(node)
        verdict = "failed" if out["errors"] else verdict_word(out["status"], out["reason"])
        return {"verdict": verdict, **out}

    if once:
        out = asyncio.run(once_run())
        if as_json:
            print_json(out, "AgentReport")
        else:
            _print_human(out)
        for e in out["errors"]:
            err_console.print(f"[bold red]error:[/] {e}", markup=True, highlight=False)
        raise typer.Exit(exit_code(out["verdict"]))

    if dry_run:
        fail("--dry-run needs --once (the loop exists to write the condition)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s", stream=sys.stderr)
    from fabricguard.kubeconfig import kubeconfig_problem

    problem = kubeconfig_problem(kubeconfig)  # a broken file does not heal: exit 3 at once; an outage does
    if problem:
        fail(problem, hint="check `kubectl get node NAME` with that kubeconfig, or run in the cluster")
    try:
        asyncio.run(_serve(cfg, kubeconfig, host, int(port_s)))
    except KubeError as e:
        fail(str(e), hint="check `kubectl get node NAME` with that kubeconfig, or run in the cluster")
    except OSError as e:
        fail(f"cannot serve on {listen}: {e.strerror or e}")


CONNECT_BACKOFF_MAX_S = 60.0


async def connect_retrying(kubeconfig: str | None, stop: asyncio.Event, *, first_delay: float = 1.0,
                           max_delay: float = CONNECT_BACKOFF_MAX_S, table: Any = None,
                           namespace: str = "fabricguard-system") -> Any:
    """The API connection, retried with backoff while it fails: a node that boots before the API server
    answers (or an exec credential plugin that fails once) must not turn into CrashLoopBackOff. None once
    ``stop`` is set."""
    from fabricguard.agent.kube import KubeError, NodeClient, connect

    delay = first_delay
    while not stop.is_set():
        try:
            return NodeClient(await connect(kubeconfig, table=table, namespace=namespace))
        except KubeError as e:
            log.warning("cannot connect to the API server yet (%s); retrying in %.0f s", e, delay)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=delay)
        delay = min(delay * 2, max_delay)
    return None


async def _serve(cfg: Any, kubeconfig: str | None, host: str, port: int) -> None:
    from fabricguard.agent.kube import agent_grants
    from fabricguard.agent.loop import Agent
    from fabricguard.agent.server import make_app, start

    agent = Agent(cfg, None)
    started = time.time()
    app = make_app(agent.metrics, lambda: agent.last_finished, started,
                   cfg.run_max_age.total_seconds() + cfg.check_timeout)
    server = start(app, host, port)  # /healthz answers (503 once stale) while the API is still unreachable
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        agent.client = await connect_retrying(kubeconfig, stop,
                                              table=agent_grants(cfg.manage_taints, _dra(cfg.profile)),
                                              namespace=cfg.namespace)
        if agent.client is not None:
            await agent.run_forever(stop)
    finally:
        server.close()


def _dra(profile: Any) -> bool:
    """Whether the agent may list its node's ResourceSlices: always (a DRA pool's fabric is offered there, and
    GPUs a DRA driver offers are too, whatever the pool's fabric)."""
    del profile
    return True


def sweep_cmd(
    max_age: float = typer.Option(180.0, "--max-age", min=1.0, help="Seconds after which a heartbeat is stale "
                                  "(also how far ahead of this clock a heartbeat may be)."),
    kubeconfig: str = KUBECONFIG_OPT,
    fmt: Format = format_option(),
    as_json: bool = JSON_ALIAS,
) -> None:
    """Turn every FabricReady condition whose heartbeat is older than --max-age into Unknown (once).

    Every node is tried; exit 2 when some stale node could not be patched (each named with why).
    """
    from datetime import UTC, datetime, timedelta

    from fabricguard.agent.kube import SWEEPER_GRANTS, KubeError, NodeClient, SweepResult, connect, sweep_stale
    from fabricguard.kube import unreachable

    async def go() -> SweepResult:
        kube = await connect(kubeconfig, table=SWEEPER_GRANTS, component="staleness sweep")
        try:
            return await sweep_stale(NodeClient(kube), datetime.now(UTC), timedelta(seconds=max_age))
        finally:
            await kube.close()

    try:
        res = asyncio.run(go())
    except KubeError as e:
        fail(str(e), hint=None if unreachable(e) else "check `kubectl get nodes` with that kubeconfig")
    if wants_json(fmt, as_json):
        print_json({"verdict": "failed" if res.failed else "pass", "stale": res.changed,
                    "not_patched": [{"node": n, "error": e} for n, e in res.failed.items()]}, "StaleSweep")
    else:
        verdict_line("failed" if res.failed else "pass", "agent-sweep",
                     f"{len(res.changed)} stale FabricReady condition(s) set to Unknown"
                     + (f", {len(res.failed)} left as they are" if res.failed else ""))
        if res.changed:
            paragraph("set to Unknown: " + ", ".join(res.changed), first="  ", indent="    ")
        for name, why in res.failed.items():
            err_console.print(f"[bold red]error:[/] stale FabricReady on Node {name} left as it is: {why}",
                              markup=True, highlight=False)
    if res.failed:
        raise typer.Exit(EXIT_FAILED)


def register(app: typer.Typer) -> None:
    """Add ``agent`` and ``agent-sweep`` to the root app (``render readiness|agent`` are added by cli.py)."""
    app.command("agent")(agent_cmd)
    app.command("agent-sweep")(sweep_cmd)
