"""``fabricguard render readiness`` and ``fabricguard render agent`` (registered under ``render``)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from fabricguard.console import fail
from fabricguard.options import check_monitoring, monitoring_option


def render_readiness_cmd(
    profile: Path = typer.Option(..., "--profile", "-p", help="Platform profile YAML."),
    dry_run: bool = typer.Option(False, "--dry-run-rules", help="Render the rules with spec.dryRun: true."),
) -> None:
    """Print two NodeReadinessRules per pool: bootstrap (fabric-unverified) and continuous (fabric-degraded)."""
    from fabricguard.agent.render import readiness_rules, to_yaml
    from fabricguard.profile.commands import profile_or_exit

    prof = profile_or_exit(profile)
    head = ("# fabricguard readiness gate for the Node Readiness Controller (readiness.node.x-k8s.io/v1alpha1).\n"
            "# It ignores heartbeat age: the agent's sweep CronJob (`fabricguard agent-sweep`) turns a dead\n"
            "# agent's True Unknown. Install the agent (fabricguard render agent) before these rules.\n")
    sys.stdout.write(to_yaml(readiness_rules(prof, dry_run=dry_run), head))


def image_problem(image: str) -> str | None:
    """Why ``image`` cannot be the agent's image: it must name a tag (for people) and the index digest
    (for the runtime), so every architecture resolves to the build that was tested."""
    from fabricguard.imageref import parse_reference, reference_problem

    problem = reference_problem(image)
    if problem:
        return problem
    ref = parse_reference(image)
    if not ref.tag or not ref.digest:
        missing = "a tag" if not ref.tag else "the digest of its multi-architecture index"
        return f"--image {image!r} lacks {missing}; the agent's image is referenced as repo:tag@sha256:<index digest>"
    return None


def render_agent_cmd(
    profile: Path = typer.Option(..., "--profile", "-p", help="Platform profile YAML."),
    image: str = typer.Option(..., "--image", help="repo:tag@sha256:<digest of the multi-arch index>."),
    namespace: str = typer.Option("fabricguard-system", "--namespace", "-n"),
    interval: int = typer.Option(60, "--interval", min=5, help="Seconds between the agent's runs."),
    passes: int = typer.Option(3, "--passes", min=1, help="Consecutive passes before True."),
    manage_taints: bool = typer.Option(False, "--manage-taints", help="No Node Readiness Controller: the agent "
                                       "keeps the taints itself (and may patch its Node's spec.taints)."),
    runtime_class: str = typer.Option(None, "--runtime-class", help="RuntimeClass that injects the NVIDIA driver "
                                      "(e.g. nvidia with the GPU Operator)."),
    sweep: bool = typer.Option(True, "--sweep/--no-sweep", help="Render the staleness sweep CronJob (turn it off "
                               "only where something else runs `fabricguard agent-sweep` on a schedule: the "
                               "controller does not sweep)."),
    nvml_access: str = typer.Option("auto", "--nvml-access", help="How the GPU checks reach NVML: runtime (the "
                                    "NVIDIA container toolkit injects the devices), privileged (driver on the host "
                                    "without the toolkit, e.g. GKE), or auto (by the pool's platform)."),
    monitoring: str = monitoring_option(),
    lnet: str = typer.Option("sidecar", "--lnet", help="LNet health (lustre.lnet) on pools that mount Lustre: "
                             "sidecar (a privileged container runs the host's lnetctl for the agent) or none."),
) -> None:
    """Print the agent's DaemonSets (one per pool), RBAC, profile ConfigMap, NetworkPolicy and own-node admission
    policy."""
    from fabricguard.agent.render import agent_manifests, to_yaml
    from fabricguard.profile.commands import profile_or_exit

    prof = profile_or_exit(profile)
    problem = image_problem(image)
    if problem:
        fail(problem, hint="e.g. --image registry.example.com/fabricguard:0.1.0@sha256:<index digest>")
    head = ("# fabricguard node agent. The admission policy needs Kubernetes >= 1.30 (ValidatingAdmissionPolicy v1,\n"
            "# node name in service-account tokens); the agents tolerate the readiness taints they clear.\n")
    if nvml_access not in ("auto", "runtime", "privileged"):
        fail(f"--nvml-access {nvml_access!r}: use auto, runtime or privileged")
    if lnet not in ("sidecar", "none"):
        fail(f"--lnet {lnet!r}: use sidecar or none")
    objs = agent_manifests(prof, profile.read_text(), image, namespace, interval=interval, passes=passes,
                           manage_taints=manage_taints, runtime_class=runtime_class, sweep=sweep,
                           nvml_access=nvml_access, monitoring=check_monitoring(monitoring), lnet=lnet)
    sys.stdout.write(to_yaml(objs, head))
