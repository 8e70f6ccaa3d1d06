"""Each pool's blast-radius breakers: one per agent check, so that no mistake of ours closes a whole pool.

For every pool and every check the agents report failing (``agent.condition.failing_checks`` of the stored
``FabricReady``), the pool's ``blastRadius`` budget (``fabricguard.breaker``) counts the nodes that newly
stopped being ``True`` within the window. Past the budget, or when fewer nodes are left ``True`` than the largest
admitted gang needs, fabricguard assumes the fault is its own (a typo in a resource name, an agent image, a driver
path) and the check's breaker opens and stays open until a person resets it (``fabricguard breaker reset``):

- the pool's NodeReadinessRules go ``dryRun`` (NRC stops tainting) and the readiness taints of the nodes whose
  every failing check is behind an open breaker are removed (a JSON patch that tests the Node's
  ``resourceVersion`` and keeps every other taint);
- those nodes no longer count against the pool's standing once a pool canary has passed after the breaker
  opened (``reconcile._canary_passed_after``), so the Kueue check stops holding for that check; until then the
  pool stays held, because a fabric that broke on every node at once looks the same as our own mistake;
- an Event (``FabricBreakerOpen``) on the pool's FabricValidation names the check, the budget and the nodes,
  and ``fabricguard_breaker_open{pool,check}`` turns 1 (a critical alert).

So that NRC never taints more than the budget, the rules already go ``dryRun`` when a check has *spent* its
budget (the next failure would exceed it): the nodes tainted within the budget stay tainted, no further node is
tainted, and one more failure within the window opens the breaker. While the rules are ``dryRun`` (observe mode
too) the controller does NRC's untainting itself: a node ``True`` again loses its readiness taints. Once the
window passes with nothing more failing, the budget is free again and the rules enforce.

The states live in the FabricValidation's ``status.breakers`` (one entry per check), written only when one
changes. ``status.blastBudget`` publishes the pool's node count and budget for the agents that keep their own
taints (``--manage-taints``): they take one of that many taint slots before tainting (``agent/taint_slots.py``),
so that nodes failing within one pass never taint past the budget before a breaker can open. The rules' ``dryRun``
follows the pool's mode and its breakers, and is patched only when the listed rule
differs. Pure: the listed cluster in, actions out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from fabricguard import breaker, names, times
from fabricguard import objects as o
from fabricguard.agent import taint_slots
from fabricguard.agent.condition import failing_checks
from fabricguard.agent.taints import taint_patch
from fabricguard.controller.actions import Action, JsonPatch, MergePatch, event
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.profile.model import PlatformProfile, Pool

BREAKER_EVENT = "FabricBreakerOpen"
NRR_PLURAL = "nodereadinessrules"


@dataclass
class PoolBreakers:
    pool: str
    population: int
    allowed: int
    states: dict[str, breaker.BreakerState] = field(default_factory=dict)  # check -> state
    spent: dict[str, int] = field(default_factory=dict)  # check -> nodes newly failing within the window
    withheld: set[str] = field(default_factory=set)  # nodes whose failures are all behind open breakers
    exhausted: list[str] = field(default_factory=list)  # checks whose budget is spent (one more opens them)
    muted: bool = False  # the pool's NodeReadinessRules are (to be) dryRun: observe, an open breaker, a spent budget

    @property
    def open_checks(self) -> list[str]:
        return sorted(c for c, s in self.states.items() if s.open)


@dataclass
class BlastResult:
    pools: dict[str, PoolBreakers] = field(default_factory=dict)
    actions: list[Action] = field(default_factory=list)
    # pool -> FabricValidation status fields to write (the pass merges them into the pool's one status write)
    fv_status: dict[str, dict[str, Any]] = field(default_factory=dict)


def stored(fv: dict[str, Any] | None) -> dict[str, breaker.BreakerState]:
    """The breakers kept in a FabricValidation's status (``breaker.states_of``, which the agents read too)."""
    return breaker.states_of(fv)


def to_status(states: dict[str, breaker.BreakerState]) -> list[dict[str, Any]]:
    return [{"check": c, **states[c].to_dict()} for c in sorted(states)]


class ResetError(ValueError):
    """A reset that names no breaker: the message lists the pool's breakers."""


def reset_status(fv: dict[str, Any], check: str | None, now: datetime) -> list[dict[str, Any]]:
    """The FabricValidation's ``status.breakers`` after a person's reset of ``check`` (None: every open one).

    Only failures after ``now`` count again: the nodes failing now are acted on (tainted, held) as the person
    decided. A check that is not open is refused (nothing to reset), naming the open ones."""
    states = stored(fv)
    open_now = sorted(c for c, s in states.items() if s.open)
    targets = open_now if check is None else [check]
    if not targets or any(c not in open_now for c in targets):
        pool = o.name_of(fv)
        have = ", ".join(open_now) or "none"
        raise ResetError(f"pool {pool}: no open breaker for check {check!r}; open: {have}" if check
                         else f"pool {pool}: no breaker is open")
    for c in targets:
        states[c] = breaker.reset(states[c], now)
    return to_status(states)


def largest_gang(profile: PlatformProfile, pool: Pool, workloads: list[dict[str, Any]],
                 snapshot: Snapshot | None = None) -> int:
    """Nodes the largest admitted gang on the pool's flavors holds: its pods, one per node (multi-node gangs
    take whole nodes; a smaller gang counts high, which only makes the breaker keener). With ``snapshot`` (whose
    Workloads these are), each Workload's gang is kept while it is the same object."""
    view = partial(_gang, frozenset(profile.canary_flavors(pool)))
    gangs = (snapshot.select(("largest gang", pool.name), workloads, view) if snapshot is not None
             else [(wl, g) for wl in workloads if (g := view(wl))])
    return max((g for _, g in gangs), default=0)


def _gang(flavors: frozenset[str], wl: dict[str, Any]) -> int:
    """The pods of an admitted, unfinished Workload on ``flavors`` (0 when it is not one)."""
    if not o.condition_true(wl, names.WL_ADMITTED) or o.condition_true(wl, names.WL_FINISHED):
        return 0
    psas = ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or ()
    pods = 0
    for psa in psas:
        if not isinstance(psa, dict):
            continue
        if any(str(f) in flavors for f in (psa.get("flavors") or {}).values()):
            count = psa.get("count")
            pods += count if isinstance(count, int) and count > 0 else 1
    return pods


@dataclass
class NodeScan:
    """What the breakers read of one pool's nodes (no clock: an incremental pass keeps it while no node
    changed, controller/incremental.py)."""

    members: list[dict[str, Any]] = field(default_factory=list)
    good: int = 0  # members with FabricReady=True
    failing: dict[str, dict[str, datetime | None]] = field(default_factory=dict)  # check -> node -> since
    node_checks: dict[str, list[str]] = field(default_factory=dict)  # node -> its failing checks


def _scan_view(pool: Pool, n: dict[str, Any]) -> tuple[bool, str, list[str], datetime | None] | None:
    """What the breakers read of one node of ``pool`` (None: not a member): (FabricReady=True, its name, its
    failing checks, since when)."""
    if not pool.matches(n):
        return None
    cond = o.find_condition(n, names.FABRIC_READY)
    if cond is not None and cond.get("status") == "True":
        return True, o.name_of(n), [], None
    checks = failing_checks(cond) if cond is not None else []
    since = times.parse_time(cond.get("lastTransitionTime")) if cond and checks else None
    return False, o.name_of(n), checks, since


def scan_nodes(profile: PlatformProfile, nodes: list[dict[str, Any]],
               snapshot: Snapshot | None = None) -> dict[str, NodeScan]:
    """Each pool's members and their FabricReady checks, by pool name. With ``snapshot`` (whose ``nodes``
    these are), each node's part is kept while it is the same object (``Snapshot.select``)."""
    out: dict[str, NodeScan] = {}
    for pool in profile.spec.pools:
        view = partial(_scan_view, pool)
        seen = (snapshot.select(("breaker scan", pool.name), nodes, view) if snapshot is not None
                else [(n, v) for n in nodes if (v := view(n))])
        scan = out[pool.name] = NodeScan([n for n, _ in seen])
        for _, (good, name, checks, since) in seen:
            if good:
                scan.good += 1
                continue
            if not checks:
                continue  # no condition yet: the bootstrap taint's business, not a check's
            scan.node_checks[name] = checks
            for c in checks:
                scan.failing.setdefault(c, {})[name] = since
    return out


def judge_breakers(profile: PlatformProfile, nodes: list[dict[str, Any]], fvs: dict[str, dict[str, Any]],
                   workloads: list[dict[str, Any]], rules: list[dict[str, Any]], now: datetime,
                   mode: str = "enforce", scanned: dict[str, NodeScan] | None = None,
                   snapshot: Snapshot | None = None) -> BlastResult:
    """``scanned``: ``scan_nodes(profile, nodes)`` when the caller kept it from a pass with the same nodes;
    ``snapshot`` (whose Workloads ``workloads`` are): each Workload's gang kept while it is the same object."""
    res = BlastResult()
    scans = scanned if scanned is not None else scan_nodes(profile, nodes)
    for pool in profile.spec.pools:
        scan = scans[pool.name]
        members, failing, node_checks, good = scan.members, scan.failing, scan.node_checks, scan.good
        budget = pool.blast_budget(largest_gang(profile, pool, workloads, snapshot))
        fv = fvs.get(pool.name)
        before = stored(fv)
        pb = PoolBreakers(pool.name, len(members), budget.allowed(len(members)))
        for check in sorted(set(before) | set(failing)):
            state = before.get(check, breaker.BreakerState())
            j = breaker.judge(budget, len(members), failing.get(check, {}), now, good=good, after=state.reset_at)
            pb.spent[check] = j.spent
            new = breaker.step(state, j, now)
            pb.states[check] = new
            if new.open and not state.open and fv is not None:
                res.actions.append(event(
                    fv, names.FV_API, names.FV_KIND, BREAKER_EVENT,
                    f"pool {pool.name}: breaker for check {check} open ({new.reason}; budget: "
                    f"{budget.describe(len(members))}): fabricguard assumes its own fault (profile, agent, driver) "
                    f"and stops tainting and holding for this check until `fabricguard breaker reset --pool "
                    f"{pool.name} --check {check}`. Nodes: {breaker.name_members(new.members)}",
                    now, warning=True))
        open_checks = set(pb.open_checks)
        pb.withheld = {n for n, cs in node_checks.items() if open_checks and set(cs) <= open_checks}
        pb.exhausted = sorted(c for c, n in pb.spent.items()
                              if c not in open_checks and n > 0 and n >= pb.allowed)
        res.pools[pool.name] = pb
        kept = {c: s for c, s in pb.states.items() if s.open or s.resets or c in failing}
        if to_status(kept) != to_status(before):
            res.fv_status.setdefault(pool.name, {})["breakers"] = to_status(kept)
        # The node count the agents size their taint slots by (agent/taint_slots.py): rewritten when it changes and
        # every PUBLISH_REFRESH_S, so that an agent can tell a count the controller still keeps from a stale one.
        published = taint_slots.published(pool, len(members), now)
        if fv is not None and taint_slots.publish_due(((fv.get("status") or {}).get("blastBudget")), published, now):
            res.fv_status.setdefault(pool.name, {})["blastBudget"] = published
        observing = profile.mode_of(pool, mode) == "observe"
        pb.muted = observing or bool(open_checks) or bool(pb.exhausted)
        res.actions += _rule_actions(pool, rules, dry_run=pb.muted)
        if not pb.muted:
            continue  # NRC keeps the taints
        for n in members:
            name = o.name_of(n)
            cond = o.find_condition(n, names.FABRIC_READY)
            # While NRC is muted the controller does its untainting: a node that is True again, one whose
            # failures are all behind an open breaker, and every node of an observed pool.
            if observing or name in pb.withheld or (cond is not None and cond.get("status") == "True"):
                ops = taint_patch(n, set())
                if ops is not None:
                    res.actions.append(JsonPatch("v1", "nodes", None, name, ops))
    return res


def _rule_actions(pool: Pool, rules: list[dict[str, Any]], *, dry_run: bool) -> list[Action]:
    """``spec.dryRun`` of the pool's own NodeReadinessRules (by label), patched only where it differs."""
    out: list[Action] = []
    for r in rules:
        labels = o.labels_of(r)
        if labels.get(names.LABEL_POOL) != pool.name or labels.get(names.LABEL_APP_PART_OF) != "fabricguard":
            continue
        if bool((r.get("spec") or {}).get("dryRun")) != dry_run:
            out.append(MergePatch(names.NRR_API, NRR_PLURAL, None, o.name_of(r), {"spec": {"dryRun": dry_run}}))
    return out
