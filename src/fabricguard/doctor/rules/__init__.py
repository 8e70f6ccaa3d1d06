"""The doctor's rules: pure functions ``(snapshot, profile, now) -> list[Finding]``, each with a stable id.

``RULES`` maps each id to its function and severity; the order is the order of the report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import fabricguard.doctor.rules.agent as agent_rules
from fabricguard.doctor.model import Finding, Severity
from fabricguard.doctor.rules import (
    autoscaler,
    boot,
    daemonsets,
    dra,
    fabric,
    images,
    lustre,
    observe,
    placement,
    proof,
)
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.profile import PlatformProfile

RuleFn = Callable[[Snapshot, PlatformProfile | None, datetime], list[Finding]]


@dataclass(frozen=True)
class Rule:
    id: str
    severity: Severity
    fn: RuleFn
    summary: str
    needs_profile: bool = True


RULES: tuple[Rule, ...] = (
    Rule(
        daemonsets.NEVER_READY,
        Severity.critical,
        daemonsets.daemonset_never_ready,
        "a DaemonSet that wants pods has never had one ready",
        needs_profile=False,
    ),
    Rule(
        daemonsets.NO_NODES,
        Severity.critical,
        daemonsets.daemonset_no_nodes,
        "the pool's device plugin DaemonSet is missing or runs on none of its nodes",
    ),
    Rule(
        agent_rules.SHORT,
        Severity.critical,
        agent_rules.agent_daemonset_short,
        "a readiness agent DaemonSet wants fewer pods than its pool has nodes (0 included)",
    ),
    Rule(
        images.RULE,
        Severity.critical,
        images.exec_format_error,
        "an image built for another CPU architecture ('exec format error')",
        needs_profile=False,
    ),
    Rule(
        fabric.NOT_ADVERTISED,
        Severity.critical,
        fabric.fabric_not_advertised,
        "a fabric-pool node does not advertise the fabric resources",
    ),
    Rule(
        fabric.REQUEST_MISSING,
        Severity.critical,
        fabric.fabric_request_missing,
        "a multi-node GPU workload runs without fabric resources (socket fallback)",
    ),
    Rule(
        dra.CLASS_MISSING,
        Severity.critical,
        dra.deviceclass_missing,
        "a DRA pool's DeviceClass is missing (or does not back the pool's extended resource)",
    ),
    Rule(
        dra.NO_SLICE,
        Severity.critical,
        dra.no_resourceslice,
        "a DRA pool's node has no ResourceSlice from the pool's driver",
    ),
    Rule(
        dra.UNALLOCATED,
        Severity.critical,
        dra.claim_unallocated,
        "a ResourceClaim for the fabric is never allocated (with the scheduler's reason)",
    ),
    Rule(
        dra.DOUBLE_OFFER,
        Severity.critical,
        dra.double_offer,
        "a node offers one resource from a device plugin and through DRA",
    ),
    Rule(
        dra.KUEUE_UNMAPPED,
        Severity.critical,
        dra.kueue_unmapped,
        "a ClusterQueue serves a DRA pool without Kueue deviceClassMappings for its DeviceClass",
    ),
    Rule(
        fabric.TOPOLOGY,
        Severity.warning,
        fabric.topology_mapping_mismatch,
        "a node's topology label is not in the pool's networkMapping",
    ),
    Rule(
        fabric.NOT_GATED,
        Severity.warning,
        fabric.node_not_gated,
        "a schedulable fabric-pool node without FabricReady=True",
    ),
    Rule(
        placement.TOPOLOGY_LABELS,
        Severity.warning,
        placement.topology_labels_missing,
        "a pool's node lacks a label its Kueue Topology needs",
    ),
    Rule(
        placement.MAPPING_STALE,
        Severity.critical,
        placement.network_mapping_stale,
        "a pool's network mapping names a block, network or device its nodes do not have",
    ),
    Rule(
        placement.FLAVOR_NO_NODE,
        Severity.critical,
        placement.flavor_matches_no_node,
        "a Kueue ResourceFlavor selects no node",
        needs_profile=False,
    ),
    Rule(
        placement.FLAVOR_TAINTED,
        Severity.critical,
        placement.flavor_readiness_tainted,
        "a flavor's nodes carry a readiness taint no workload tolerates",
        needs_profile=False,
    ),
    Rule(
        boot.UNTOLERATED,
        Severity.critical,
        boot.daemonset_untolerated_readiness,
        "a DaemonSet fabric nodes need before they are ready does not tolerate the readiness taints",
    ),
    Rule(
        autoscaler.RULE,
        Severity.critical,
        autoscaler.scale_from_zero_blocked,
        "a pool the autoscaler may scale from zero registers nodes with a readiness taint it cannot ignore",
    ),
    Rule(
        proof.BEHIND,
        Severity.warning,
        proof.node_proof_behind,
        "a node of a proof pool not proven by a pair test within proof.every, or named by the controller",
    ),
    Rule(
        lustre.RULE,
        Severity.warning,
        lustre.lustre_client_unhealthy,
        "a node's Lustre client fails its FabricReady checks, or the file system is down for a whole pool",
    ),
    Rule(
        observe.RULE,
        Severity.info,
        observe.enforce_would_have_acted,
        "what enforce would have held or tainted in the last day on a pool that observes",
    ),
)

def run_rules(
    snapshot: Snapshot, profile: PlatformProfile | None, now: datetime, extra: tuple[RuleFn, ...] = ()
) -> list[Finding]:
    findings: list[Finding] = []
    for rule in RULES:
        findings.extend(rule.fn(snapshot, profile, now))
    for fn in extra:
        findings.extend(fn(snapshot, profile, now))
    return findings
