"""``fabricguard render install`` (the whole platform as a kustomize directory) and ``render namespace``."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from fabricguard import dnsnames, yamlout
from fabricguard.console import err_console, fail, say
from fabricguard.options import Mode, check_namespace, check_port, mode_option


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
    webhook_port: int = typer.Option(
        10250, "--webhook-port", help="The webhook's container port; 10250 is reachable from a GKE private "
        "cluster's control plane without a firewall rule (docs/install.md)."),
    runtime_class: str = typer.Option(None, "--runtime-class", help="RuntimeClass of the node agents (the NVIDIA "
                                      "runtime, where it is not the default: NVML needs it)."),
    dry_run_rules: bool = typer.Option(False, "--dry-run-rules", help="Every NodeReadinessRule dryRun, whatever "
                                       "the pools' modes (NRC reports, taints nothing)."),
    image_pull_secret: list[str] = typer.Option([], "--image-pull-secret", help="Secret in the namespace to pull "
                                                "fabricguard's images with (repeatable): every pod and "
                                                "ServiceAccount of ours, the canaries' default one too."),
    node_selector: list[str] = typer.Option([], "--node-selector", help="KEY=VALUE for the controller's, the "
                                            "webhook's and the sweep's pods (repeatable; agents follow pools)."),
    toleration: list[str] = typer.Option([], "--toleration", help="KEY[=VALUE][:EFFECT] those pods tolerate "
                                         "(repeatable)."),
    resources: list[str] = typer.Option([], "--resources", help="COMPONENT:requests|limits.RESOURCE=QUANTITY for "
                                        "controller, webhook, agent or sweep (repeatable), e.g. "
                                        "controller:limits.memory=4Gi."),
    cluster_size: str = typer.Option(None, "--cluster-size", help="NODES:PODS:JOBS the controller's memory request "
                                     "and limit are sized for (docs/install.md, Memory), e.g. 20000:200000:50000; "
                                     "--resources controller:... wins over it."),
) -> None:
    """Write the whole platform as a kustomize directory, one removable component per subdirectory, in apply order."""
    from fabricguard.admission.commands import _cidrs
    from fabricguard.agent.render_commands import image_problem as agent_image_problem
    from fabricguard.controller.commands import images_or_exit
    from fabricguard.placement.install import (
        OPTIONAL_PREFLIGHT,
        InstallError,
        Options,
        components,
        parse_cluster_size,
        parse_node_selector,
        parse_resources,
        parse_toleration,
        write,
    )
    from fabricguard.placement.preflight import preflight_role
    from fabricguard.profile.commands import profile_or_exit

    check_namespace("--namespace", namespace)
    prof = profile_or_exit(profile)
    images_or_exit(profile, prof, image=image, canary_image=canary_image)
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
    for opt, value in (("--runtime-class", runtime_class), *(("--image-pull-secret", s) for s in image_pull_secret)):
        if value is not None and not dnsnames.is_subdomain(value):
            fail(f"{opt} {value!r}: not a Kubernetes object name (lowercase DNS subdomain)",
                 hint=f"e.g. {opt} nvidia" if opt == "--runtime-class" else f"e.g. {opt} registry-credentials")
    try:
        selector = tuple(parse_node_selector(x) for x in node_selector)
        tolerations = tuple(parse_toleration(x) for x in toleration)
        own_resources = tuple(parse_resources(x) for x in resources)
        size = parse_cluster_size(cluster_size) if cluster_size is not None else None
    except InstallError as exc:
        fail(str(exc))
    opts = Options(image=image, agent_image=agent_image, canary_image=canary_image, namespace=namespace,
                   monitoring=monitoring, release=release, apiserver_cidrs=tuple(_cidrs(apiserver_cidr, any_source)),
                   manage_taints=manage_taints, nvml_access=nvml_access, dcgm_platform=dcgm_platform,
                   mode=mode.value, webhook_port=check_port("--webhook-port", webhook_port),
                   runtime_class=runtime_class, dry_run_rules=dry_run_rules,
                   image_pull_secrets=tuple(image_pull_secret), node_selector=selector, tolerations=tolerations,
                   resources=own_resources, cluster_size=size)
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

    from fabricguard.placement.install import namespace_objects

    sys.stdout.write(yamlout.dump_all(namespace_objects(namespace), sort_keys=False, width=120))


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

    from fabricguard.console import console, print_json
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
        print_json({"verdict": {0: "pass", 1: "degraded", 2: "failed"}[code], "checks": [r.to_dict() for r in rows]},
                   "PreflightReport")
    else:
        from fabricguard.console import Block, Column, Part, table_or_blocks, verdict_line

        style = {"pass": "green", "warn": "yellow", "fail": "bold red"}
        word = {"pass": "pass", "warn": "warning", "fail": "failed"}
        fails, warns = sum(r.status == "fail" for r in rows), sum(r.status == "warn" for r in rows)
        verdict_line({0: "pass", 1: "degraded", 2: "failed"}[code], f"preflight: profile {prof.metadata.name}",
                     f"{len(rows)} checks: {fails} failed, {warns} warnings")
        console.print()
        order = {"fail": 0, "warn": 1, "pass": 2}
        ranked = sorted(rows, key=lambda r: order.get(r.status, 3))  # failures first, passes last
        cols = [Column("check", no_wrap=True), Column("target"), Column("result", no_wrap=True), Column("detail"),
                Column("fix")]
        cells: list[list[Part]] = [[r.area, r.target, (word[r.status], style[r.status]), r.detail, r.fix or ""]
                                   for r in ranked]
        items = [Block(head=[(word[r.status].upper(), style[r.status]), "  ", r.area, " · ", r.target],
                       fields=[("detail", r.detail), ("fix", r.fix or "")]) for r in ranked]
        table_or_blocks(cols, cells, items)
    raise typer.Exit(code)


def render_storage_cmd(
    profile: Path = typer.Option(..., "--profile", "-p", help="Platform profile YAML (its storage.lustre and pools)."),
    provider: str = typer.Option(..., "--provider", help="gke-managed-lustre, fsx or static."),
    output: Path = typer.Option(..., "--output", "-o", help="Directory to write (created; must be empty)."),
    instance: str = typer.Option(None, "--instance", help="The file system's name (GKE instance id; FSx: the ACK "
                                 "objects' name)."),
    project: str = typer.Option(None, "--project", help="GKE: the Google Cloud project."),
    location: str = typer.Option(None, "--location", help="GKE: the zone of the GPU nodes, e.g. us-central1-a."),
    network: str = typer.Option(None, "--network", help="GKE: the cluster's VPC network name."),
    filesystem: str = typer.Option("lfs", "--filesystem", help="GKE: file system name (at most 8 letters/digits)."),
    capacity_gib: int = typer.Option(None, "--capacity-gib", help="Capacity in GiB."),
    throughput: int = typer.Option(1000, "--throughput", help="MB/s per TiB (125, 250, 500 or 1000)."),
    ip_range_prefix: int = typer.Option(20, "--ip-range-prefix", help="GKE: private services range prefix length."),
    mount_point: str = typer.Option(None, "--mount-point", help="GKE: the created instance's mount_point "
                                    "(<ip>@tcp:/<fs>): also render the PV/PVC per namespace."),
    namespace: str = typer.Option("fabricguard-system", "--namespace", "-n", help="FSx: the ACK objects' namespace."),
    vpc_id: str = typer.Option(None, "--vpc-id", help="FSx: the cluster's VPC (vpc-...)."),
    subnet_id: str = typer.Option(None, "--subnet-id", help="FSx: one subnet in the GPU nodes' zone."),
    client_cidr: list[str] = typer.Option([], "--client-cidr", help="FSx: CIDR of the nodes and of the file "
                                          "system's subnet (repeatable)."),
    file_system_id: str = typer.Option(None, "--file-system-id", help="FSx: the created file system's id."),
    dns_name: str = typer.Option(None, "--dns-name", help="FSx: its DNSName."),
    mount_name: str = typer.Option(None, "--mount-name", help="FSx: its LustreConfiguration.MountName."),
) -> None:
    """Render a new cluster's Lustre file system (instance, network access, PV/PVC per namespace) as the
    provider's own tools declare it. Exit 0 written, 3 an option or profile field that cannot make it."""
    from fabricguard.placement.storage import (
        PROVIDERS,
        FsxOptions,
        GkeOptions,
        StorageRenderError,
        render_fsx,
        render_gke,
        render_static,
        write,
    )
    from fabricguard.profile.commands import profile_or_exit

    prof = profile_or_exit(profile)
    if provider not in PROVIDERS:
        fail(f"--provider {provider!r}: use one of {', '.join(PROVIDERS)}")
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        fail(f"--output {output}: exists and is not an empty directory; choose a new one")

    def need(**opts: object) -> None:
        missing = [k for k, v in opts.items() if v in (None, "")]
        if missing:
            fail(f"--provider {provider} needs " + ", ".join("--" + m.replace("_", "-") for m in missing))

    try:
        if provider == "gke-managed-lustre":
            need(instance=instance, project=project, location=location, network=network, capacity_gib=capacity_gib)
            rendered = render_gke(prof, GkeOptions(project, location, instance, network, capacity_gib, throughput,
                                                   filesystem, mount_point, ip_range_prefix))
        elif provider == "fsx":
            need(instance=instance, vpc_id=vpc_id, subnet_id=subnet_id, capacity_gib=capacity_gib)
            rendered = render_fsx(prof, FsxOptions(instance, namespace, vpc_id, subnet_id, tuple(client_cidr),
                                                   capacity_gib, throughput, file_system_id, dns_name, mount_name))
        else:
            rendered = render_static(prof)
    except StorageRenderError as exc:
        fail(f"{profile}: {exc}" if str(exc).startswith("spec.") else str(exc))
    write(rendered, output)
    for rel in sorted(rendered.files):
        say((f"{rel:<32}", "bold"), " written")
    say(f"wrote {output}; next, in order:")
    from fabricguard.console import console

    for i, step in enumerate(rendered.steps, 1):
        # soft_wrap: a command is never broken across lines, whatever the width (piped, CI logs).
        console.print(f"{i}. {step}", soft_wrap=True, markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``preflight`` to the root app (``render install`` and ``render namespace`` are added by cli.py)."""
    app.command("preflight")(preflight_cmd)
