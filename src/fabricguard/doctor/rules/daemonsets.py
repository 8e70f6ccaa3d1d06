"""DaemonSet rules: ``daemonset-never-ready`` (its sibling ``daemonset-regressed``), ``daemonset-no-nodes``.

Age is measured from the DaemonSet's ``metadata.creationTimestamp``, never from its pods or restart
counts: on an autoscaled pool every new node starts a fresh pod, so the youngest pod is minutes old and its
restart count small even when the DaemonSet has never worked.

What kubectl output shows about the template: ``metadata.generation`` (bumped on every spec change), the
``deprecated.daemonset.template.generation`` annotation (the generation number of the current pod template;
its pods carry the same number in the ``pod-template-generation`` label) and, when ControllerRevisions
are in the snapshot, the ControllerRevision with the highest ``revision`` owned by the DaemonSet, whose
``creationTimestamp`` is when the current template was first applied. Without ControllerRevisions the
oldest pod carrying the current ``pod-template-generation`` gives an upper bound ("no later than").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from fabricguard import names, objects
from fabricguard.doctor.model import Finding, ObjRef, Severity, human_age
from fabricguard.doctor.rules._common import (
    MAX_EVIDENCE_ITEMS,
    all_container_statuses,
    fabric_pools,
    pool_nodes,
)
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.objects import find_condition
from fabricguard.profile import PlatformProfile
from fabricguard.times import format_time, parse_time

NEVER_READY = "daemonset-never-ready"
REGRESSED = "daemonset-regressed"
NO_NODES = "daemonset-no-nodes"

# A container that stayed up this long before it exited was running (ready, if it has no readiness probe).
RAN_SECONDS = 600
# A Ready=False condition that changed this long after the pod was scheduled flipped from True to False.
FLIP_SECONDS = 120
_EPOCH_PREFIX = "1970-01-01"


def _status_int(status: dict[str, Any], key: str) -> int:
    # The API server omits these counters when they are zero.
    v = status.get(key)
    return int(v) if isinstance(v, int | float) else 0


def pod_ready_evidence(pod: dict[str, Any]) -> dict[str, Any]:
    """Field paths proving the pod has been ready at some point; empty when nothing says it ever was."""
    ev: dict[str, Any] = {}
    ready = find_condition(pod, names.POD_READY)
    if ready and ready.get("status") == "True":
        ev["status.conditions[Ready].status"] = "True"
        return ev
    for path, cs in all_container_statuses(pod):
        if cs.get("ready") is True:
            ev[f"{path}.ready"] = True
        term = (cs.get("lastState") or {}).get("terminated") or {}
        started, finished = term.get("startedAt"), term.get("finishedAt")
        if started and finished and not str(started).startswith(_EPOCH_PREFIX):
            s, f = parse_time(started), parse_time(finished)
            if s and f and (f - s).total_seconds() >= RAN_SECONDS:
                ev[f"{path}.lastState.terminated"] = (
                    f"ran {human_age((f - s).total_seconds())} ({started} to {finished})"
                )
    if ready and ready.get("status") == "False":
        changed = parse_time(ready.get("lastTransitionTime"))
        sched = find_condition(pod, names.POD_SCHEDULED)
        since = parse_time((sched or {}).get("lastTransitionTime")) or parse_time(
            (pod.get("status") or {}).get("startTime")
        )
        if changed and since and (changed - since).total_seconds() >= FLIP_SECONDS:
            ev["status.conditions[Ready].lastTransitionTime"] = (
                f"{ready.get('lastTransitionTime')} (Ready went False after being True; scheduled {format_time(since)})"
            )
    return ev


@dataclass(frozen=True)
class PodFacts:
    """What the DaemonSet rules read of one pod (a function of the pod alone: ``Snapshot.derived`` keeps it)."""

    ready_evidence: dict[str, Any]  # pod_ready_evidence
    created: datetime | None
    restarts: int
    waiting: tuple[str, ...]  # each container's state.waiting.reason, in order
    said: tuple[str, ...]  # each container's last words (termination message or reason, or waiting message)


def pod_facts(pod: dict[str, Any]) -> PodFacts:
    waiting: list[str] = []
    said: list[str] = []
    restarts = 0
    for _, cs in all_container_statuses(pod):
        restarts += int(cs.get("restartCount") or 0)
        reason = ((cs.get("state") or {}).get("waiting") or {}).get("reason")
        if reason:
            waiting.append(reason)
        term = (cs.get("lastState") or {}).get("terminated") or {}
        wait = (cs.get("state") or {}).get("waiting") or {}
        msg = str(term.get("message") or term.get("reason") or wait.get("message") or "").strip()
        if msg:
            said.append(msg)
    return PodFacts(pod_ready_evidence(pod), parse_time((pod.get("metadata") or {}).get("creationTimestamp")),
                    restarts, tuple(waiting), tuple(said))


@dataclass(frozen=True)
class PodsSummary:
    """What the DaemonSet rules read of a DaemonSet's pods together (a function of the pods alone, clock-free:
    ``Snapshot.fold`` keeps it while they are the same objects)."""

    ever: dict[str, dict[str, Any]]  # pod name -> pod_ready_evidence, for the pods that were ever ready
    reasons: dict[str, int]  # _waiting_reasons
    youngest: datetime | None
    oldest: datetime | None
    restarts: int
    said: str  # pods_say


def _summary(facts: list[tuple[dict[str, Any], PodFacts]]) -> PodsSummary:
    ever: dict[str, dict[str, Any]] = {}
    for pod, f in facts:
        if f.ready_evidence:
            ever[pod["metadata"]["name"]] = f.ready_evidence
    only = [f for _, f in facts]
    pod_times = [f.created for f in only if f.created]
    return PodsSummary(ever, _waiting_reasons(only), max(pod_times) if pod_times else None,
                       min(pod_times) if pod_times else None, sum(f.restarts for f in only), pods_say(only))


def pods_summary(snapshot: Snapshot, key: tuple[str, str], pods: list[dict[str, Any]]) -> PodsSummary:
    """The summary of DaemonSet ``key``'s pods: each pod's facts kept while it is the same object, the summary
    while they all are."""
    facts = snapshot.select(("daemonset pod facts", *key), pods, pod_facts)
    return snapshot.fold(("daemonset pods", *key), facts, _summary)


def _waiting_reasons(facts: list[PodFacts]) -> dict[str, int]:
    out: dict[str, int] = {}
    for f in facts:
        for reason in f.waiting:
            out[reason] = out.get(reason, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def template_since(snapshot: Snapshot, ds: dict[str, Any]) -> tuple[datetime | None, str]:
    """When the current pod template was applied, and how that was found."""
    meta = ds.get("metadata") or {}
    ns, name = meta.get("namespace", ""), meta.get("name", "")
    revs = snapshot.revisions_by_owner.get((ns, name))
    if revs:
        newest = max(revs, key=lambda r: int(r.get("revision") or 0))
        t = parse_time((newest.get("metadata") or {}).get("creationTimestamp"))
        if t:
            return t, f"ControllerRevision {newest['metadata']['name']} (revision {newest.get('revision')})"
    gen = (meta.get("annotations") or {}).get("deprecated.daemonset.template.generation")
    if gen:
        pods = snapshot.daemonset_pods.get((ns, name), [])
        oldest = snapshot.fold(("template since", ns, name), pods, partial(_oldest_of_generation, gen))
        if oldest is not None:
            return oldest, f"oldest pod with pod-template-generation={gen} (the template is no newer)"
    return None, ""


def _oldest_of_generation(gen: str, pods: list[dict[str, Any]]) -> datetime | None:
    """When the oldest of ``pods`` carrying ``pod-template-generation=gen`` was created."""
    times = [t for p in pods if objects.labels_of(p).get("pod-template-generation") == gen
             and (t := parse_time(p["metadata"].get("creationTimestamp")))]
    return min(times) if times else None


def _selector(ds: dict[str, Any]) -> str:
    """The DaemonSet's ``matchLabels`` as a ``-l`` argument (``<selector>`` if it has none)."""
    labels = (((ds.get("spec") or {}).get("selector") or {}).get("matchLabels") or {})
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "<selector>"


def pods_say(facts: list[PodFacts]) -> str:
    """What the pods' containers last said when they stopped (the most common message, whole), or ''."""
    said: dict[str, int] = {}
    for f in facts:
        for msg in f.said:
            said[msg] = said.get(msg, 0) + 1
    return max(said, key=lambda m: said[m]) if said else ""


def never_ready_fix(ds: dict[str, Any], said: str) -> str:
    """The fix with what the doctor knows: the namespace, the selector, what the pods said (``pods_say``)."""
    meta = ds.get("metadata") or {}
    ns, name = meta.get("namespace", ""), meta.get("name", "")
    heard = f" (they say: {said[:200]})" if said else ""
    return (f"Read why its pods fail{heard}: `kubectl -n {ns} describe pod -l {_selector(ds)}`; fix the image or "
            f"configuration, then watch it become ready: `kubectl -n {ns} rollout status ds/{name}`. "
            "fabricguard render alerts fires FabricguardFabricDaemonSetNeverReady so this cannot stay unseen.")


def daemonset_never_ready(snapshot: Snapshot, profile: PlatformProfile | None, now: datetime) -> list[Finding]:
    """DaemonSets that want pods, have none ready and whose pods show no sign of ever having been ready.

    One that shows such a sign (was ready, then broke) is reported as ``daemonset-regressed`` instead.
    """
    plugin_pools: dict[tuple[str, str], list[str]] = {}
    for p in fabric_pools(profile):
        if p.fabric.fabric_daemonset:
            dp = p.fabric.fabric_daemonset
            plugin_pools.setdefault((dp.namespace, dp.daemonSet), []).append(p.name)
    findings: list[Finding] = []
    for ds in snapshot.daemonsets:
        meta = ds.get("metadata") or {}
        status = ds.get("status") or {}
        desired = _status_int(status, "desiredNumberScheduled")
        ready = _status_int(status, "numberReady")
        available = _status_int(status, "numberAvailable")
        if desired <= 0 or ready > 0 or available > 0:
            continue
        ns, name = meta.get("namespace", ""), meta.get("name", "")
        pods = snapshot.daemonset_pods.get((ns, name), [])
        created = parse_time(meta.get("creationTimestamp"))
        age = human_age((now - created).total_seconds()) if created else "an unknown time"
        evidence: dict[str, Any] = {
            "metadata.creationTimestamp": meta.get("creationTimestamp"),
            "status.desiredNumberScheduled": desired,
            "status.numberReady": ready,
            "status.numberAvailable": available,
        }
        summary = pods_summary(snapshot, (ns, name), pods)
        ever = summary.ever
        if summary.reasons:
            evidence["pods: state.waiting.reason"] = dict(summary.reasons)
        if summary.youngest is not None and summary.oldest is not None:
            evidence["youngest pod age (misleading)"] = human_age((now - summary.youngest).total_seconds())
            evidence["oldest pod age"] = human_age((now - summary.oldest).total_seconds())
        evidence["pods: sum of restartCount (misleading)"] = summary.restarts
        generation = int(meta.get("generation") or 1)
        template_note = ""
        if generation > 1:
            evidence["metadata.generation"] = generation
            since, how = template_since(snapshot, ds)
            if since:
                evidence["current template since"] = f"{format_time(since)} ({how})"
                template_note = (
                    f" Its template changed since creation (generation {generation}); the current "
                    "template has "
                    f"been in place since {format_time(since)} ({human_age((now - since).total_seconds())}), "
                    f"per the {how}."
                )
            else:
                template_note = (
                    f" Its template changed since creation (generation {generation}); the snapshot holds no "
                    "ControllerRevision or current-template pod to tell since when."
                )
        pools = plugin_pools.get((ns, name), [])
        obj = [ObjRef("DaemonSet", name, ns)]
        if ever:
            first = dict(list(ever.items())[:MAX_EVIDENCE_ITEMS])
            evidence["pods that were ready before"] = first
            findings.append(
                Finding(
                    rule=REGRESSED,
                    severity=Severity.critical,
                    objects=obj,
                    message=(
                        f"DaemonSet {ns}/{name} has 0 of {desired} pods ready now, but {len(ever)} of "
                        "its pods were "
                        f"ready before: it worked and regressed (created {age} ago).{template_note}"
                    ),
                    evidence=evidence,
                    fix="Compare the current template with the last one that worked (kubectl rollout history "
                    f"ds/{name} -n {ns}) and roll back or fix what changed; check the pods' last "
                    "termination.",
                    pools=pools,
                )
            )
            continue
        findings.append(
            Finding(
                rule=NEVER_READY,
                severity=Severity.critical,
                objects=obj,
                message=(
                    f"DaemonSet {ns}/{name} never ready in {age}: it wants {desired} pods, none is "
                    "ready and none "
                    f"of its {len(pods)} pods in the snapshot has ever been ready. The age is the "
                    "DaemonSet's, "
                    "not its pods': autoscaled nodes start fresh pods, so pod ages and restart counts make a "
                    f"failure this old look recent.{template_note}"
                ),
                evidence=evidence,
                fix=never_ready_fix(ds, summary.said),
                pools=pools,
            )
        )
    return findings


def _on_nodes(pods: list[dict[str, Any]]) -> frozenset[Any]:
    """The nodes the pods are bound to."""
    return frozenset((p.get("spec") or {}).get("nodeName") for p in pods)


def daemonset_no_nodes(snapshot: Snapshot, profile: PlatformProfile | None, now: datetime) -> list[Finding]:
    """The profile's device plugin DaemonSet is missing, desires 0 pods, or has no pod on the pool's nodes."""
    del now
    findings: list[Finding] = []
    members = pool_nodes(snapshot, profile)
    ds_by_key = {
        ((d.get("metadata") or {}).get("namespace", ""), objects.name_of(d)): d
        for d in snapshot.daemonsets
    }
    for pool in fabric_pools(profile):
        dp = pool.fabric.fabric_daemonset
        nodes = members.get(pool.name, [])
        if dp is None or not nodes:
            continue
        ds = ds_by_key.get((dp.namespace, dp.daemonSet))
        objs = [ObjRef("DaemonSet", dp.daemonSet, dp.namespace)]
        what = "DRA driver" if pool.fabric.dra is not None else "Device plugin"
        field = "fabric.dra.driverDaemonSet" if pool.fabric.dra is not None else "fabric.devicePlugin"
        fix_missing = (
            f"Deploy the {pool.fabric.type} {what.lower()} as DaemonSet {dp.namespace}/{dp.daemonSet} with a "
            f"nodeSelector/tolerations that match pool {pool.name} ({pool.nodeSelector}), or correct "
            f"{field} in the profile."
        )
        evidence: dict[str, Any] = {
            f"profile: {field}": f"{dp.namespace}/{dp.daemonSet}",
            "pool nodes": len(nodes),
            "pool nodeSelector": pool.nodeSelector,
        }
        if ds is None:
            findings.append(
                Finding(
                    NO_NODES,
                    Severity.critical,
                    objs,
                    f"{what} DaemonSet {dp.namespace}/{dp.daemonSet} of pool {pool.name} does "
                    "not exist, "
                    f"but the pool has {len(nodes)} nodes: nothing can advertise the fabric on them.",
                    evidence,
                    fix_missing,
                    pools=[pool.name],
                )
            )
            continue
        desired = _status_int(ds.get("status") or {}, "desiredNumberScheduled")
        plugin = snapshot.daemonset_pods.get((dp.namespace, dp.daemonSet), [])
        on = snapshot.fold((NO_NODES, "on", dp.namespace, dp.daemonSet), plugin, _on_nodes)
        if desired > 0 and any(n["metadata"]["name"] in on for n in nodes):  # the first such node will do
            continue
        node_names = sorted(n["metadata"]["name"] for n in nodes)
        evidence["status.desiredNumberScheduled"] = desired
        evidence["spec.template.spec.nodeSelector"] = (
            ((ds.get("spec") or {}).get("template") or {}).get("spec", {}).get("nodeSelector")
        )
        evidence["pool nodes without a plugin pod"] = node_names[:MAX_EVIDENCE_ITEMS]
        why = "desires 0 pods" if desired == 0 else f"desires {desired} pods but none runs on the pool's nodes"
        findings.append(
            Finding(
                NO_NODES,
                Severity.critical,
                objs,
                f"{what} DaemonSet {dp.namespace}/{dp.daemonSet} {why} while pool {pool.name} has "
                f"{len(nodes)} nodes: its nodeSelector, affinity or tolerations exclude the pool.",
                evidence,
                "Make the DaemonSet's nodeSelector/affinity match the pool's labels and tolerate its taints "
                f"({[t.to_k8s() for t in pool.tolerations]}).",
                pools=[pool.name],
            )
        )
    return findings
