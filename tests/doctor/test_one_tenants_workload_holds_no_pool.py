"""A multi-node job running without the fabric is one tenant's mistake: the doctor reports it, and it must never
hold the pool at the Kueue gate for everyone else, whatever kind runs it. Before fabricguard.kinds, a
LeaderWorkerSet (the same pods as a JobSet, grouped by another label) held the whole pool, because the
root cause's list of workload kinds and the workload-identity list of labels disagreed."""

from __future__ import annotations

import copy

import pytest
from doctor_support import snap

from fabricguard import kinds, names
from fabricguard.controller.rootcause import critical_by_pool
from fabricguard.doctor.model import Severity
from fabricguard.doctor.rules.fabric import fabric_request_missing
from fabricguard.workload_identity import KIND_OF_LABEL

# The pod label each kind's controller sets, as the doctor groups running pods by it.
LABELS = {label: kind for label, kind in KIND_OF_LABEL.items() if label != names.LABEL_JOB}


@pytest.mark.parametrize("label", sorted(LABELS), ids=lambda k: LABELS[k] + ":" + k)
def test_a_workload_of_any_kind_without_fabric_is_reported_and_holds_nothing(label, prod_lists, prod_profile, now):
    lists = copy.deepcopy(prod_lists)
    for p in lists["pods"]["items"]:
        if p["metadata"]["namespace"] == "ml-training":
            p["metadata"]["labels"] = {label: "qwen14b-sft", "app": "sft"}
    findings = fabric_request_missing(snap(lists), prod_profile, now)
    [f] = findings
    assert f.severity is Severity.critical and f.objects[0].kind == LABELS[label]
    assert kinds.is_workload(f.objects[0].kind)
    assert critical_by_pool(findings) == {}, f"a {LABELS[label]} without fabric held its pool"


def test_every_kind_the_registry_admits_is_a_workload_to_the_root_cause() -> None:
    for k in kinds.KINDS:
        assert kinds.is_workload(k.kind)
    for kind in set(KIND_OF_LABEL.values()):
        assert kinds.is_workload(kind), f"{kind} names a workload by its pods' label but the root cause treats " \
                                        "it as infrastructure"
    assert not kinds.is_workload("DaemonSet") and not kinds.is_workload("Node")
