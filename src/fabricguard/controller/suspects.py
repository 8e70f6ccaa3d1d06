"""While a job runs: its late rank and its slow node, joined to pods and nodes, told once, never acted on.

``nccl.ranks.Attribution`` finds, from the job's Inspector records alone, the rank the others wait for and the
node whose link or rail slows the communicators across it. Here a finding is joined rank -> pod -> node (a pod's
hostname is what the Inspector writes: ``spec.hostname``, else the pod's name; a hostNetwork pod writes its node's
name) and, once it has held for ``suspectRounds`` dump rounds, written on the job:

* the annotation ``fabricguard.io/suspects``: compact JSON, the form other parts of a platform read (the node
  pair tests take their candidates from it; :func:`suspects_of` parses it)::

      {"round": 3, "late": [{"rank": 74, "pod": "llm-3d-workers-0-9", "node": "gpu-009", "lateness_s": 0.04,
                             "confidence": 0.98}],
       "slow": [{"pod": "llm-3d-workers-0-5", "node": "gpu-005", "ratio": 0.33, "confidence": 0.97,
                 "tied_with": []}]}

* a Warning Event per new finding: ``FabricRankLate`` ("rank N is late": a data loader or a checkpoint looks the
  same at the collective, so the fabric is not blamed) or ``FabricNodeSuspect`` (with how sure, and "its pair
  test decides"). A suspect never cordons, taints or quarantines a node: one job's evidence is not a verdict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from fabricguard import objects as o
from fabricguard.controller.actions import Action, Annotate, event
from fabricguard.nccl.ranks import AttributionView

ANN_SUSPECTS = "fabricguard.io/suspects"


class RunningJob(Protocol):
    """What is read of a running job (``controller.live.RunningJob``; not imported: live imports this module)."""

    @property
    def kind(self) -> str: ...
    @property
    def api_version(self) -> str: ...
    @property
    def plural(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def obj(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class PodPlace:
    pod: str
    node: str
    ips: tuple[str, ...]
    container: str | None = None  # the container holding the GPUs (the NCCL processes): where RAS is asked


def job_pods(job: RunningJob, pods: list[dict[str, Any]]) -> dict[str, PodPlace]:
    """The job's pods by the hostname their processes see (and by pod IP, for RAS answers, which name IPs)."""
    out: dict[str, PodPlace] = {}
    for p in pods:
        if o.namespace_of(p) != job.namespace:
            continue
        labels = o.labels_of(p)
        if job.name not in (labels.get("jobset.sigs.k8s.io/jobset-name"), labels.get("job-name"),
                            labels.get("training.kubeflow.org/job-name"),
                            labels.get("leaderworkerset.sigs.k8s.io/name")) and not o.name_of(p).startswith(
                                job.name + "-"):
            continue
        spec, status = p.get("spec") or {}, p.get("status") or {}
        node = str(spec.get("nodeName") or "")
        ips = tuple(str(x.get("ip")) for x in status.get("podIPs") or () if isinstance(x, dict) and x.get("ip"))
        if status.get("podIP") and status["podIP"] not in ips:
            ips = (str(status["podIP"]), *ips)
        if spec.get("hostNetwork") and status.get("hostIP"):
            ips = (*ips, str(status["hostIP"]))
        containers = [c for c in spec.get("containers") or () if isinstance(c, dict)]
        gpu = next((c for c in containers if any("gpu" in str(k) for k in
                                                 ((c.get("resources") or {}).get("limits") or {}))), None)
        pick = gpu or (containers[0] if containers else None)
        place = PodPlace(o.name_of(p), node, ips, str(pick.get("name")) if pick and pick.get("name") else None)
        host = node if spec.get("hostNetwork") else str(spec.get("hostname") or o.name_of(p))
        out[host] = place
        for ip in ips:
            out.setdefault(ip, place)
    return out


def summary(view: AttributionView, places: dict[str, PodPlace]) -> dict[str, Any]:
    """The confirmed findings, joined to pods and nodes (unknown: the hostname alone)."""
    def where(host: str) -> dict[str, str]:
        p = places.get(host)
        return {"pod": p.pod, "node": p.node} if p else {"pod": host, "node": ""}

    return {
        "round": view.round,
        "late": [{"rank": r.rank, **where(r.hostname), "lateness_s": round(r.lateness_s, 4),
                  "confidence": round(r.confidence, 2)} for r in view.confirmed_late()],
        "slow": [{**where(n.hostname), "ratio": round(n.ratio, 2), "confidence": round(n.confidence, 2),
                  "tied_with": [where(t)["node"] or t for t in n.tied_with]} for n in view.confirmed_slow()],
    }


def suspects_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    """A job's ``fabricguard.io/suspects`` annotation, parsed (None: none, or not ours)."""
    raw = o.annotations_of(obj).get(ANN_SUSPECTS)
    if not raw:
        return None
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _key(s: dict[str, Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    return (tuple(sorted((x["rank"], x["pod"]) for x in s["late"])),
            tuple(sorted((x["pod"], x["node"]) for x in s["slow"])))


def suspect_actions(job: RunningJob, view: AttributionView, places: dict[str, PodPlace], reported: str | None,
                    now: datetime) -> tuple[list[Action], str | None]:
    """(actions, what is now told) when the confirmed findings differ from what the job was last told."""
    s = summary(view, places)
    if not s["late"] and not s["slow"]:
        return [], reported
    state = json.dumps(_key(s))
    if state == reported:
        return [], reported
    told = suspects_of(job.obj)
    if reported is None and told is not None and json.dumps(_key({"late": told.get("late") or [],
                                                                 "slow": told.get("slow") or []})) == state:
        return [], state
    text = json.dumps(s, separators=(",", ":"))
    while len(text) > 1000 and (s["late"] or s["slow"]):
        (s["late"] if len(s["late"]) >= len(s["slow"]) else s["slow"]).pop()
        text = json.dumps(s, separators=(",", ":"))
    actions: list[Action] = [Annotate(job.api_version, job.plural, job.namespace, job.name, {ANN_SUSPECTS: text})]
    for r in s["late"][:3]:
        actions.append(event(job.obj, job.api_version, job.kind, "FabricRankLate",
                             f"rank {r['rank']} (pod {r['pod']}, node {r['node'] or 'unknown'}) is late to its "
                             f"collectives by {r['lateness_s'] * 1000:.0f} ms: every other rank waits for it "
                             f"(NCCL Inspector, {view.rounds_needed}+ dump rounds, confidence "
                             f"{r['confidence']:.2f}); a data loader or a checkpoint looks the same, so its "
                             "node's fabric is not blamed", now, warning=True))
    for n in s["slow"][:3]:
        tied = f"; as likely: {', '.join(n['tied_with'])}" if n["tied_with"] else ""
        actions.append(event(job.obj, job.api_version, job.kind, "FabricNodeSuspect",
                             f"node {n['node'] or 'unknown'} (pod {n['pod']}) is a suspect: the job's communicators "
                             f"across it run at {n['ratio']:.2f}x their peers' bus bandwidth (NCCL Inspector, "
                             f"{view.rounds_needed}+ dump rounds, confidence {n['confidence']:.2f}{tied}); "
                             "nothing is cordoned: the node's pair test decides", now, warning=True))
    return actions, state
