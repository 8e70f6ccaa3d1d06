"""CLI commands of `fabricguard.placement`.

``fabricguard render kueue`` prints Kueue's side of the profile; ``fabricguard placement simulate`` shows where
gangs land on a pool spread across blocks and what that costs in bus bandwidth.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from fabricguard import yamlout
from fabricguard.console import (
    Block,
    Column,
    Part,
    console,
    err_console,
    fail,
    print_json,
    say,
    table_or_blocks,
    verdict_line,
)
from fabricguard.exitcodes import EXIT_FAILED, exit_code
from fabricguard.options import Format, format_option, now_value
from fabricguard.profile.commands import profile_or_exit

if TYPE_CHECKING:
    from fabricguard.placement.transition import TransitionSpec, TransitionState
    from fabricguard.placement.workflow import Workflow

T = TypeVar("T")

placement_app = typer.Typer(help="Placement: Kueue topology what-ifs for the profile's pools.", no_args_is_help=True)
pool_app = typer.Typer(help="Node pools: move a queue from one pool to another safely.", no_args_is_help=True)
transition_app = typer.Typer(
    help="Move a queue's admissions from an old pool to a new one (reservation moved): plan, apply, status, abort.",
    no_args_is_help=True,
)
pool_app.add_typer(transition_app, name="transition")

FROM_OPT = typer.Option(..., "--from", help="Profile in force now (with the old pool).")
TO_OPT = typer.Option(..., "--to", help="Profile to move to (with the new pool).")
OLD_OPT = typer.Option(None, "--old-pool", help="Old pool, when more than one pool leaves.")
NEW_OPT = typer.Option(None, "--new-pool", help="New pool, when more than one pool arrives.")
NS_OPT = typer.Option("fabricguard-system", "--namespace", "-n", help="Where the transition's state is kept.")
KUBECONFIG_OPT = typer.Option(None, "--kubeconfig", help="kubeconfig file (default: the usual lookup).")
CONTEXT_OPT = typer.Option(None, "--context", help="kubeconfig context.")
NOW_OPT = typer.Option(None, "--now", help="Fix the clock (RFC 3339), for replays and tests.")
FORMAT_OPT = format_option()


def render_transition_rbac_cmd(namespace: str = NS_OPT) -> None:
    """Print the ClusterRole and Role that ``pool transition`` needs (bind them to whoever runs it)."""

    from fabricguard.placement.workflow import transition_roles

    sys.stdout.write(yamlout.dump_all(transition_roles(namespace), sort_keys=False))


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
    from fabricguard.placement.kueue import warnings as kueue_warnings

    prof = profile_or_exit(profile)
    try:
        for w in kueue_warnings(prof):
            err_console.print(f"[bold yellow]warning:[/] {w}", markup=True, highlight=False)
        if configuration:
            head = ("# Merge into Kueue's Configuration (the kueue-manager-config ConfigMap), then restart Kueue.\n"
                    "# CLUSTER-WIDE: waitForPodsReady (blockAdmission: true) changes admission for EVERY ClusterQueue\n"
                    "# in the cluster, not only fabricguard's: while one gang starts, no other workload is admitted.\n")
            say(("warning:", "yellow"), " --configuration changes Kueue's admission for the whole cluster "
                "(waitForPodsReady.blockAdmission: true holds every queue while a gang starts); merge it only if "
                "all teams want all-or-nothing admission", err=True)
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
    sys.stdout.write(head + yamlout.dump_all(docs, sort_keys=False, default_flow_style=False, width=120))


MAX_BLOCK_NODES = 100_000  # a topology block is a few thousand nodes at most; more is a typo


def _blocks(option: str, text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, count = part.partition("=")
        if not sep or not name or not count.isdigit():
            fail(f"{option} {text!r}: {part!r} is not BLOCK=NODES", hint=f"e.g. {option} block-a=12,block-b=4")
        if name in out:
            fail(f"{option} {text!r}: block {name!r} is given twice", hint="name each block once")
        if len(count) > 7 or int(count) > MAX_BLOCK_NODES:
            fail(f"{option} {text!r}: {count} nodes in block {name!r} is more than any block holds "
                 f"(at most {MAX_BLOCK_NODES})", hint=f"e.g. {option} block-a=12,block-b=4")
        out[name] = int(count)
    if not out:
        fail(f"{option} is empty", hint=f"e.g. {option} block-a=12,block-b=4")
    return out


@placement_app.command("simulate")
def simulate_cmd(
    profile: Path = typer.Option(..., "--profile", "-p", help="Platform profile YAML."),
    pool: str | None = typer.Option(None, "--pool", help="Pool to simulate (default: the profile's default pool)."),
    free: str = typer.Option(..., "--free", help="Free nodes per block, e.g. block-a=12,block-b=4."),
    size: str | None = typer.Option(None, "--size", help="Nodes per block when not all are free (default: --free)."),
    gangs: str = typer.Option("2,4,16", "--gangs", help="Gang sizes in nodes (one pod per node)."),
    output_format: Format = FORMAT_OPT,
) -> None:
    """Where 2-, 4- and 16-node gangs land with required vs preferred topology, when they wait, their busbw.

    Verdict: failed when a gang can never run, degraded when one spans blocks (the busbw penalty), else pass.
    """
    from fabricguard.placement.simulate import table, verdict

    prof = profile_or_exit(profile)
    try:
        p = prof.pool(pool)
    except (KeyError, ValueError) as exc:
        fail(f"--pool: {exc}")
    try:
        sizes = [int(g) for g in gangs.split(",") if g.strip()]
    except ValueError:
        fail(f"--gangs {gangs!r} is not a list of node counts", hint="e.g. --gangs 2,4,16")
    if not sizes or min(sizes) < 1:
        fail(f"--gangs {gangs!r} needs node counts of at least 1", hint="e.g. --gangs 2,4,16")
    free_blocks = _blocks("--free", free)
    size_blocks = _blocks("--size", size) if size else None
    if size_blocks is not None and any(free_blocks.get(b, 0) > size_blocks.get(b, 0) for b in free_blocks):
        fail("--free has more nodes in a block than --size", hint="--size is the block's total, --free what is idle")
    base = p.baseline.allReduceBusBwGBps
    factor = p.baseline.crossBlockFactor
    outcomes = table(sizes, ["required", "preferred"], free_blocks, size=size_blocks, baseline_gbps=base,
                     cross_block_factor=factor)
    answer = verdict(outcomes)
    if output_format == "json":
        print_json({"verdict": answer, "pool": p.name, "free": free_blocks, "size": size_blocks or free_blocks,
                    "baselineGBps": base, "crossBlockFactor": factor,
                    "outcomes": [{"gang": o.gang, "mode": o.mode, "placed": o.placed, "waits": o.waits,
                                  "busbwGBps": o.busbw_gbps} for o in outcomes]}, "PlacementSimulation")
        raise typer.Exit(exit_code(answer))
    # What the busbw figure needs: the pool's all-reduce baseline first, then the cross-block factor.
    missing = "allReduceBusBwGBps" if base is None else "crossBlockFactor"
    verdict_line(answer, f"placement simulate pool {p.name}",
                 f"free {free_blocks}" + (f" of {size_blocks}" if size_blocks else ""))
    cols = [Column("gang (nodes)", justify="right", no_wrap=True), Column("topology", no_wrap=True),
            Column("lands on"), Column("busbw GB/s")]
    rows: list[list[Part]] = []
    items: list[Block] = []
    for o in outcomes:
        bw = "-" if o.busbw_gbps is None and o.waits != "no" else (
            f"{o.busbw_gbps:g}" if o.busbw_gbps is not None else f"unknown (set baseline.{missing})")
        rows.append([str(o.gang), o.mode, o.describe(), bw])
        items.append(Block(head=[(f"{o.gang} nodes", "bold"), f", {o.mode} topology"],
                           fields=[("lands on", o.describe()), ("busbw GB/s", bw)]))
    table_or_blocks(cols, rows, items)
    raise typer.Exit(exit_code(answer))


def _spec(source: Path, target: Path, old_pool: str | None, new_pool: str | None) -> TransitionSpec:
    from fabricguard.placement.kueue import KueueRenderError
    from fabricguard.placement.transition import TransitionError, spec_from

    a, b = profile_or_exit(source), profile_or_exit(target)
    try:
        return spec_from(a, b, source.read_text(encoding="utf-8"), target.read_text(encoding="utf-8"),
                         old_pool=old_pool, new_pool=new_pool)
    except (TransitionError, KueueRenderError) as exc:
        fail(str(exc))


def _run(spec: TransitionSpec, namespace: str, kubeconfig: str | None, context: str | None,
         action: Callable[[Workflow], Awaitable[T]]) -> T:
    from fabricguard.kube import Kube, KubeError, TimedOut, Unreachable
    from fabricguard.kubeconfig import kubeconfig_problem
    from fabricguard.placement.workflow import TransitionConflict, Workflow, transition_permissions

    problem = kubeconfig_problem(kubeconfig, context)
    if problem:
        fail(problem, hint="pass a kubeconfig with the cluster's context")

    async def go() -> T:
        kube = await Kube.connect(kubeconfig, context, permissions=transition_permissions(namespace))
        try:
            return await action(Workflow(kube, spec, namespace))
        finally:
            await kube.close()

    try:
        return asyncio.run(go())
    except TransitionConflict as exc:
        fail(str(exc), code=EXIT_FAILED)
    except (Unreachable, TimedOut) as exc:
        fail(f"cannot reach the cluster: {exc}")
    except KubeError as exc:
        if exc.status is None:  # the kubeconfig's credentials could not be loaded
            fail(str(exc), hint="check --kubeconfig/--context")
        fail(f"the API server refused: {exc}", hint="check the kubeconfig's permissions (render transition-rbac) "
                                                    "and that Kueue v0.19+ is installed", code=EXIT_FAILED)


def _show(state: TransitionState, output_format: Format) -> None:
    from fabricguard.placement.workflow import phase_verdict, state_json

    if output_format == "json":
        print_json(state_json(state), "PoolTransition")
        return
    verdict_line(phase_verdict(state.phase), f"transition {state.oldPool} -> {state.newPool} (queue {state.queue})",
                 state.phase)
    current = state.next_step()
    cells: list[list[Part]] = []
    items: list[Block] = []
    for s in state.steps:  # in the order they run
        detail = s.detail if s.done else (state.message.split(": ", 1)[-1] if s.name == current else "")
        done = s.done or ("(current)" if s.name == current else "")
        cells.append([s.name, done, detail])
        items.append(Block(head=[(s.name, "bold")], fields=[("done", done), ("detail", detail)]))
    table_or_blocks([Column("step", no_wrap=True), Column("done", no_wrap=True), Column("detail")], cells, items)


@transition_app.command("plan")
def transition_plan_cmd(source: Path = FROM_OPT, target: Path = TO_OPT, old_pool: str | None = OLD_OPT,
                        new_pool: str | None = NEW_OPT, namespace: str = NS_OPT,
                        kubeconfig: str | None = KUBECONFIG_OPT, context: str | None = CONTEXT_OPT) -> None:
    """Print every change the transition would make, as diffs of the objects; writes nothing."""
    spec = _spec(source, target, old_pool, new_pool)
    lines = _run(spec, namespace, kubeconfig, context, lambda w: w.plan())
    sys.stdout.write("\n".join(lines) + "\n")


@transition_app.command("apply")
def transition_apply_cmd(
    source: Path = FROM_OPT, target: Path = TO_OPT, old_pool: str | None = OLD_OPT, new_pool: str | None = NEW_OPT,
    namespace: str = NS_OPT, kubeconfig: str | None = KUBECONFIG_OPT, context: str | None = CONTEXT_OPT,
    now: str | None = NOW_OPT, output_format: Format = FORMAT_OPT,
    drain_deadline: str = typer.Option("24h", "--drain-deadline",
                                       help="How long the old pool's running work may take (from the drain's start)."),
    accept_unverified: str = typer.Option("", "--accept-unverified",
                                          help="Gates to pass without evidence: agent, canary (comma-separated)."),
    one_step: bool = typer.Option(False, "--step", help="Perform at most one step, then stop."),
) -> None:
    """Perform the next steps until one must wait (exit 1), is blocked (exit 2), or all are done (exit 0)."""
    from fabricguard.placement.transition import GATES
    from fabricguard.times import DurationError, parse_duration

    fmt = output_format
    spec = _spec(source, target, old_pool, new_pool)
    accept = tuple(g.strip() for g in accept_unverified.split(",") if g.strip())
    unknown = [g for g in accept if g not in GATES]
    if unknown:
        fail(f"--accept-unverified: {unknown} are not gates; the gates are {', '.join(GATES)}")
    t = now_value(now)
    try:
        deadline = t + parse_duration(drain_deadline)
    except DurationError as exc:
        fail(f"--drain-deadline: {exc}")
    out = _run(spec, namespace, kubeconfig, context,
               lambda w: w.apply(t, deadline=deadline, accept=accept, one_step=one_step))
    _show(out.state, fmt)
    raise typer.Exit(out.exit_code)


@transition_app.command("status")
def transition_status_cmd(source: Path = FROM_OPT, target: Path = TO_OPT, old_pool: str | None = OLD_OPT,
                          new_pool: str | None = NEW_OPT, namespace: str = NS_OPT,
                          kubeconfig: str | None = KUBECONFIG_OPT, context: str | None = CONTEXT_OPT,
                          output_format: Format = FORMAT_OPT) -> None:
    """Where the transition stands: 0 completed, 1 in progress or waiting, 2 blocked or aborted, 3 none started."""
    from fabricguard.placement.workflow import TransitionRun

    fmt = output_format
    spec = _spec(source, target, old_pool, new_pool)
    state = _run(spec, namespace, kubeconfig, context, lambda w: w.load())
    if state is None:
        fail(f"no transition {spec.name} in namespace {namespace}", hint="start one with: fabricguard pool "
                                                                          "transition apply --from ... --to ...")
    _show(state, fmt)
    raise typer.Exit(TransitionRun(state).exit_code)


@transition_app.command("abort")
def transition_abort_cmd(source: Path = FROM_OPT, target: Path = TO_OPT, old_pool: str | None = OLD_OPT,
                         new_pool: str | None = NEW_OPT, namespace: str = NS_OPT,
                         kubeconfig: str | None = KUBECONFIG_OPT, context: str | None = CONTEXT_OPT,
                         now: str | None = NOW_OPT, output_format: Format = FORMAT_OPT) -> None:
    """Roll back what is safe: the ClusterQueue as it was, the nodes this transition cordoned uncordoned.

    Exit 2 once aborted, as ``status`` of an aborted transition: the transition did not happen (verdict failed).
    """
    fmt = output_format
    spec = _spec(source, target, old_pool, new_pool)
    t = now_value(now)
    out, _ = _run(spec, namespace, kubeconfig, context, lambda w: w.abort(t))
    _show(out.state, fmt)
    raise typer.Exit(out.exit_code)


@pool_app.command("coverage")
def coverage_cmd(
    profile: Path = typer.Option(..., "--profile", "-p", help="Platform profile YAML."),
    pool: str | None = typer.Option(None, "--pool", help="Pool (default: the profile's default pool)."),
    kubeconfig: str | None = KUBECONFIG_OPT,
    context: str | None = CONTEXT_OPT,
    reset_breaker: bool = typer.Option(False, "--reset-breaker", help="Close the pool's quarantine breaker (a "
                                       "person's decision: failures before now are not counted again)."),
    now: str | None = NOW_OPT,
    output_format: Format = FORMAT_OPT,
) -> None:
    """Each node of a pool with a proof goal: last proven, by which pair, at what busbw, and its state."""
    from fabricguard import names
    from fabricguard.controller.coverage import coverage, coverage_permissions, reset_patch
    from fabricguard.kube import Kube, KubeError, NotFound, TimedOut, Unreachable
    from fabricguard.kubeconfig import kubeconfig_problem
    from fabricguard.profile.model import UnknownPoolError

    prof = profile_or_exit(profile)
    try:
        p = prof.pool(pool)
    except UnknownPoolError as exc:
        fail(f"--pool: {exc}", hint="name one of the profile's pools")
    if p.proof is None:
        fail(f"{profile}: pool {p.name} has no proof block", hint="add proof: {every: 24h} to the pool")
    t = now_value(now)
    problem = kubeconfig_problem(kubeconfig, context)
    if problem:
        fail(problem, hint="pass a kubeconfig with the cluster's context")

    async def go() -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        kube = await Kube.connect(kubeconfig, context, permissions=coverage_permissions(reset_breaker))
        try:
            try:
                fv: dict[str, Any] | None = await kube.get(names.FV_API, names.FV_PLURAL, p.name)
            except NotFound:
                fv = None
            sel = ",".join(f"{k}={v}" for k, v in sorted(p.nodeSelector.items()))
            nodes = await kube.list("v1", "nodes", label_selector=sel)
            if reset_breaker and fv is not None:
                fv = await kube.patch(names.FV_API, names.FV_PLURAL, p.name, reset_patch(fv, t),
                                      subresource="status", patch_type="merge",
                                      field_manager=names.CONTROLLER_FIELD_MANAGER)
            return fv, nodes
        finally:
            await kube.close()

    try:
        fv, nodes = asyncio.run(go())
    except (Unreachable, TimedOut) as exc:
        fail(f"cannot reach the cluster: {exc}")
    except KubeError as exc:
        if exc.status is None:
            fail(str(exc), hint="check --kubeconfig/--context")
        fail(f"the API server refused: {exc}", hint="the caller needs get on fabricvalidations and list on nodes "
             "(and patch on fabricvalidations/status with --reset-breaker)", code=EXIT_FAILED)
    if reset_breaker and fv is None:
        fail(f"pool {p.name} has no FabricValidation, so no breaker to reset", code=EXIT_FAILED)
    cov = coverage(p, fv, nodes, t)
    if output_format is Format.json:
        print_json(cov.to_dict(), "PoolCoverage")
        raise typer.Exit(cov.exit_code)
    colour = {"pass": "green", "degraded": "yellow", "failed": "red"}[cov.verdict]
    say((cov.verdict.upper(), f"bold {colour}"), " ", cov.summary)
    if reset_breaker:
        say(("breaker reset:", "bold"), f" pool {p.name}'s quarantine breaker is closed; failures before "
            f"{t.isoformat()} are not counted again")
    _coverage_rows(cov.rows)
    raise typer.Exit(cov.exit_code)


def _coverage_rows(rows: list[dict[str, Any]]) -> None:
    """One row per node, the nodes that need a person first (suspect, convicted, quarantined, timed out): a table
    where it fits, else one block per node (a pipe, 80 columns), never a node name cut."""
    from fabricguard.controller.coverage import NEEDS_ATTENTION

    notes = any(r["note"] for r in rows)
    cols = [Column("node", no_wrap=True), Column("state", no_wrap=True), Column("proven", no_wrap=True),
            Column("busbw GB/s", justify="right", no_wrap=True), Column("partner", no_wrap=True),
            Column("link", no_wrap=True), *((Column("note"),) if notes else ())]
    cells: list[list[Part]] = []
    items: list[Block] = []
    for r in sorted(rows, key=lambda r: r["state"] not in NEEDS_ATTENTION):  # stable: by node within each
        bw = f"{r['busbwGBps']:.1f}" if r["busbwGBps"] is not None else "-"
        cells.append([r["node"], r["state"], r["age"], bw, r["partner"] or "-", r["link"] or "-",
                      *((r["note"] or "",) if notes else ())])
        items.append(Block(head=[(r["node"], "bold"), "  ", r["state"]],
                           fields=[("proven", r["age"]), ("busbw GB/s", bw), ("partner", r["partner"] or ""),
                                   ("link", r["link"] or ""), ("note", r["note"] or "")]))
    console.print()
    table_or_blocks(cols, cells, items)


def register(app: typer.Typer) -> None:
    """Add ``placement`` and ``pool``; ``render kueue`` attaches to the shared ``render`` group on import."""
    app.add_typer(placement_app, name="placement")
    app.add_typer(pool_app, name="pool")
