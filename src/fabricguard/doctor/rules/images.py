"""``image-arch-mismatch``: an image that cannot run on the architecture of the nodes it lands on.

Two sources: the kubelet's own words (``exec format error`` in container statuses, termination messages or
events: the binary is for another CPU), and, with a registry client, the image's manifest or index, which
must list a platform for every ``kubernetes.io/arch`` among the nodes the image runs on or must run on.
The registry's answers are looked up at the I/O edge and passed in (``registry_rule``); no rule makes a
network call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from fabricguard.doctor.model import Finding, ObjRef, Severity
from fabricguard.doctor.rules._common import (
    MAX_EVIDENCE_ITEMS,
    all_container_statuses,
    fabric_pools,
    node_arch,
    owner_key,
    pool_nodes,
)
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.imageref import parse_reference
from fabricguard.objects import selector_matches
from fabricguard.profile import PlatformProfile

RULE = "image-arch-mismatch"
NEEDLE = "exec format error"


def _status_messages(cs: dict[str, Any], path: str) -> list[tuple[str, str]]:
    out = []
    for part in ("state", "lastState"):
        for phase, st in (cs.get(part) or {}).items():
            msg = (st or {}).get("message")
            if isinstance(msg, str) and NEEDLE in msg:
                out.append((f"{path}.{part}.{phase}.message", msg))
    return out


def _plugin_pools(profile: PlatformProfile | None) -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for p in fabric_pools(profile):
        if dp := p.fabric.fabric_daemonset:
            out.setdefault((dp.namespace, dp.daemonSet), []).append(p.name)
    return out


def _exec_hits(pod: dict[str, Any]) -> tuple[tuple[Any, Any, list[tuple[str, str]], Any], ...]:
    """(container, image, messages, imageID) of each of the pod's containers that says 'exec format error': what
    the rule reads of one pod."""
    spec_images = {
        c.get("name"): c.get("image")
        for c in ((pod.get("spec") or {}).get("containers") or [])
        + ((pod.get("spec") or {}).get("initContainers") or [])
    }
    out = []
    for path, cs in all_container_statuses(pod):
        hits = _status_messages(cs, path)
        if hits:
            image = spec_images.get(cs.get("name")) or cs.get("image", "")
            out.append((cs.get("name"), image, hits, cs.get("imageID")))
    return tuple(out)


def _groups(hit: list[tuple[dict[str, Any], tuple[tuple[Any, Any, list[tuple[str, str]], Any], ...]]]
            ) -> dict[tuple[tuple[str, str, str], str], dict[str, Any]]:
    """The failing pods by controller and image: their first hits by pod name, the container, the image ID, and
    the names of the nodes they run on (each node's architecture is looked up by the caller)."""
    groups: dict[tuple[tuple[str, str, str], str], dict[str, Any]] = {}
    for pod, said in hit:
        meta = pod.get("metadata") or {}
        for container, image, hits, image_id in said:
            g = groups.setdefault((owner_key(pod), image), {"pods": {}, "nodes": set(), "container": container})
            g["nodes"].add((pod.get("spec") or {}).get("nodeName", ""))
            g["pods"].setdefault(meta.get("name"), dict(hits[:2]))
            if image_id:
                g["imageID"] = image_id
    return groups


def _name_arch(node: dict[str, Any]) -> tuple[str, str | None]:
    return node["metadata"]["name"], node_arch(node)


def _by_arch(named: list[tuple[dict[str, Any], tuple[str, str | None]]]) -> dict[str, frozenset[str]]:
    """Node names by their architecture (a name listed twice: its last node's, as a lookup by name gives)."""
    arch_of = {name: arch for _, (name, arch) in named}
    out: dict[str, set[str]] = {}
    for name, arch in arch_of.items():
        if arch:
            out.setdefault(arch, set()).add(name)
    return {arch: frozenset(names) for arch, names in out.items()}


def _event_says(ev: dict[str, Any]) -> str:
    """The event's message when it says 'exec format error', else ''."""
    msg = ev.get("message") or ev.get("note") or ""
    return msg if NEEDLE in msg else ""


def _by_name(pods: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        out[(meta.get("namespace", ""), meta.get("name", ""))] = pod
    return out


def exec_format_error(snapshot: Snapshot, profile: PlatformProfile | None, now: datetime) -> list[Finding]:
    """Containers failing with ``exec format error``, one finding per controller and image."""
    del now
    hit = snapshot.select("exec-format-pod", snapshot.pods, _exec_hits)
    groups = {k: dict(g) for k, g in snapshot.fold("exec-format-groups", hit, _groups).items()}  # ours to extend
    if groups:
        by_arch = snapshot.fold("nodes by arch", snapshot.select("node arch", snapshot.nodes, _name_arch), _by_arch)
        for g in groups.values():
            on = g.pop("nodes")
            g["arches"] = {arch for arch, named in by_arch.items() if not named.isdisjoint(on)}
    said_events = snapshot.select("exec-format-event", snapshot.events, _event_says)
    pods_by_name = snapshot.fold("pods-by-name", snapshot.pods, _by_name) if said_events else {}
    for ev, msg in said_events:
        inv = ev.get("involvedObject") or ev.get("regarding") or {}
        event_pod = pods_by_name.get((inv.get("namespace", ""), inv.get("name", "")))
        key = (
            owner_key(event_pod)
            if event_pod
            else (inv.get("kind", ""), inv.get("namespace", ""), inv.get("name", ""))
        )
        image = ""
        if event_pod:
            containers = (event_pod.get("spec") or {}).get("containers") or []
            image = containers[0].get("image", "") if containers else ""
        g = groups.setdefault((key, image), {"pods": {}, "arches": set(), "container": None})
        g.setdefault("events", []).append(
            {
                "reason": ev.get("reason"),
                "count": ev.get("count") or ev.get("deprecatedCount") or (ev.get("series") or {}).get("count") or 1,
                "message": msg,
                "object": inv.get("name"),
                # core/v1 first/last timestamps; events/v1 keeps them as deprecated* or eventTime/series.
                "firstTimestamp": ev.get("firstTimestamp") or ev.get("deprecatedFirstTimestamp") or ev.get("eventTime"),
                "lastTimestamp": ev.get("lastTimestamp")
                or ev.get("deprecatedLastTimestamp")
                or (ev.get("series") or {}).get("lastObservedTime")
                or ev.get("eventTime"),
            }
        )
    plugin_pools = _plugin_pools(profile)
    findings = []
    for ((kind, ns, name), image), g in sorted(groups.items()):
        objs = [ObjRef(kind, name, ns or None)]
        arches = sorted(g["arches"])
        evidence: dict[str, Any] = {"image": image}
        if g.get("imageID"):
            evidence["status.containerStatuses[].imageID"] = g["imageID"]
        if arches:
            evidence["nodes: kubernetes.io/arch"] = arches
        evidence["failing pods"] = len(g["pods"])
        for pod_name, hits in list(g["pods"].items())[:3]:
            for k, v in hits.items():
                evidence[f"pod {pod_name}: {k}"] = v
        if g.get("events"):
            evidence["events"] = g["events"][:MAX_EVIDENCE_ITEMS]
        on = f" on {'/'.join(arches)} nodes" if arches else ""
        findings.append(
            Finding(
                RULE,
                Severity.critical,
                objs,
                f"{kind} {ns + '/' if ns else ''}{name}: image {image or '(unknown)'} fails with 'exec "
                "format "
                f"error'{on}: the binary was built for another CPU architecture (typically a mirrored "
                "image that "
                "resolved to a single-architecture manifest).",
                evidence,
                f"Use an image (or index) that includes linux/{'+'.join(arches) or '<node arch>'}, or pin the "
                "per-architecture digest. Mirror the whole index, not the one platform the mirror resolved: "
                f"`skopeo copy --all docker://SOURCE docker://{image or 'IMAGE'}` then check it: "
                f"`fabricguard doctor --registry {image.split('/', 1)[0] if '/' in image else 'REGISTRY'}`",
                pools=plugin_pools.get((ns, name), []),
            )
        )
    return findings


def _required_arches(snapshot: Snapshot, profile: PlatformProfile | None) -> dict[str, dict[str, Any]]:
    """For each image: the node architectures it runs on or must run on, and the objects that use it."""
    out: dict[str, dict[str, Any]] = {}

    def add(image: str, arch: str | None, ref: ObjRef) -> None:
        if not image or not arch:
            return
        entry = out.setdefault(image, {"arches": set(), "objects": {}})
        entry["arches"].add(arch)
        entry["objects"][ref] = None

    for pod in snapshot.pods:
        node = snapshot.node_by_name.get((pod.get("spec") or {}).get("nodeName", ""))
        arch = node_arch(node)
        if not arch:
            continue
        kind, ns, name = owner_key(pod)
        ref = ObjRef(kind, name, ns or None)
        spec = pod.get("spec") or {}
        for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
            add(c.get("image", ""), arch, ref)
    members = pool_nodes(snapshot, profile)
    for ds in snapshot.daemonsets:
        tmpl = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
        selector = tmpl.get("nodeSelector") or {}
        meta = ds.get("metadata") or {}
        ref = ObjRef("DaemonSet", meta.get("name", ""), meta.get("namespace"))
        arches = {
            a
            for n in snapshot.nodes
            if selector_matches(n["metadata"].get("labels") or {}, selector)
            if (a := node_arch(n))
        }
        # A device plugin must also run on its pools' nodes, whatever its selector says today.
        for p in fabric_pools(profile):
            dp = p.fabric.fabric_daemonset
            if dp and (dp.namespace, dp.daemonSet) == (meta.get("namespace"), meta.get("name")):
                arches |= {a for n in members.get(p.name, []) if (a := node_arch(n))}
        for c in (tmpl.get("containers") or []) + (tmpl.get("initContainers") or []):
            for a in arches:
                add(c.get("image", ""), a, ref)
    return out


def images_on_hosts(snapshot: Snapshot, profile: PlatformProfile | None, hosts: list[str]) -> list[str]:
    """The images to ask the registries on ``hosts`` about: those with a node architecture to satisfy."""
    return sorted(image for image in _required_arches(snapshot, profile) if parse_reference(image).registry in hosts)


def registry_rule(
    platforms: Mapping[str, list[str]],
) -> Callable[[Snapshot, PlatformProfile | None, datetime], list[Finding]]:
    """A rule that judges each image against the ``os/arch`` platforms its registry offers.

    ``platforms`` maps an image reference to what the registry answered (``["linux/amd64"]``); the I/O
    edge (``fabricguard doctor --registry``) asks the registry before the rules run, so the rule itself
    stays pure. Images the registry was not asked about, or could not answer for, are not judged.
    """

    def registry_image_platforms(snapshot: Snapshot, profile: PlatformProfile | None, now: datetime) -> list[Finding]:
        del now
        findings = []
        plugin_pools = _plugin_pools(profile)
        for image, entry in sorted(_required_arches(snapshot, profile).items()):
            if image not in platforms:
                continue
            offered_list = platforms[image]
            offered = {p.split("/")[1] for p in offered_list if p.startswith("linux/") and "/" in p}
            missing = sorted(entry["arches"] - offered)
            if not missing:
                continue
            objs = sorted(entry["objects"], key=str)
            pools = sorted({pn for o in objs for pn in plugin_pools.get((o.namespace or "", o.name), [])})
            kind = "index" if len(offered_list) > 1 else "single-architecture manifest"
            findings.append(
                Finding(
                    RULE,
                    Severity.critical,
                    objs,
                    f"Image {image} resolves to a {kind} offering "
                    f"{', '.join(offered_list) or 'no platform'}, but it "
                    f"must run on {', '.join('linux/' + a for a in sorted(entry['arches']))} nodes: "
                    f"linux/{', linux/'.join(missing)} will fail with 'exec format error'.",
                    {
                        "image": image,
                        "registry platforms": offered_list,
                        "nodes: kubernetes.io/arch": sorted(entry["arches"]),
                    },
                    "Mirror the complete multi-architecture index (not one platform's manifest), or "
                    "point the "
                    f"workload at an image built for linux/{', linux/'.join(missing)}.",
                    pools=pools,
                )
            )
        return findings

    return registry_image_platforms
