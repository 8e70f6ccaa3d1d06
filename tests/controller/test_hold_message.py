"""The held Workload's check message (what ``kubectl describe workload`` shows) within Kueue's 1,024 characters
the gate writes: cause first, each reason whole or left out, the same rule told once, and always where the
rest is (``kubectl describe fabricvalidation <pool>``)."""

from __future__ import annotations

import re

from fabricguard.controller.canaries import PoolState
from fabricguard.controller.gate import MAX_MESSAGE
from fabricguard.controller.rootcause import causes_of, hold_message
from fabricguard.doctor.model import Finding, ObjRef, Severity

PSA = ("pod creation refused: pods \"fg-canary-gh200-roce-abc-workers-0-0\" is forbidden: violates PodSecurity "
       "\"baseline:latest\": hostPath volumes (volume \"lustre\"), privileged (container \"probe\" must not set "
       "securityContext.privileged=true)")


def _finding(rule: str, kind: str, name: str, message: str) -> Finding:
    return Finding(rule, Severity.critical, [ObjRef(kind, name, "network-operator")], message, {}, "fix it",
                   pools=["gh200-roce"])


def _incident_findings(extra: int) -> list[Finding]:
    out = [
        _finding("daemonset-never-ready", "DaemonSet", "rdma-shared-dp-ds",
                 "DaemonSet network-operator/rdma-shared-dp-ds never ready in 271 days: it wants 6 pods, none is "
                 "ready and none of its 6 pods in the snapshot has ever been ready. The age is the DaemonSet's, "
                 "not its pods': autoscaled nodes start fresh pods, so pod ages and restart counts make a failure "
                 "this old look recent."),
        _finding("image-arch-mismatch", "DaemonSet", "rdma-shared-dp-ds",
                 "DaemonSet network-operator/rdma-shared-dp-ds: image registry.corp.example.com/mirror/mellanox/"
                 "k8s-rdma-shared-dev-plugin:v1.5.2 fails with 'exec format error' on arm64 nodes: the binary was "
                 "built for another CPU architecture. It resolved to a single-architecture manifest."),
    ]
    out += [_finding("network-mapping-stale", "NetworkAttachmentDefinition", f"net-{i}",
                     f"pool gh200-roce attaches network network-operator/net-{i}, but no NetworkAttachmentDefinition "
                     "of that name exists: pods that ask for it fail to start.") for i in range(extra)]
    out += [_finding(f"rule-{i}", "Node", f"n-{i}", f"cause number {i} is described in a sentence of its own that "
                     "runs long enough to matter for the budget of the message.") for i in range(extra)]
    return out


def _state(findings: list[Finding], message: str = PSA) -> PoolState:
    s = PoolState("gh200-roce", True, False, "not-created", message)
    s.causes = causes_of(findings)
    return s


def _sentences(msg: str) -> list[str]:
    return [p for p in re.split(r"; | \| | — ", msg) if p]


def test_many_causes_fit_cause_first_each_whole_with_the_pointer() -> None:
    findings = _incident_findings(12)
    s = _state(findings)
    msg = hold_message([s], MAX_MESSAGE)
    assert len(msg) <= MAX_MESSAGE
    assert msg.startswith("fabricguard: held: pool gh200-roce canary not-created; cause: image-arch-mismatch: ")
    assert msg.endswith("kubectl describe fabricvalidation gh200-roce")
    # Every reason shown is whole: it is one of the causes or one of the canary's own parts, verbatim.
    whole = {f"cause: {c}" for c in s.causes} | {p for p in PSA.split("; ")}
    shown = [p for p in _sentences(msg.removeprefix("fabricguard: "))
             if not p.startswith(("held:", "kubectl describe", "the runs")) and "more reason(s)" not in p]
    assert shown and all(p in whole for p in shown), [p for p in shown if p not in whole]
    assert "…" not in msg
    # The same rule on 12 objects is told once.
    assert msg.count("network-mapping-stale") <= 1
    assert "more reason(s)" in msg
    assert PSA in msg, "what the canary saw survives many causes"


def test_the_decisive_refusal_is_not_lost_at_the_tail() -> None:
    """No doctor finding: the canary's own refusal (Pod Security) is the cause, and it is kept whole."""
    msg = hold_message([_state([])], MAX_MESSAGE)
    assert PSA in msg and len(msg) <= MAX_MESSAGE
    assert msg.endswith("the runs and every finding: kubectl describe fabricvalidation gh200-roce")


def test_two_pools_each_keep_their_head_and_pointer() -> None:
    a, b = _state(_incident_findings(20)), _state(_incident_findings(20))
    b.pool = "h100-ib"
    msg = hold_message([a, b], MAX_MESSAGE)
    assert len(msg) <= MAX_MESSAGE
    assert "held: pool gh200-roce" in msg and "held: pool h100-ib" in msg
    assert msg.endswith("kubectl describe fabricvalidation gh200-roce; kubectl describe fabricvalidation h100-ib")


def test_one_reason_longer_than_the_limit_is_cut_at_a_word_and_still_points_on() -> None:
    msg = hold_message([_state([], "word " * 400)], 300)
    assert len(msg) <= 300 and msg.endswith("kubectl describe fabricvalidation gh200-roce")
    assert "held: pool gh200-roce" in msg
