"""Every node proven, the bad one found: pair planning, bisection and quarantine as pure decisions.

A pool canary proves that *some* path through a pool works; failures live in nodes and links. Here each node of
a pool with a ``proof`` goal is proven by a two-node pair test (NCCL over the pool's fabric) within
``proof.every``; a failing pair is re-tested against known-good nodes until the bad node is named; a convicted
node is quarantined (a taint of ours, never a pool hold) within a budget and behind a breaker.

Pure: observed facts (:class:`NodeFacts`, finished :class:`PairResult` s, the previous :class:`ProofState`) and
a clock in, a :class:`Decision` out. ``controller/pairs.py`` turns JobSets, pods and Lustre files into these
facts and the decision into actions.

The rules, each one function:

* :func:`held_elsewhere` -- a node another stack holds (a cordon, NVSentinel, the EKS node monitoring agent,
  GKE maintenance, HyperPod, SUNK) is neither tested nor blamed;
* :func:`judge_pair` -- bisection: a failed pair blames only a node whose partner was known-good; a node is
  convicted once it failed with two different partners, the later one known-good. One failed pair never
  convicts both (a pair of two unproven nodes only makes both suspects, each then re-tested with a good node);
* :func:`plan_pairs` -- lifecycle nodes, then suspects, then quarantined nodes due a re-test, then nodes never
  proven, then the stalest; idle nodes only; partners by topology (alternating intra- and cross-block links) or
  at random; within the pool's GPU-hour budget per UTC day and ``maxConcurrent``;
* :func:`quarantine` -- convictions become taints within ``quarantine`` (N or P% at once, never leaving fewer
  healthy nodes than the largest admitted gang), counted by ``fabricguard.breaker``'s budget: over it the breaker
  opens and latches, nothing more is quarantined, and the alert fires.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from fabricguard import breaker, objects, proofmark, times
from fabricguard.probes.bw import SlowRail
from fabricguard.profile.model import Proof

# A node's standing in the pool's proof table.
NodeStateName = Literal["proven", "due", "changed", "unproven", "suspect", "convicted", "quarantined", "held",
                        "new", "timed-out", "not-ready", "busy"]
PairPurpose = Literal["coverage", "bisect", "lifecycle", "retest"]
# Outcomes of a pair test that say something about the two nodes' path; the others say only that no test ran.
BAD_OUTCOMES = frozenset({"failed", "fallback", "degraded"})
NO_EVIDENCE = frozenset({"unschedulable", "not-created", "skipped", "preempted", "lost"})

MAX_FAILURES_KEPT = 4
MAX_RAILS_KEPT = 8
DUE_FRACTION = 0.8  # a proof older than this share of ``every`` is renewed, so it never lapses while waiting

# Holds other stacks publish (fleet-health-2026.md, section 3). A node carrying one is skipped, never blamed.
FOREIGN_TAINT_PREFIXES = (
    "nvsentinel.dgxc.nvidia.com/",  # NVSentinel quarantine and NVCRE certification failures
    "aiinfra/nccl-healthcheck",  # Google's Cluster Health Scanner
    "sagemaker.amazonaws.com/",  # HyperPod
    "sunk.coreweave.com/lock",  # CoreWeave SUNK
    "node.kubernetes.io/",  # the node lifecycle controller (unreachable, not-ready, out-of-service, ...)
    "ToBeDeletedByClusterAutoscaler",
)
FOREIGN_FALSE_CONDITIONS = ("AcceleratedHardwareReady", "NetworkingReady", "StorageReady", "KernelReady",
                            "ContainerRuntimeReady")  # the EKS node monitoring agent
FOREIGN_TRUE_CONDITIONS = ("SlurmCordon",)  # SUNK's drain
FOREIGN_ANNOTATIONS = ("quarantineHealthEvent",)  # NVSentinel's fault-quarantine annotation (key suffix)
FOREIGN_LABELS = {
    "cloud.google.com/scheduled-maintenance-time": None,  # GKE: maintenance scheduled (any value)
    "sagemaker.amazonaws.com/node-health-status": "Schedulable",  # HyperPod: anything but Schedulable
}


@dataclass(frozen=True)
class NodeFacts:
    """What the pass observed about one node of the pool."""

    name: str
    block: str | None = None  # the pool's coarsest topology label's value
    ready: bool = True
    idle: bool = True  # no live pod requests its GPUs
    held: str | None = None  # why another stack holds it (see :func:`held_elsewhere`), None when not held
    quarantined: bool = False  # carries fabricguard's quarantine taint
    bootstrapping: bool = False  # carries the readiness taint (new, or back from repair)
    fabric_ready: bool | None = None  # the agent's FabricReady (None: not reported)
    joined: datetime | None = None  # creationTimestamp
    # What a proof rests on: the reproveOnLabels values and the kernel (``KERNEL_KEY``). A change since the last
    # proof takes the node out of "proven" until a pair test proves it again.
    labels: dict[str, str] = field(default_factory=dict)


KERNEL_KEY = "nodeInfo.kernelVersion"  # a new kernel means a reboot and a rebuilt driver stack (DKMS, MOFED)


@dataclass(frozen=True)
class PairResult:
    """A finished pair test: its run name, its two nodes (order kept), outcome, busbw and when."""

    name: str
    nodes: tuple[str, str]
    outcome: str
    finished: datetime
    purpose: str = "coverage"
    busbw: float | None = None
    message: str = ""
    gpu_hours: float = 0.0
    rails: list[SlowRail] = field(default_factory=list)  # rails that ran slow alone (each names its NIC per node)


@dataclass
class NodeProof:
    """One row of the pool's proof table (``FabricValidation.status.proof.nodes``)."""

    node: str
    state: str = "unproven"
    lastProven: str | None = None
    pair: str | None = None
    partner: str | None = None
    busbwGBps: float | None = None
    link: str | None = None  # intra | cross: the block relation of the proving pair
    since: str | None = None  # when the current state began
    failures: list[str] = field(default_factory=list)  # partners of failed pairs since the last pass
    labels: dict[str, str] = field(default_factory=dict)  # reproveOnLabels values at the last proof
    rails: list[str] = field(default_factory=list)  # the bad rails named by its failed pairs ("rail 3 mlx5_3")
    nics: dict[str, str] = field(default_factory=dict)  # those rails' NICs on this node -> PCI address (DRA taints)
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if v not in (None, [], {}, "")}
        d["node"], d["state"] = self.node, self.state
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NodeProof | None:
        if not isinstance(d, dict) or not isinstance(d.get("node"), str):
            return None
        bw = d.get("busbwGBps")
        return cls(
            node=d["node"], state=str(d.get("state") or "unproven"),
            lastProven=_str(d.get("lastProven")), pair=_str(d.get("pair")), partner=_str(d.get("partner")),
            busbwGBps=float(bw) if isinstance(bw, int | float) and not isinstance(bw, bool) else None,
            link=_str(d.get("link")), since=_str(d.get("since")),
            failures=[str(f) for f in d.get("failures") or () if isinstance(f, str)][:MAX_FAILURES_KEPT],
            labels={str(k): str(v) for k, v in (d.get("labels") or {}).items()}
            if isinstance(d.get("labels"), dict) else {},
            rails=[str(r)[:80] for r in d.get("rails") or () if isinstance(r, str)][:MAX_RAILS_KEPT],
            nics={str(k)[:64]: str(v)[:64] for k, v in list((d.get("nics") or {}).items())[:MAX_RAILS_KEPT]}
            if isinstance(d.get("nics"), dict) else {},
            message=str(d.get("message") or "")[:300],
        )


def _str(v: Any) -> str | None:
    return str(v) if isinstance(v, str) and v else None


@dataclass
class ActivePair:
    name: str
    nodes: tuple[str, str]
    purpose: str
    started: str
    gpuHours: float  # charged while it runs (the pair's budgeted duration)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "nodes": list(self.nodes), "purpose": self.purpose, "started": self.started,
                "gpuHours": round(self.gpuHours, 4)}

    @classmethod
    def from_dict(cls, d: Any) -> ActivePair | None:
        if not isinstance(d, dict) or not isinstance(d.get("name"), str):
            return None
        ns = d.get("nodes")
        if not (isinstance(ns, list) and len(ns) == 2 and all(isinstance(n, str) for n in ns)):
            return None
        gh = d.get("gpuHours")
        return cls(d["name"], (ns[0], ns[1]), str(d.get("purpose") or "coverage"), str(d.get("started") or ""),
                   float(gh) if isinstance(gh, int | float) and not isinstance(gh, bool) else 0.0)


@dataclass
class ProofState:
    """The pool's proof state as ``FabricValidation.status.proof`` keeps it."""

    nodes: dict[str, NodeProof] = field(default_factory=dict)
    active: list[ActivePair] = field(default_factory=list)
    day: str = ""  # the UTC day the spend counts for
    spentGpuHours: float = 0.0
    breaker: breaker.BreakerState = field(default_factory=breaker.BreakerState)
    failing: dict[str, str] = field(default_factory=dict)  # node -> when it became suspect (the breaker's input)
    recent: list[str] = field(default_factory=list)  # outcomes of the latest judged pairs, newest first

    @classmethod
    def from_dict(cls, d: Any) -> ProofState:
        if not isinstance(d, dict):
            return cls()
        rows = [NodeProof.from_dict(r) for r in d.get("nodes") or () if isinstance(r, dict)]
        active = [ActivePair.from_dict(a) for a in d.get("active") or ()]
        spent = d.get("spentGpuHours")
        conv = d.get("failing")
        return cls(
            nodes={r.node: r for r in rows if r is not None},
            active=[a for a in active if a is not None],
            day=str(d.get("day") or ""),
            spentGpuHours=float(spent) if isinstance(spent, int | float) and not isinstance(spent, bool) else 0.0,
            breaker=breaker.BreakerState.from_dict(d.get("breaker")),
            failing={str(k): str(v) for k, v in conv.items()} if isinstance(conv, dict) else {},
            recent=[str(x) for x in d.get("recent") or () if isinstance(x, str)][:RECENT],
        )

    def to_dict(self, budget: float) -> dict[str, Any]:
        return {
            "nodes": [self.nodes[n].to_dict() for n in sorted(self.nodes)],
            "active": [a.to_dict() for a in self.active],
            "day": self.day,
            "spentGpuHours": round(self.spentGpuHours, 4),
            "budgetGpuHours": round(budget, 4),
            "breaker": {"check": BREAKER_CHECK, **self.breaker.to_dict()},
            "failing": dict(sorted(self.failing.items())) or None,
            "recent": self.recent or None,
        }


BREAKER_CHECK = "node-quarantine"  # the quarantine breaker's name in the FabricValidation's status
RECENT = 16  # judged pair outcomes kept
ALL_FAIL = 6  # this many coverage pairs in a row failing: every pair fails, the pool itself is broken


@dataclass(frozen=True)
class PlannedPair:
    name: str
    nodes: tuple[str, str]
    purpose: str
    tolerate_bootstrap: bool = False  # a lifecycle node still carries the readiness taint
    tolerate_quarantine: bool = False  # a re-test of a quarantined node


@dataclass
class Decision:
    state: ProofState
    start: list[PlannedPair] = field(default_factory=list)
    taint: list[str] = field(default_factory=list)  # quarantine these nodes
    untaint: list[str] = field(default_factory=list)  # release these (our taint only)
    events: list[tuple[str, str, str, bool]] = field(default_factory=list)  # (node, reason, message, warning)
    withheld: list[str] = field(default_factory=list)  # convicted but not quarantined (budget, gang, breaker)
    broken: str = ""  # non-empty: the pool itself is broken (the Kueue check holds), and why
    budget_gpu_hours: float = 0.0
    notes: list[str] = field(default_factory=list)  # bounds hit this pass (budget spent, no partner)

    @property
    def quarantined(self) -> list[str]:
        return sorted(n for n, r in self.state.nodes.items() if r.state == "quarantined")

    @property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.state.nodes.values():
            out[r.state] = out.get(r.state, 0) + 1
        return out


# ------------------------------------------------------------------------------------------- observing


def held_elsewhere(node: dict[str, Any], own_taints: tuple[str, ...]) -> str | None:
    """Why another stack holds this Node (skip it, blame nothing on it), or None. Taints of ours do not count."""
    spec = node.get("spec") or {}
    if spec.get("unschedulable"):
        return "cordoned (spec.unschedulable, not by fabricguard)"
    for t in spec.get("taints") or ():
        key = str((t or {}).get("key") or "")
        if key in own_taints:
            continue
        if any(key.startswith(p) for p in FOREIGN_TAINT_PREFIXES):
            return f"taint {key}:{(t or {}).get('effect', '')}"
    for c in objects.conditions_of(node):
        ctype, status = c.get("type"), c.get("status")
        if ctype in FOREIGN_FALSE_CONDITIONS and status == "False":
            return f"condition {ctype}=False ({c.get('reason') or 'no reason'})"
        if ctype in FOREIGN_TRUE_CONDITIONS and status == "True":
            return f"condition {ctype}=True"
    md = node.get("metadata") or {}
    for key in (md.get("annotations") or {}):
        if any(str(key).endswith(a) for a in FOREIGN_ANNOTATIONS):
            return f"annotation {key}"
    labels = md.get("labels") or {}
    for key, ok in FOREIGN_LABELS.items():
        if key in labels and (ok is None or labels[key] != ok):
            return f"label {key}={labels[key]}"
    return None


# ------------------------------------------------------------------------------------------- judging


def _t(text: str | None) -> datetime | None:
    return times.parse_time(text) if text else None


def known_good(row: NodeProof | None, proof: Proof, now: datetime) -> bool:
    """Proven within ``every`` by a passing pair and not under suspicion since."""
    if row is None or row.state not in ("proven", "due"):
        return False
    t = _t(row.lastProven)
    return t is not None and (now - t).total_seconds() <= proof.every_s


def link_of(a: NodeFacts | None, b: NodeFacts | None) -> str | None:
    if a is None or b is None or a.block is None or b.block is None:
        return None
    return "intra" if a.block == b.block else "cross"


def judge_pair(state: ProofState, res: PairResult, facts: dict[str, NodeFacts], proof: Proof,
               now: datetime, events: list[tuple[str, str, str, bool]]) -> list[str]:
    """Fold one finished pair into the table; returns the nodes convicted by it (bisection, module doc)."""
    if res.outcome in NO_EVIDENCE:
        return []
    if res.purpose in ("coverage", "lifecycle"):  # bisections and re-tests of a bad node fail by design
        state.recent = ([res.outcome, *state.recent])[:RECENT]
    when = times.format_time(res.finished)
    rows = [state.nodes.setdefault(n, NodeProof(n)) for n in res.nodes]
    if res.outcome not in BAD_OUTCOMES:
        link = link_of(facts.get(res.nodes[0]), facts.get(res.nodes[1]))
        for row, partner in zip(rows, reversed(res.nodes), strict=True):
            was = row.state
            row.lastProven, row.pair, row.partner, row.busbwGBps, row.link = (
                when, res.name, partner, res.busbw, link)
            row.failures, row.rails, row.nics = [], [], {}
            state.failing.pop(row.node, None)
            f = facts.get(row.node)
            row.labels = dict(f.labels) if f is not None else {}
            if was == "quarantined":
                continue  # released by quarantine() once the pass with a good node is seen (it needs the taint)
            row.state, row.since, row.message = "proven", when, ""
            if was in ("suspect", "convicted"):
                events.append((row.node, "FabricProven", f"cleared: pair {res.name} with {partner} passed "
                               f"({_bw(res.busbw)})", False))
        return []
    good = [known_good(r, proof, now) for r in rows]
    convicted: list[str] = []
    for i, row in enumerate(rows):
        partner = res.nodes[1 - i]
        if good[i] and not good[1 - i]:
            continue  # the unproven or suspect partner is the one this failure points at
        row.rails = _rails_of(row, res)
        pcis = {r.nics[row.node]: r.pcis[row.node] for r in res.rails if r.nics.get(row.node) and r.pcis.get(row.node)}
        row.nics = {n: p for n, p in {**row.nics, **pcis}.items() if any(s.endswith(f" {n}") for s in row.rails)}
        if row.state == "quarantined":
            row.since, row.message = when, f"re-test {res.name} with {partner}: {res.outcome}"
            continue
        if partner not in row.failures:
            row.failures = ([*row.failures, partner])[-MAX_FAILURES_KEPT:]
        blame_ok = good[1 - i]  # this failure was with a node known to be good
        if blame_ok and len(row.failures) >= 2:
            row.state, row.since = "convicted", when
            row.message = (f"failed pair tests with {', '.join(row.failures)}{_rail_words(row)} ({res.name}: "
                           f"{res.outcome}: {res.message})")[:300]
            convicted.append(row.node)
            state.failing.setdefault(row.node, when)
        elif row.state != "convicted":
            row.state, row.since = "suspect", when
            state.failing.setdefault(row.node, when)
            row.message = f"pair {res.name} with {partner}{_rail_words(row)}: {res.outcome}: {res.message}"[:300]
            events.append((row.node, "FabricSuspect", f"pair test {res.name} with {partner} {res.outcome} "
                           f"({_bw(res.busbw)}){_rail_words(row)}: re-testing against a known-good node", True))
    return convicted


def _rails_of(row: NodeProof, res: PairResult) -> list[str]:
    """This node's rails that ran slow alone in ``res``, by its NIC there. A rail named by the node's earlier
    failures too is kept alone (two pairs with different partners agreeing on a rail name it); otherwise the
    latest naming stands, and a failure that names no rail keeps what earlier ones named."""
    names = [f"rail {r.rail} {r.nics.get(row.node) or '(NIC unknown)'}" for r in res.rails][:MAX_RAILS_KEPT]
    agreed = [n for n in names if n in row.rails]
    return agreed or names or row.rails


def _rail_words(row: NodeProof) -> str:
    return f"; bad rail: {', '.join(row.rails)}" if row.rails else ""


_bw = proofmark.busbw_text


# ------------------------------------------------------------------------------------------- planning


def changed_since_proof(row: NodeProof | None, f: NodeFacts) -> list[str]:
    """What changed on the node since its last proof (``key: was -> now``), each a reason it is no longer proven.
    A key the node no longer reports is not a change (a labeller restarting is not a new driver)."""
    if row is None or not row.lastProven:
        return []
    return [f"{k}: {v} -> {f.labels[k]}" for k, v in sorted(row.labels.items()) if k in f.labels and f.labels[k] != v]


def invalidate_changed(state: ProofState, facts: dict[str, NodeFacts], now: datetime,
                       events: list[tuple[str, str, str, bool]]) -> None:
    """A proven node whose driver, firmware or kernel changed leaves "proven" (FabricProven=False, not a known-good
    partner, not counted as covered) until a pair test with a known-good node proves it again. Marked before
    planning, so the same pass neither picks it as a known-good partner nor counts it; the Warning Event once, when
    it leaves "proven"."""
    for n, f in facts.items():
        row = state.nodes.get(n)
        if row is None or row.state in ("suspect", "convicted", "quarantined", "changed"):
            continue
        changes = changed_since_proof(row, f)
        if not changes:
            continue
        if row.state in ("proven", "due"):
            events.append((n, "FabricProofInvalidated", f"{'; '.join(changes)} since its last pair test "
                           f"({row.lastProven}): no longer proven until a pair test with a known-good node "
                           "passes", True))
        row.state, row.since = "changed", times.format_time(now)
        row.message = _changed_message(row, changes)


def _changed_message(row: NodeProof, changes: list[str]) -> str:
    return f"changed since proven at {row.lastProven}: {'; '.join(changes)}; waiting for its re-proof"[:300]



def _due_order(row: NodeProof | None, f: NodeFacts, proof: Proof, now: datetime) -> tuple[int, float] | None:
    """Priority of a node that wants a pair test (lower first), or None when it does not."""
    state = row.state if row else "unproven"
    if f.bootstrapping:
        if row is not None and row.lastProven and f.joined and (_t(row.lastProven) or now) >= f.joined:
            return None  # proven since it joined; the readiness taint is the NodeReadinessRule's to lift
        return (0, 0.0) if f.fabric_ready is not False else None  # local facts first (the agent)
    if state == "suspect":
        return (1, 0.0)
    if state == "quarantined" or state == "convicted":
        return None  # re-tests are planned separately (after retestAfter)
    if state == "changed":
        return (0, 1.0)  # its driver, firmware or kernel changed since it was proven: re-proven first
    if row is None or row.lastProven is None:
        return (3, 0.0)
    age = (now - (_t(row.lastProven) or now)).total_seconds()
    if age >= proof.every_s * DUE_FRACTION:
        return (4, -age)
    return None


def plan_pairs(state: ProofState, facts: dict[str, NodeFacts], proof: Proof, gpus: int, budget: float,
               now: datetime, name_of: Any, seed: int = 0) -> tuple[list[PlannedPair], list[str]]:
    """The pairs to start this pass (module doc), and the bounds that stopped more from starting."""
    notes: list[str] = []
    busy = {n for a in state.active for n in a.nodes}
    pair_cost = 2 * gpus * proof.pair_s / 3600
    committed = state.spentGpuHours + sum(a.gpuHours for a in state.active)
    slots = proof.maxConcurrent - len(state.active)
    free = {n: f for n, f in facts.items() if n not in busy and f.ready and f.held is None
            and (f.idle or f.bootstrapping)}
    retest_s = times.duration_seconds(proof.quarantine.retestAfter)

    def good(n: str) -> bool:
        f = free.get(n)
        return (f is not None and not f.quarantined and not f.bootstrapping
                and known_good(state.nodes.get(n), proof, now))

    want: list[tuple[tuple[int, float], str, str]] = []
    for n, f in free.items():
        row = state.nodes.get(n)
        if f.quarantined:
            since = _t(row.since) if row else None
            if since is None or (now - since).total_seconds() >= retest_s:
                want.append(((2, 0.0), n, "retest"))
            continue
        order = _due_order(row, f, proof, now)
        if order is not None:
            purpose = {0: "lifecycle", 1: "bisect"}.get(order[0], "coverage")
            want.append((order, n, purpose))
    want.sort()
    rng = random.Random(seed)
    taken: set[str] = set()
    out: list[PlannedPair] = []
    for _order, n, purpose in want:
        if len(out) >= slots:
            notes.append(f"maxConcurrent {proof.maxConcurrent} pair tests running")
            break
        if n in taken:
            continue
        if committed + pair_cost > budget + 1e-9:
            notes.append(f"GPU-hour budget spent: {committed:.1f} of {budget:.1f} GPU-h today")
            break
        row = state.nodes.get(n)
        if purpose == "coverage":
            cands = [m for m in free if m != n and m not in taken and not free[m].quarantined
                     and not free[m].bootstrapping
                     and (state.nodes.get(m) is None or state.nodes[m].state not in ("suspect", "convicted"))]
        else:
            # Lifecycle, bisection and re-tests need a known-good partner, not one this node already failed with.
            failed_with = set(row.failures) if row else set()
            cands = [m for m in free if m != n and m not in taken and good(m) and m not in failed_with]
        if not cands:
            notes.append(f"no idle {'known-good ' if purpose != 'coverage' else ''}partner for {n} ({purpose})")
            continue
        partner = _choose(n, cands, state, facts, proof, now, rng, len(out))
        taken |= {n, partner}
        committed += pair_cost
        out.append(PlannedPair(name_of(len(out)), (n, partner), purpose,
                               tolerate_bootstrap=facts[n].bootstrapping,
                               tolerate_quarantine=facts[n].quarantined))
    return out, list(dict.fromkeys(notes))


def _choose(n: str, cands: list[str], state: ProofState, facts: dict[str, NodeFacts], proof: Proof,
            now: datetime, rng: random.Random, k: int) -> str:
    """A partner for ``n``: topology alternates the node's last link kind (a node never proven: every other pair
    of the pass crosses blocks), so each window proves both intra-block and cross-block (spine) links, preferring
    partners that are due themselves (one test proves both); random is any candidate."""
    if proof.pairs == "random":
        return rng.choice(sorted(cands))
    row = state.nodes.get(n)
    last = row.link if row is not None else None
    want = {"intra": "cross", "cross": "intra"}.get(last or "", "cross" if k % 2 else "intra")

    def key(m: str) -> tuple[int, int, float, str]:
        link = link_of(facts.get(n), facts.get(m))
        other = state.nodes.get(m)
        due = _due_order(other, facts[m], proof, now) is not None
        proven = _t(other.lastProven) if other else None
        age = (now - proven).total_seconds() if proven else math.inf
        return (0 if link in (want, None) else 1, 0 if due else 1, -age, m)

    return min(cands, key=key)


# ------------------------------------------------------------------------------------------- quarantine


def largest_fit(pool_nodes: int, max_nodes: int | None, max_percent: float) -> int:
    """Nodes the quarantine may hold at once: the smaller of maxNodes and maxPercent (at least one)."""
    pct = max(1, math.floor(pool_nodes * max_percent / 100 + 1e-9)) if max_percent > 0 else 0
    return min(pct, max_nodes) if max_nodes is not None else pct


def quarantine(state: ProofState, facts: dict[str, NodeFacts], proof: Proof, largest_gang: int,
               now: datetime, events: list[tuple[str, str, str, bool]], observe: bool = False
               ) -> tuple[list[str], list[str], list[str]]:
    """(taint, untaint, withheld): convictions into taints within the budget and the breaker; passes release.
    ``observe`` (the pool's mode): convictions are named and withheld, nothing is tainted."""
    q = proof.quarantine
    population = len(facts)
    taint: list[str] = []
    untaint: list[str] = []
    withheld: list[str] = []
    # Releases: a quarantined node whose latest pair (a re-test with a known-good node) passed after it was
    # quarantined. Only our taint is removed; whatever else holds the node stays.
    for n, f in facts.items():
        row = state.nodes.get(n)
        if not f.quarantined or row is None:
            continue
        proven, since = _t(row.lastProven), _t(row.since)
        if proven is not None and (since is None or proven > since):
            untaint.append(n)
            row.state, row.since, row.message = "proven", row.lastProven, ""
            state.failing.pop(n, None)
            events.append((n, "FabricReleased", f"re-test {row.pair} with {row.partner} passed "
                           f"({_bw(row.busbwGBps)}): fabricguard's quarantine taint removed", False))
        elif row.state != "quarantined":
            row.state = "quarantined"
    # The breaker counts nodes newly failing (suspect or convicted) within its window against breakerPercent of
    # the pool: one bad node makes at most two suspects, a platform fault makes every tested node one.
    window = times.duration_seconds(q.breakerWindow)
    # At least two: one bad node's first failed pair makes two suspects before bisection clears its partner.
    budget = breaker.Budget(fraction=q.breakerPercent / 100, minimum=2, window_s=window)
    since_map = {n: _t(t) for n, t in state.failing.items()}
    judgement = breaker.judge(budget, population, since_map, now, after=state.breaker.reset_at)
    was_open = state.breaker.open
    state.breaker = breaker.step(state.breaker, judgement, now)
    if state.breaker.open and not was_open:
        events.append(("", "FabricQuarantineBreakerOpen", f"breaker open: {state.breaker.reason} "
                       f"({breaker.name_members(state.breaker.members)}); nothing more is quarantined until a "
                       "person resets it (fabricguard pool coverage --reset-breaker)", True))
    held_now = sum(1 for f in facts.values() if f.quarantined) - len(untaint)
    cap = largest_fit(population, q.maxNodes, q.maxPercent)
    healthy = sum(1 for n, f in facts.items() if f.ready and f.held is None and not f.quarantined
                  and (state.nodes.get(n) is None or state.nodes[n].state != "convicted"))
    for n in sorted(n for n, r in state.nodes.items() if r.state == "convicted" and n in facts):
        f = facts[n]
        if f.quarantined:
            continue
        why = ""
        if observe:
            why = "observe mode (fabricguard reports, never taints)"
        elif state.breaker.open:
            why = f"the quarantine breaker is open ({state.breaker.reason})"
        elif held_now >= cap:
            why = f"{held_now} node(s) already quarantined, the budget is {cap}"
        elif healthy < largest_gang:
            why = f"only {healthy} healthy node(s) would stay, the largest admitted gang needs {largest_gang}"
        if why:
            withheld.append(n)
            state.nodes[n].message = (state.nodes[n].message.split(" [withheld")[0] + f" [withheld: {why}]")[:300]
            continue
        taint.append(n)
        held_now += 1
        row = state.nodes[n]
        row.state, row.since = "quarantined", times.format_time(now)
        events.append((n, "FabricQuarantined", f"quarantined by pair bisection: {row.message}; it stays out "
                       f"until a re-test with a known-good node passes (after {q.retestAfter})", True))
    return taint, untaint, withheld


# ------------------------------------------------------------------------------------------- the pass


def utc_day(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%d")


def decide(previous: ProofState, facts: dict[str, NodeFacts], results: list[PairResult], proof: Proof, *,
           gpus_per_node: int, largest_gang: int, now: datetime, name_of: Any,
           finished_active: set[str] | None = None, observe: bool = False) -> Decision:
    """One pool's proof step (module doc). ``results``: pairs finished since the last pass, each also in
    ``previous.active`` (they are removed from it and charged); ``finished_active``: further active names that
    are over without a result worth judging (gone, preempted: already in ``results`` with no-evidence outcomes)."""
    state = replace(previous, nodes={n: replace(r, failures=list(r.failures), labels=dict(r.labels))
                                     for n, r in previous.nodes.items()},
                    active=list(previous.active), failing=dict(previous.failing), recent=list(previous.recent))
    events: list[tuple[str, str, str, bool]] = []
    day = utc_day(now)
    if state.day != day:
        state.day, state.spentGpuHours = day, 0.0
    done = {r.name for r in results} | (finished_active or set())
    for a in [a for a in state.active if a.name in done]:
        state.active.remove(a)
    for r in sorted(results, key=lambda r: r.finished):
        state.spentGpuHours += r.gpu_hours
        judge_pair(state, r, facts, proof, now, events)
    # Rows for every node of the pool; nodes gone from the pool are dropped from the table.
    for n in list(state.nodes):
        if n not in facts:
            del state.nodes[n]
            state.failing.pop(n, None)
    for n, f in facts.items():
        state.nodes.setdefault(n, NodeProof(n, since=times.format_time(f.joined) if f.joined else None))
    invalidate_changed(state, facts, now, events)
    gpus = proof.gpusPerPod or gpus_per_node
    budget = proof.budget_gpu_hours(len(facts), gpus_per_node)
    taint, untaint, withheld = quarantine(state, facts, proof, largest_gang, now, events, observe)
    for n in taint:
        facts = {**facts, n: replace(facts[n], quarantined=True)}
    for n in untaint:
        facts = {**facts, n: replace(facts[n], quarantined=False)}
    start, notes = plan_pairs(state, facts, proof, gpus, budget, now, name_of,
                              seed=int(now.timestamp()) // 3600)
    for p in start:
        state.active.append(ActivePair(p.name, p.nodes, p.purpose, times.format_time(now),
                                       2 * gpus * proof.pair_s / 3600))
    _label_states(state, facts, proof, now, events)
    healthy = sum(1 for n, f in facts.items() if f.ready and f.held is None and not f.quarantined
                  and state.nodes[n].state not in ("convicted", "quarantined"))
    broken = ""
    if largest_gang and healthy < largest_gang:
        broken = (f"only {healthy} healthy node(s), fewer than the largest admitted gang ({largest_gang} nodes)")
    elif len(state.recent) >= ALL_FAIL and all(o in BAD_OUTCOMES for o in state.recent[:ALL_FAIL]):
        broken = (f"the last {ALL_FAIL} coverage pair tests all failed ({', '.join(state.recent[:3])}, ...): a "
                  "platform fault, not one node")
    return Decision(state, start, taint, untaint, events, withheld, broken, budget, notes)


def _label_states(state: ProofState, facts: dict[str, NodeFacts], proof: Proof, now: datetime,
                  events: list[tuple[str, str, str, bool]]) -> None:
    """The table's states that follow from the facts alone (held, not-ready, new, timed-out, changed, due, busy)."""
    for n, f in facts.items():
        row = state.nodes[n]
        if row.state in ("suspect", "convicted", "quarantined"):
            continue
        if f.held is not None:
            row.state, row.message = "held", f.held
            continue
        if not f.ready:
            row.state, row.message = "not-ready", "Node Ready is not True"
            continue
        proven = _t(row.lastProven)
        if f.bootstrapping and not (proven and f.joined and proven >= f.joined):
            age = (now - f.joined).total_seconds() if f.joined else 0
            if age > proof.lifecycle_timeout_s:
                if row.state != "timed-out":
                    events.append((n, "FabricProofTimedOut", f"joined {int(age)} s ago and not proven by a pair "
                                   f"test within lifecycleTimeout {proof.lifecycleTimeout}; its readiness taint "
                                   "stays", True))
                row.state, row.message = "timed-out", f"not proven within {proof.lifecycleTimeout} of joining"
            else:
                row.state, row.message = "new", "waiting for its lifecycle pair test"
            continue
        changes = changed_since_proof(row, f)
        if changes:  # out of "proven" until re-proven (invalidate_changed); held or not-ready said first
            row.state, row.message = "changed", _changed_message(row, changes)
            if not f.idle:
                row.message = (row.message + "; busy: no idle GPUs for a pair test")[:300]
            continue
        if proven is None:
            row.state = "unproven"
        elif (now - proven).total_seconds() > proof.every_s:
            row.state = "due"
        else:
            row.state = "proven"
        if row.state != "proven" and not f.idle:
            row.message = "busy: no idle GPUs for a pair test"


def coverage(state: ProofState, facts: dict[str, NodeFacts], proof: Proof, now: datetime) -> tuple[int, int]:
    """(proven within ``every``, nodes that count): held, not-ready and named (convicted, quarantined) nodes
    are not counted: coverage asks that every node be proven *or named*."""
    counted = [n for n, f in facts.items() if f.held is None and f.ready
               and (n not in state.nodes or state.nodes[n].state not in ("convicted", "quarantined"))]
    proven = 0
    for n in counted:
        if n in state.nodes and state.nodes[n].state == "changed":
            continue  # proven once, but on a driver, firmware or kernel it no longer runs
        t = _t(state.nodes[n].lastProven) if n in state.nodes else None
        if t is not None and (now - t) <= timedelta(seconds=proof.every_s):
            proven += 1
    return proven, len(counted)
