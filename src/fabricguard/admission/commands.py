"""CLI commands of `fabricguard.admission` (registered on the root app by `register`).

``fabricguard admission review --profile P FILE|-`` prints the AdmissionReview response for the combined
decision (mutation, then validation of the mutated object) through the same code as the server;
``fabricguard admission serve`` runs the HTTPS webhook; ``fabricguard render webhook`` (added to the
``render`` group by cli.py) prints its manifests.
"""

from __future__ import annotations

import logging
import ssl
import sys
from pathlib import Path
from typing import Any

import typer

from fabricguard import objects
from fabricguard.console import EXIT_DEGRADED, EXIT_INPUT, fail, print_json, say
from fabricguard.options import Mode, check_monitoring, check_namespace, check_port, mode_option, monitoring_option
from fabricguard.profile.commands import profile_or_exit
from fabricguard.profile.loader import profile_text
from fabricguard.profile.model import PlatformProfile
from fabricguard.userfiles import SourceError, read_bytes

admission_app = typer.Typer(help="Admission webhook: inject the fabric, reject what would silently degrade.",
                            no_args_is_help=True)

PROFILE_OPT = typer.Option(..., "--profile", "-p", help="Platform profile YAML.")
WEBHOOK_PORT_OPT = typer.Option(
    10250, "--webhook-port", help="The webhook's container port the API server calls. 10250: a GKE private "
    "cluster's control plane reaches nodes only on 443 and 10250 without a firewall rule (docs/install.md).")


def _profile(path: Path) -> PlatformProfile:
    return profile_or_exit(path)


def _templates(path: Path) -> Any:
    """A resolver over saved ResourceClaimTemplates; one line naming the file when it holds none."""
    import json

    from fabricguard.admission.claims import TEMPLATE_KIND

    try:
        data = json.loads(read_bytes(path, max_bytes=64 * 1024**2))
    except SourceError as exc:
        fail(str(exc), hint="save them with kubectl get resourceclaimtemplates -A -o json")
    except (OSError, ValueError) as exc:
        fail(f"--claim-templates {path}: cannot read it as JSON ({exc})",
             hint="save them with kubectl get resourceclaimtemplates -A -o json")
    items = data.get("items") if isinstance(data, dict) and "items" in data else [data]
    if not isinstance(items, list) or any(not isinstance(i, dict) or i.get("kind", TEMPLATE_KIND) != TEMPLATE_KIND
                                          for i in items):
        fail(f"--claim-templates {path}: not a List of ResourceClaimTemplates",
             hint="save them with kubectl get resourceclaimtemplates -A -o json")
    by = {((i.get("metadata") or {}).get("namespace", ""), objects.name_of(i)): i
          for i in items}

    def resolve(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return by.get((namespace, name)) if kind == TEMPLATE_KIND else None

    return resolve


@admission_app.command("review")
def review_cmd(
    file: str = typer.Argument(..., help="AdmissionReview request JSON, or - for stdin."),
    profile: Path = PROFILE_OPT,
    templates: Path = typer.Option(None, "--claim-templates", help="DRA pools: the cluster's ResourceClaimTemplates "
                                   "(kubectl get resourceclaimtemplates -A -o json) to check against; without it "
                                   "the check is skipped with a warning."),
    mode: Mode = mode_option(),
) -> None:
    """Decide one AdmissionReview offline, as the webhooks would (namespace selector assumed to match)."""
    from fabricguard.admission.decide import Admission

    prof = _profile(profile)
    resolve = _templates(templates) if templates is not None else None
    try:
        body = sys.stdin.buffer.read() if file == "-" else read_bytes(Path(file), max_bytes=64 * 1024**2)
    except SourceError as exc:
        fail(str(exc), hint="pass an AdmissionReview JSON file, or - for stdin")
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror or exc}")
    decision = Admission(prof, resolve, mode.value).handle("review", body)
    if decision.status != 200:
        fail(decision.body.get("error", "bad request"), hint="pass an admission.k8s.io/v1 AdmissionReview "
                                                           "with a request")
    print_json(decision.body)
    if decision.outcome == "bad_request":
        raise typer.Exit(EXIT_INPUT)
    if not decision.body["response"]["allowed"]:
        raise typer.Exit(EXIT_DEGRADED)


@admission_app.command("serve")
def serve_cmd(
    profile: Path = PROFILE_OPT,
    cert: Path = typer.Option(..., "--cert", help="TLS certificate (PEM), re-read when it changes."),
    key: Path = typer.Option(..., "--key", help="TLS private key (PEM)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (0.0.0.0 inside the pod)."),
    port: int = typer.Option(8443, "--port", min=0, max=65535),
    max_body: int = typer.Option(3 * 1024 * 1024, "--max-body", min=1024, help="Largest request in bytes."),
    reload_interval: float = typer.Option(5.0, "--reload-interval", min=0.1,
                                          help="Seconds between checks of the certificate files."),
    health_port: int = typer.Option(8081, "--health-port", min=0, max=65535,
                                     help="Plain-HTTP port for /healthz, /readyz and /metrics."),
    body_timeout: float = typer.Option(10.0, "--body-timeout", min=0.1,
                                       help="Seconds a client has to send a request body."),
    shutdown_delay: float = typer.Option(5.0, "--shutdown-delay", min=0.0,
                                         help="After SIGTERM: seconds to keep answering while not ready."),
    shutdown_timeout: float = typer.Option(15.0, "--shutdown-timeout", min=0.0,
                                           help="After the delay: seconds in-flight requests get to finish."),
    mode: Mode = mode_option(),
    job_dir_image: str | None = typer.Option(
        None, "--job-dir-image", help="Image (with the fabricguard CLI) of the init container that makes the "
                                      "job's directory the workload's, where the profile names none "
                                      "(storage.lustre.jobDirectory.image); without either, none is injected."),
) -> None:
    """Run the HTTPS admission webhook (/mutate, /validate; /healthz, /readyz, /metrics on both ports)."""
    import ssl

    from fabricguard.admission.decide import Admission
    from fabricguard.admission.server import serve

    prof = _profile(profile)
    if job_dir_image is not None:
        from fabricguard.imageref import reference_problem

        problem = reference_problem(job_dir_image)
        if problem:
            fail(f"--job-dir-image: {problem}", hint="pass the node agent's image, repo:tag@sha256:<index digest>")
    problem = tls_pair_problem(cert, key)
    if problem:
        fail(problem, hint="mount the cert-manager secret there (tls.crt, tls.key), or pass --cert/--key")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    resolve, background = None, None
    if any(p.claim_template_name for p in prof.spec.pools):
        # DRA claim pools: the webhook checks that the pool's ResourceClaimTemplate exists in the namespace.
        from fabricguard.admission.templates import TemplateCache, kube_lister
        from fabricguard.kubeconfig import kubeconfig_problem

        problem = kubeconfig_problem(None)
        if problem:
            fail(problem, hint="the webhook lists ResourceClaimTemplates for the DRA pools; run it in the cluster")
        cache = TemplateCache(kube_lister())
        resolve, background = cache.resolve, cache.run
    try:
        serve(Admission(prof, resolve, mode.value, job_dir_image), cert, key, host=host, port=port, max_body=max_body,
              reload_interval=reload_interval, body_timeout=body_timeout, health_port=health_port,
              shutdown_delay=shutdown_delay, shutdown_timeout=shutdown_timeout, background=background)
    except ssl.SSLError as exc:
        fail(f"{cert} and {key} cannot serve TLS: {exc.reason or exc}",
             hint="pass a PEM certificate and the private key that belongs to it")
    except OSError as exc:
        fail(f"cannot serve on {host}:{port} (health {health_port}): {exc.strerror or exc}")


def render_webhook_cmd(
    profile: Path = PROFILE_OPT,
    image: str = typer.Option(..., "--image", help="fabricguard image, ideally repo@sha256:<index digest>."),
    namespace: str = typer.Option("fabricguard-system", "--namespace", "-n"),
    apiserver_cidr: list[str] = typer.Option(
        [], "--apiserver-cidr",
        help="Where the API server's calls come from (repeatable); the NetworkPolicy admits only these to the "
             "webhook port. See docs/admission.md for each provider. Required unless --any-source."),
    any_source: bool = typer.Option(
        False, "--any-source", help="Render the NetworkPolicy without --apiserver-cidr: the webhook port is then "
                                    "open to every pod and node, not only the API server."),
    webhook_port: int = WEBHOOK_PORT_OPT,
    monitoring: str = monitoring_option(),
    job_dir_image: str | None = typer.Option(
        None, "--job-dir-image", help="Image of the init container that makes the job's directory the "
                                      "workload's (default: --image; render install passes the agent's)."),
) -> None:
    """Print the webhook's Deployment, Service, PDB, NetworkPolicy, cert-manager objects and configurations."""
    from fabricguard.admission.render import image_warnings, manifests, to_yaml
    from fabricguard.imageref import reference_problem

    prof = _profile(profile)
    check_namespace("--namespace", namespace)
    problem = reference_problem(image)
    if problem:
        fail(problem, hint="e.g. --image registry.example.com/fabricguard@sha256:<digest of the multi-arch index>")
    if job_dir_image is not None:
        problem = reference_problem(job_dir_image)
        if problem:
            fail(f"--job-dir-image: {problem}", hint="e.g. the node agent's image, repo:tag@sha256:<index digest>")
    cidrs = _cidrs(apiserver_cidr, any_source)
    for w in image_warnings(image):
        say(("warning:", "yellow"), f" {w}", err=True)
    from fabricguard.admission.daemonsets import webhook as daemonset_webhook
    from fabricguard.admission.render import NAME as render_name

    hook = daemonset_webhook(prof, namespace, render_name)
    claims = any(p.claim_template_name for p in prof.spec.pools)
    port = check_port("--webhook-port", webhook_port)
    sys.stdout.write(to_yaml(manifests(profile_text(profile), image, namespace, cidrs, [hook] if hook else None,
                                       claim_templates=claims, port=port,
                                       monitoring=check_monitoring(monitoring), job_dir_image=job_dir_image)))




def tls_pair_problem(cert: Path, key: Path) -> str | None:
    """What is wrong with a certificate and key pair, naming the file (None when TLS can load them)."""
    for option, path, marker in (("--cert", cert, "CERTIFICATE-----"), ("--key", key, "PRIVATE KEY-----")):
        try:
            data = read_bytes(path, max_bytes=1024**2)
        except SourceError as exc:
            return f"{option} {exc}"
        if marker.encode() not in data:
            return f"{option} {path}: no PEM '-----BEGIN {marker}' block; pass the PEM file"
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(str(cert), str(key))
    except ssl.SSLError as exc:
        reason = (exc.reason or str(exc)).lower().replace("_", " ")
        if "mismatch" in reason:
            return f"--key {key} does not belong to the certificate in --cert {cert} ({reason})"
        return f"--cert {cert} / --key {key}: TLS cannot load the pair ({reason})"
    return None


def _cidrs(values: list[str], any_source: bool = False) -> list[str]:
    """The --apiserver-cidr values as networks (exit 3 naming a bad one). None given: exit 3, because the
    NetworkPolicy would admit the webhook port from any source; with ``any_source`` a warning instead."""
    import ipaddress

    cidrs = []
    for c in values:
        try:
            cidrs.append(str(ipaddress.ip_network(c.strip(), strict=False)))
        except ValueError:
            fail(f"--apiserver-cidr {c!r} is not a CIDR", hint="e.g. --apiserver-cidr 172.16.0.0/28")
    if not cidrs and not any_source:
        fail("no --apiserver-cidr: the NetworkPolicy admits the webhook port (8443) from the API server only, "
             "so it must know where the API server's calls come from",
             hint="docs/admission.md lists it per provider (e.g. --apiserver-cidr 172.16.0.0/28); "
                  "--any-source renders it open to every source instead")
    if not cidrs:
        say(("warning:", "yellow"), " --any-source: the NetworkPolicy admits the webhook port from any "
            "source; docs/admission.md says where the API server's calls come from", err=True)
    return cidrs


def register(app: typer.Typer) -> None:
    """Add this area's commands to the root app."""
    app.add_typer(admission_app, name="admission")
