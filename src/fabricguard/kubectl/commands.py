"""``kubectl fabricguard why JOB`` and ``kubectl fabricguard pools``: the cluster's answer in one screen.

kubectl runs any executable named ``kubectl-fabricguard`` on the PATH as ``kubectl fabricguard``, passing every
argument after the plugin's name (``-n``, ``--context`` and ``--kubeconfig`` included) and its environment
(``KUBECONFIG``). The reads are the plugin's permission table (``controller.viewer.PLUGIN_GRANTS``): gets of the
job's kinds, a list of Workloads in the job's namespace, the pools' FabricValidations and the controller's profile
ConfigMap; nothing is written. ``render install`` ships the roles built from that table (ClusterRole and Role
``fabricguard-viewer``, in the controller's component). The verdict word is line 1 and the exit code follows it
(0 pass, 1 degraded, 2 failed, 3 input unusable or the cluster unreachable).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import typer

from fabricguard import names
from fabricguard.console import Block, CommandGroup, blocks, console, fail, print_json, verdict_line
from fabricguard.controller.manifests import PROFILE_KEY
from fabricguard.controller.viewer import JOB_KINDS, PROFILE_CONFIGMAP, plugin_permissions
from fabricguard.controller.why import Answer, explain, pool_of, pool_rows, split_ref, workloads_of
from fabricguard.exitcodes import exit_code
from fabricguard.kube import KubeError
from fabricguard.options import JSON_ALIAS, Format, format_option, now_value, wants_json
from fabricguard.profile import PlatformProfile, ProfileError, load_profile, loads_profile

app = typer.Typer(
    name="kubectl-fabricguard",
    cls=CommandGroup,
    help="kubectl fabricguard: why is my job held, slow or failed; the pools' state.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

KUBECONFIG: Any = typer.Option(None, "--kubeconfig", help="Kubeconfig (default: $KUBECONFIG or ~/.kube/config).")
CONTEXT: Any = typer.Option(None, "--context", help="The kubeconfig context.")
NOW: Any = typer.Option(None, "--now", hidden=True, help="Fix the clock (RFC 3339), for replays.")
DEFAULT_NAMESPACE = "fabricguard-system"  # where render install puts the controller


def _call(kubeconfig: str | None, context: str | None, work: Callable[[Any], Awaitable[Any]],
          namespace: str = DEFAULT_NAMESPACE) -> Any:
    from fabricguard.cluster_call import run_on_cluster

    return run_on_cluster(kubeconfig, context, plugin_permissions(namespace), work,
                          kubeconfig_hint="pass --kubeconfig/--context of the cluster",
                          needs="the reads this needs: get of the job, list of Workloads, get of FabricValidations")


async def _profile(kube: Any, path: Path | None, namespace: str) -> tuple[PlatformProfile | None, str]:
    """The profile for per-fabric fixes: ``-p``, else the controller's ConfigMap; (None, why) when neither."""
    if path is not None:
        return load_profile(path), str(path)
    try:
        cm = await kube.get("v1", "configmaps", PROFILE_CONFIGMAP, namespace)
    except KubeError as exc:
        return None, f"not read ({exc.__class__.__name__}): fixes are the generic ones"
    text = ((cm or {}).get("data") or {}).get(PROFILE_KEY)
    if not text:
        return None, f"no ConfigMap {namespace}/{PROFILE_CONFIGMAP}: fixes are the generic ones (or pass -p)"
    try:
        return loads_profile(text, f"configmap {namespace}/{PROFILE_CONFIGMAP}"), \
            f"configmap {namespace}/{PROFILE_CONFIGMAP}"
    except ProfileError:
        return None, f"configmap {namespace}/{PROFILE_CONFIGMAP} does not load: fixes are the generic ones"


def print_answer(a: Answer) -> None:
    """Line 1 the verdict and the state; then cause, fix (commands whole, on their own lines), facts, more."""
    verdict_line(a.verdict, f"{a.subject}", a.headline)
    fields = [("cause", a.cause), ("fix", a.fix), *a.facts,
              *(("more", f"`{m}`") for m in a.more)]
    blocks([Block(head=[], fields=[(k, v) for k, v in fields if v])], indent="  ")


@app.command("why")
def why_cmd(
    job: str = typer.Argument(..., help="The job: NAME or KIND/NAME (jobset/llama-ft, job/x, pytorchjob/y)."),
    namespace: str = typer.Option(None, "--namespace", "-n", help="The job's namespace (default: the context's)."),
    kubeconfig: str = KUBECONFIG,
    context: str = CONTEXT,
    profile: Path = typer.Option(None, "--profile", "-p", help="The platform profile, for per-fabric fixes "
                                 "(default: the controller's, from its ConfigMap)."),
    fabricguard_namespace: str = typer.Option(DEFAULT_NAMESPACE, "--fabricguard-namespace",
                                              help="Where the controller runs (its profile ConfigMap)."),
    fmt: Format = format_option(),
    as_json: bool = JSON_ALIAS,
    now: str = NOW,
) -> None:
    """Why is this job held, slow or failed: the Workload's check, the pool's FabricValidation, the job's
    transport and busbw annotations, the root cause and its fix. Exit 0 nothing wrong, 1 held or slow, 2 failed
    or hung."""
    at = now_value(now)
    try:
        kind, name = split_ref(job)
    except ValueError as exc:
        fail(f"JOB {job!r}: {exc}")
    if profile is not None:
        try:
            load_profile(profile)
        except ProfileError as exc:
            fail(f"--profile {exc}", hint="pass a platform profile YAML (fabricguard profile check FILE says why)")

    async def work(kube: Any) -> Answer:
        ns = namespace or getattr(kube.api, "namespace", None) or "default"
        found: dict[str, Any] | None = None
        found_kind = kind
        for k in JOB_KINDS:
            if kind is not None and k.kind != kind:
                continue
            try:
                obj = await kube.get(k.api_version, k.plural, name, ns)
            except KubeError as exc:
                if exc.status == 403:
                    continue  # not allowed to read that kind: the Workload still answers
                raise
            if obj is not None:
                found, found_kind = obj, k.kind
                break
        try:
            workloads = await kube.list(names.KUEUE_API, "workloads", ns)
        except KubeError as exc:
            if exc.status not in (403, 404):
                raise
            workloads = []
        prof, source = await _profile(kube, profile, fabricguard_namespace)
        pool = pool_of(found, workloads_of(found, found_kind, name, workloads))
        fv = await kube.get(names.FV_API, names.FV_PLURAL, pool) if pool else None
        answer = explain(name, found, found_kind, ns, workloads, {pool: fv} if pool and fv else {}, at, prof)
        answer.facts.append(("profile", source))
        return answer

    a: Answer = _call(kubeconfig, context, work, fabricguard_namespace)
    if a.state == "not-found":
        fail(f"JOB {job!r}: {a.headline}", hint=a.fix.replace("`", ""))
    if wants_json(fmt, as_json):
        print_json(a.to_dict(), "WhyAnswer")
    else:
        print_answer(a)
    raise typer.Exit(exit_code(a.verdict))


@app.command("pools")
def pools_cmd(
    kubeconfig: str = KUBECONFIG,
    context: str = CONTEXT,
    fmt: Format = format_option(),
    as_json: bool = JSON_ALIAS,
    now: str = NOW,
) -> None:
    """Every pool's state: validated or not (why), the last canary, the last pass ("never passed" shown), open
    breakers. Not validated first. Exit 0 all validated, 1 some not."""
    at = now_value(now)

    async def work(kube: Any) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = await kube.list(names.FV_API, names.FV_PLURAL)
        return out

    rows = pool_rows(_call(kubeconfig, context, work), at)
    bad = [r for r in rows if r.word != "pass"]
    word = "degraded" if bad else ("pass" if rows else "unjudged")
    if wants_json(fmt, as_json):
        print_json({"verdict": word, "pools": [r.to_dict() for r in rows]}, "PoolStates")
    else:
        verdict_line(word, "pools", f"{len(rows) - len(bad)} of {len(rows)} validated" if rows else
                     "no FabricValidation: is the controller running?")
        for r in rows:
            console.print()
            fields = [("validated", r.validated), ("last canary", r.last_outcome), ("last pass", r.last_pass),
                      ("why", r.message if r.word != "pass" else ""),
                      ("breakers open", ", ".join(r.breakers))]
            blocks([Block(head=[(r.word.upper(), "bold"), "  ", r.pool], fields=[f for f in fields if f[1]])])
    raise typer.Exit(exit_code(word))


def main() -> None:
    app()

