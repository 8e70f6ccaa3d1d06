"""``fabricguard render install`` (the whole platform as a kustomize directory) and ``render namespace``."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from fabricguard.console import err_console, fail, say
from fabricguard.options import Mode, check_namespace, mode_option


def render_install_cmd(
    profile: Path = typer.Option(..., "--profile", "-p", help="Platform profile YAML."),
    image: str = typer.Option(..., "--image", help="fabricguard image (webhook, controller): repo:tag@sha256:<index>."),
    agent_image: str = typer.Option(..., "--agent-image", help="Node agent image: repo:tag@sha256:<index digest>."),
    canary_image: str = typer.Option(..., "--canary-image", help="Canary image (the probe extra: torch, NCCL)."),
    output: Path = typer.Option(..., "--output", "-o", help="Directory to write (created; must be empty)."),
    namespace: str = typer.Option("fabricguard-system", "--namespace", "-n"),
    monitoring: str = typer.Option("prometheus-operator", "--monitoring",
                                   help="prometheus-operator, gmp (GKE Managed Prometheus) or none."),
    release: str = typer.Option(None, "--release", help="kube-prometheus-stack's release label for the monitors."),
    apiserver_cidr: list[str] = typer.Option([], "--apiserver-cidr", help="Where the API server calls the webhook "
                                             "from (repeatable; docs/admission.md). Required unless --any-source."),
    any_source: bool = typer.Option(False, "--any-source", help="No --apiserver-cidr: the webhook's NetworkPolicy "
                                    "then admits its port from every source."),
    manage_taints: bool = typer.Option(False, "--manage-taints", help="No Node Readiness Controller: the agent "
                                       "keeps the taints itself."),
    nvml_access: str = typer.Option("auto", "--nvml-access", help="auto, runtime or privileged (render agent)."),
    dcgm_platform: str = typer.Option("gpu-operator", "--dcgm-platform",
                                      help="Where DCGM exporter runs: gpu-operator, dcgm-exporter (its chart), or "
                                           "gke (managed DCGM, not scraped here)."),
    mode: Mode = mode_option("observe"),
) -> None:
    """Write the whole platform as a kustomize directory, one removable component per subdirectory, in apply order."""
    from fabricguard.admission.commands import _cidrs
    from fabricguard.agent.render_commands import image_problem as agent_image_problem
    from fabricguard.controller.manifests import image_problem, profile_image_problems
    from fabricguard.placement.install import OPTIONAL_PREFLIGHT, InstallError, Options, components, write
    from fabricguard.placement.preflight import preflight_role
    from fabricguard.profile.commands import profile_or_exit

    check_namespace("--namespace", namespace)
    prof = profile_or_exit(profile)
    for opt, ref in (("--image", image), ("--canary-image", canary_image)):
        problem = image_problem(ref)
        if problem:
            fail(f"{opt}: {problem}", hint=f"e.g. {opt} registry.example.com/fabricguard:0.1.0@sha256:<index digest>")
    for bad in profile_image_problems(prof):
        fail(f"{profile}: {bad}")
    problem = agent_image_problem(agent_image)
    if problem:
        fail(problem.replace("--image", "--agent-image", 1),
             hint="e.g. --agent-image registry.example.com/fabricguard-agent:0.1.0@sha256:<index digest>")
    if agent_image == image:
        err_console.print("[yellow]warning:[/] --agent-image is the same as --image: the node agent is built from "
                          "Dockerfile.agent (NVML, no server parts); pass that image unless you built one for both")
    if nvml_access not in ("auto", "runtime", "privileged"):
        fail(f"--nvml-access {nvml_access!r}: use auto, runtime or privileged")
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        fail(f"--output {output}: exists and is not an empty directory; choose a new one so no stale component "
             "survives from an earlier render")
    opts = Options(image=image, agent_image=agent_image, canary_image=canary_image, namespace=namespace,
                   monitoring=monitoring, release=release, apiserver_cidrs=tuple(_cidrs(apiserver_cidr, any_source)),
                   manage_taints=manage_taints, nvml_access=nvml_access, dcgm_platform=dcgm_platform,
                   mode=mode.value)
    try:
        comps = components(prof, profile.read_text(), opts)
    except InstallError as exc:
        fail(f"{profile}: {exc}" if str(exc).startswith("spec.") else str(exc))
    write(prof, comps, output, {OPTIONAL_PREFLIGHT: [preflight_role()]})
    for c in comps:
        say((f"{c.name:<24}", "bold"), f" {len(c.objects):>3} objects  {c.title}")
    say((f"{OPTIONAL_PREFLIGHT:<24}", "bold"), "   1 objects  optional: ClusterRole fabricguard-preflight "
        "(what preflight reads; bind it to who runs it)")
    enforced = [p.name for p in prof.spec.pools if prof.mode_of(p, mode.value) == "enforce"]
    if enforced:
        say(f"mode: enforce on pool(s) {', '.join(enforced)}; observe on the rest")
    else:
        say("mode: observe on every pool: nothing is denied, held or tainted; each gate reports what enforce would "
            "do. Move a pool to enforce with its profile field mode: enforce (docs/install.md#observe-then-enforce)")
    say(f"wrote {output}; build it with: kubectl kustomize {output}; apply in order: {output}/README.md")


def render_namespace_cmd(namespace: str = typer.Option("fabricguard-system", "--namespace", "-n")) -> None:
    """Print fabricguard's Namespace (Pod Security labels) and GKE's critical-pod ResourceQuota."""
    import yaml

    from fabricguard.placement.install import namespace_objects

    sys.stdout.write(yaml.safe_dump_all(namespace_objects(namespace), sort_keys=False, width=120))


def preflight_cmd(
    profile: Path = typer.Option(..., "--profile", "-p", help="Platform profile YAML."),
    kubeconfig: str = typer.Option(None, "--kubeconfig", help="kubeconfig file (default: the usual lookup)."),
    context: str = typer.Option(None, "--context", help="kubeconfig context."),
    namespace: str = typer.Option("fabricguard-system", "--namespace", "-n"),
    output_format: str = typer.Option("table", "--format", help="Output format: table or json."),
    timeout: float = typer.Option(120.0, "--timeout", min=1.0, help="Seconds for all the checks together."),
) -> None:
    """Check a live cluster before (and after) installing: APIs, versions, fabric DaemonSets, Lustre claims,
    LocalQueues, Pod Security, GKE's critical-pod quota. Exit 0 pass, 1 warnings, 2 failures, 3 unusable input."""
    import asyncio

    from rich.table import Table

    from fabricguard.console import console, print_json, row
    from fabricguard.kube import KubeError, unreachable
    from fabricguard.placement.preflight import Row, exit_code, run
    from fabricguard.profile.commands import profile_or_exit

    if output_format not in ("table", "json"):
        fail(f"--format {output_format!r}: use table or json")
    prof = profile_or_exit(profile)

    async def bounded() -> list[Row]:
        async with asyncio.timeout(timeout):
            return await run(prof, kubeconfig, context, namespace)

    try:
        rows = asyncio.run(bounded())
    except KubeError as exc:
        fail(f"cannot reach the cluster: {exc}" if unreachable(exc) else f"cannot read the cluster: {exc}",
             hint="check --kubeconfig/--context and that the API server answers")
    except TimeoutError:
        fail(f"the API server did not answer all checks within --timeout {timeout:g} s; nothing was judged",
             hint="check that it answers (kubectl get --raw /version), or raise --timeout")
    code = exit_code(rows)
    if output_format == "json":
        print_json({"verdict": {0: "pass", 1: "degraded", 2: "failed"}[code], "checks": [r.to_dict() for r in rows]})
    else:
        style = {"pass": "green", "warn": "yellow", "fail": "bold red"}
        table = Table(title=f"preflight: profile {prof.metadata.name}", show_lines=False)
        for col in ("check", "target", "result", "detail", "fix"):
            table.add_column(col, overflow="fold")
        for r in rows:
            row(table, r.area, r.target, (r.status, style[r.status]), r.detail, r.fix or None)
        console.print(table)
        fails, warns = sum(r.status == "fail" for r in rows), sum(r.status == "warn" for r in rows)
        say(f"{len(rows)} checks: {fails} failed, {warns} warnings")
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add ``preflight`` to the root app (``render install`` and ``render namespace`` are added by cli.py)."""
    app.command("preflight")(preflight_cmd)
