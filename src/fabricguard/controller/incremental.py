"""Incremental passes: after a watch event, a pass re-judges what the changed objects can affect and keeps the
previous pass's results for the rest.

The pass stays level-based and pure (``controller.reconcile``); this module only decides which of its parts
must be computed again, from what changed between the previous pass's snapshot and this one:

* **What changed** (:func:`changed_between`): the cache replaces an object by the one its watch event decoded
  and never edits a stored one (``controller.kube.Cache.snapshot``), so an object that is the same Python
  object as last pass is unchanged; one that is not, but equal, is unchanged too (a relist, a resent object).
  The result is the changed (namespace, name) keys by kind, and whether the snapshot's notes changed.
* **The doctor's rules** (:meth:`Incremental.rules`): each rule runs on a view of the snapshot that notes which
  kinds it reads (:class:`ReadingSnapshot`: dynamic dependencies, as a build system records them: whatever the
  rule read last time is what it depends on; a read this module cannot attribute, ``snapshot.objects`` or an
  attribute it does not know, counts as reading everything). A rule runs again when an object of a kind it read
  changed, or when the time moved out of what its last run's reads of the clock allow; otherwise its findings
  are last pass's. A rule whose first statement is ``del now`` cannot read the clock (:func:`reads_clock`); any
  other gets the time as a :func:`reading_clock`, a ``datetime`` that notes its every use. Comparisons with a
  time (``changed >= now - WINDOW``) bound the times at which they come out the same, and the findings are kept
  while the next pass's time is inside those bounds; any other use (an age in a message, formatting) is exact:
  the rule runs every pass while it makes one. A rule that reports a DaemonSet's age reads the clock only while
  it reports one, so a healthy cluster's rules are kept between passes.
* **What is read of nodes alone** (the breakers' scan of each pool's FabricReady checks, what the agents say of
  each pool, each Node's pool: ``Snapshot.pool_members``) and **of pods alone** (the inventory's pods by JobSet
  and GPUs in use) are computed again only when an object of that kind changed (:meth:`Incremental.keep`).
  What rules compute of one object alone (``Snapshot.derived``: a pod's evidence of ever having been ready, a
  node's gate) is kept for the very same object, so a rule that runs again after one event recomputes that
  object's part and only aggregates the rest.
* **The gate** (``controller.gate.GateMemo``): a Workload's check is decided again when the Workload changed,
  when anything the decision reads besides it changed (a pool's standing, the stale flag, the mode, the checks),
  or when its decision wrote something last pass (a write carries the time, and one that failed is retried).
* Everything that reads the clock or Lustre (canaries, node proof, breakers, the pools' standing, the jobs'
  verdicts, drift) runs every pass, as before.

A pass is **full** (nothing is reused) when there is no previous pass, when the profile, the configuration or the
stale flag changed, when the clock went back, when the previous incremental pass did not finish, when the caller
says so (a relist, a new leader), and every ``full_every_s`` as a safety net. ``tests/controller/
test_incremental.py`` drives random event sequences through both and checks every pass's results are equal.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, cast

from fabricguard.doctor.model import Finding
from fabricguard.doctor.rules import RULES, Rule
from fabricguard.doctor.snapshot import Snapshot

Key = tuple[str, str]  # (namespace, name)

EVERYTHING = "*"  # a read this module cannot attribute to kinds: the rule depends on every object
NOTES = "(notes)"  # the snapshot's notes (what was not served, relists under way)
FULL_EVERY_S = 300.0

# What each of Snapshot's attributes reads, by kind (doctor/snapshot.py). An attribute not named here (a new
# index, ``objects``, ``by_kind``) counts as reading everything: a new read fails towards running the rule.
ATTRIBUTE_READS: dict[str, frozenset[str]] = {
    "nodes": frozenset({"Node"}),
    "pods": frozenset({"Pod"}),
    "daemonsets": frozenset({"DaemonSet"}),
    "events": frozenset({"Event"}),
    "claims_by_name": frozenset({"ResourceClaim"}),
    "dra_index": frozenset({"ResourceSlice", "ResourceClaim"}),
    "node_by_name": frozenset({"Node"}),
    "daemonset_pods": frozenset({"Pod"}),
    "revisions_by_owner": frozenset({"ControllerRevision"}),
    "notes": frozenset({NOTES}),
    "pool_members": frozenset({"Node"}),
    "derived": frozenset(),  # a function of the one object the rule passes, which it read through a kind
    "derived_seen": frozenset(),
    "known_derived": frozenset(),
    "select": frozenset(),  # a function of the objects the rule passes, which it read through a kind
    "fold": frozenset(),
    "memo_seen": frozenset(),
    "known_memo": frozenset(),
    "source": frozenset(),
    "profile_path": frozenset(),
}


class ReadingSnapshot:
    """A snapshot as one rule sees it: every read goes to ``base`` and notes the kinds it touched."""

    def __init__(self, base: Snapshot, reads: set[str]) -> None:
        self._base = base
        self._reads = reads

    def kind(self, kind: str) -> list[dict[str, Any]]:
        self._reads.add(kind)
        return self._base.kind(kind)

    def __getattr__(self, name: str) -> Any:
        self._reads.update(ATTRIBUTE_READS.get(name, frozenset({EVERYTHING})))
        value = getattr(self._base, name)
        setattr(self, name, value)  # noted once: later reads of it in the same rule find it here
        return value


@functools.cache
def reads_clock(fn: Callable[..., Any]) -> bool:
    """Whether the rule may read ``now``: True unless its first statement (after the docstring) deletes it.
    A function whose source cannot be read counts as reading the clock."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return True
    func = tree.body[0] if tree.body else None
    if not isinstance(func, ast.FunctionDef):
        return True
    body = list(func.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if not body or not isinstance(body[0], ast.Delete):
        return True
    deleted = {t.id for t in body[0].targets if isinstance(t, ast.Name)}
    deleted |= {e.id for t in body[0].targets if isinstance(t, ast.Tuple) for e in t.elts if isinstance(e, ast.Name)}
    return "now" not in deleted


# What a datetime does with its value besides comparing it (``__getattribute__`` notes named attributes too): any
# of these makes the result depend on the exact time.
_CLOCK_EXACT = ("__eq__", "__ne__", "__hash__", "__str__", "__repr__", "__format__", "__reduce__", "__reduce_ex__")
_CLOCK_ORDER = {"__lt__": "<", "__le__": "<=", "__gt__": ">", "__ge__": ">="}


@dataclass
class ClockUse:
    """How a run used the clock: ``exact`` (its result may change with any change of the time), else the open
    interval (``after``, ``before``) of times at which every comparison it made comes out the same, so that its
    result is the same at any time inside (None: unbounded on that side)."""

    exact: bool = False
    after: datetime | None = None
    before: datetime | None = None

    @property
    def used(self) -> bool:
        return self.exact or self.after is not None or self.before is not None

    def holds_at(self, now: datetime) -> bool:
        return not self.exact and (self.after is None or now > self.after) and (
            self.before is None or now < self.before)


def reading_clock(now: datetime) -> tuple[datetime, ClockUse]:
    """(``now`` as a value that notes its every use, how it was used). A class of its own per call: what is
    computed from it by adding or taking a duration (``now - WINDOW``) is of that class and is followed as
    ``now`` plus an offset. Comparing such a value with a plain time bounds the times at which the comparison
    comes out the same; every other use (formatting, subtracting a time, an attribute) is an exact use."""
    use = ClockUse()
    plain = datetime(now.year, now.month, now.day, now.hour, now.minute, now.second, now.microsecond, now.tzinfo,
                     fold=now.fold)

    def exact(op: Any) -> Any:
        def fn(self: datetime, *args: Any, **kwargs: Any) -> Any:
            use.exact = True
            return op(self, *args, **kwargs)
        return fn

    def shift(op: Any) -> Any:  # clock +/- a duration is the clock still; - a time is a duration: exact
        def fn(self: datetime, other: Any) -> Any:
            if not isinstance(other, timedelta):
                use.exact = True
            return op(self, other)
        return fn

    def order(name: str) -> Any:
        op = getattr(datetime, name)

        def fn(self: datetime, other: Any) -> Any:
            result = op(self, other)
            if result is NotImplemented:
                return result
            if isinstance(other, cls):
                return result  # both are the clock plus an offset: the same at any time
            if not isinstance(other, datetime):
                use.exact = True
                return result
            # self is now + offset: the answer is the same for every time on the same side of other - offset.
            edge = datetime.__sub__(other, datetime.__sub__(self, plain))
            if (name in ("__gt__", "__ge__")) == bool(result):
                use.after = edge if use.after is None else max(use.after, edge)
            else:
                use.before = edge if use.before is None else min(use.before, edge)
            return result
        return fn

    space: dict[str, Any] = {name: exact(getattr(datetime, name)) for name in _CLOCK_EXACT}
    space.update({name: order(name) for name in _CLOCK_ORDER})
    space.update({"__add__": shift(datetime.__add__), "__radd__": shift(datetime.__radd__),
                  "__sub__": shift(datetime.__sub__), "__rsub__": exact(vars(datetime)["__rsub__"]),
                  "__getattribute__": exact(datetime.__getattribute__)})
    cls = type("ReadingClock", (datetime,), space)
    value = cls(now.year, now.month, now.day, now.hour, now.minute, now.second, now.microsecond, now.tzinfo,
                fold=now.fold)
    use.exact, use.after, use.before = False, None, None  # making it is no use of it
    return value, use


def key_of(obj: dict[str, Any]) -> tuple[str, Key]:
    """(kind, (namespace, name)) of one object."""
    m = obj.get("metadata")
    m = m if isinstance(m, dict) else {}
    return str(obj.get("kind") or ""), (str(m.get("namespace") or ""), str(m.get("name") or ""))


def changed_between(before: dict[int, dict[str, Any]], after: dict[int, dict[str, Any]]) -> dict[str, set[Key]]:
    """Keys added, removed or changed, by kind, between two snapshots' objects by ``id`` (an object equal to the
    one before is not a change).

    The cache replaces an object on a watch event and never edits one, so what changed is what is not the same
    object: the objects of one snapshot and not the other are found by identity (set operations in C, not a walk
    over every object), and only they are keyed and compared. A key with more than one object on a side counts
    as changed when any of them is new or gone."""
    out: dict[str, set[Key]] = {}
    old: dict[tuple[str, Key], list[dict[str, Any]]] = {}
    new: dict[tuple[str, Key], list[dict[str, Any]]] = {}
    for i in before.keys() - after.keys():
        old.setdefault(key_of(before[i]), []).append(before[i])
    for i in after.keys() - before.keys():
        new.setdefault(key_of(after[i]), []).append(after[i])
    for k in old.keys() | new.keys():
        a, b = old.get(k, []), new.get(k, [])
        if len(a) == 1 and len(b) == 1 and a[0] == b[0]:
            continue  # resent equal (a relist): not a change
        out.setdefault(k[0], set()).add(k[1])
    return out


@dataclass
class PassStats:
    """What the latest pass computed: ``kind`` full or incremental, why a full one was full, the objects that
    changed since the pass before, and how much was judged again (``reevaluated``: objects the re-run rules read
    plus Workloads whose check was decided again)."""

    kind: str = "full"
    why: str = "first pass"
    changed: dict[str, int] = field(default_factory=dict)  # kind -> objects changed since the previous pass
    rules_run: int = 0
    rules_kept: int = 0
    workloads_decided: int = 0
    workloads_kept: int = 0
    reevaluated: int = 0
    built: list[str] = field(default_factory=list)  # the kept parts built again this pass (keep())
    kept: list[str] = field(default_factory=list)  # the kept parts taken from the previous pass
    seconds_diff: float = 0.0  # finding what changed (the objects by identity, then the comparison)
    computed: int = 0  # per-object answers computed again (Snapshot.select / derived), not kept
    folded: int = 0  # objects of the groups whose aggregate was computed again (Snapshot.fold)


@dataclass
class _RuleResult:
    findings: list[Finding]
    reads: frozenset[str]
    clock: ClockUse  # how its last run used the clock


class Incremental:
    """What one pass keeps for the next. One per controller replica; forgotten with its cache (a new leader
    starts with a full pass). ``force_full`` makes the next pass full (a relist, say)."""

    def __init__(self, full_every_s: float = FULL_EVERY_S, rules: tuple[Rule, ...] = RULES) -> None:
        self.full_every_s = full_every_s
        self.rule_set = rules
        self.stats = PassStats()
        self._objects: dict[int, dict[str, Any]] | None = None  # last pass's objects by id (held: ids stay theirs)
        self._notes: list[str] = []
        self._context: tuple[Any, ...] | None = None
        self._now: datetime | None = None
        self._last_full = 0.0
        self._open = False
        self._force = ""
        self._rules: dict[str, _RuleResult] = {}
        self._kept: dict[str, tuple[Any, Any]] = {}  # name -> (key, value): keep()
        self._snapshot: Snapshot | None = None
        self._derived: dict[tuple[str, int], tuple[dict[str, Any], Any]] = {}  # Snapshot.derived, kept
        self._prune_derived_at = 0
        self._memo: dict[Any, tuple[list[dict[str, Any]], Any, Any]] = {}  # Snapshot.select / fold, kept
        self.gate: Any = None  # controller.gate.GateMemo, kept by the gate itself
        self.lists_seen: int | None = None  # the cache's lists so far (runner.run_pass: a relist makes a full pass)
        self._pending: dict[int, dict[str, Any]] | None = None
        self._changed: dict[str, set[Key]] = {}
        self._full = True

    def force_full(self, why: str) -> None:
        self._force = self._force or why

    # ---------------------------------------------------------------- the pass's frame

    def begin(self, snapshot: Snapshot, context: tuple[Any, ...], now: datetime) -> PassStats:
        """Decide this pass's kind; ``context`` is everything besides the snapshot and the clock the pass reads
        (the profile, the configuration, the stale flag): any change there makes the pass full."""
        t0 = time.perf_counter()
        objs = snapshot.objects
        by_id = dict(zip(map(id, objs), objs, strict=True))
        why = self._force
        if not why:
            if self._objects is None:
                why = "first pass"
            elif self._open:
                why = "the previous pass did not finish"
            elif self._context is None or not _same_context(self._context, context):
                why = "the profile, the configuration or the stale flag changed"
            elif self._now is not None and now < self._now:
                why = "the clock went back"
            elif time.monotonic() - self._last_full >= self.full_every_s:
                why = f"periodic full pass (every {self.full_every_s:.0f} s)"
        self._changed = {} if why or self._objects is None else changed_between(self._objects, by_id)
        if not why and snapshot.notes != self._notes:
            self._changed[NOTES] = {("", "")}
        self._full = bool(why)
        self._pending = by_id
        snapshot.known_derived = None if why else self._derived
        snapshot.known_memo = None if why else self._memo
        self._snapshot = snapshot
        self._context, self._now, self._open, self._force = context, now, True, ""
        self._notes = list(snapshot.notes)
        self.stats = PassStats("full" if why else "incremental", why,
                               {k: len(v) for k, v in self._changed.items()},
                               seconds_diff=time.perf_counter() - t0)
        if why:
            self._rules.clear()
            self._kept.clear()
            self._derived = {}
            self._memo = {}
            self.gate = None
        return self.stats

    def finish(self) -> None:
        self._objects, self._pending, self._open = self._pending, None, False
        snapshot = self._snapshot
        if snapshot is not None:
            self.stats.computed, self.stats.folded = snapshot.computed, snapshot.folded
            # What this pass computed, over what earlier ones did (a rule kept this pass keeps its objects' facts
            # for the next pass that runs it); facts of objects gone from the cache are dropped now and then.
            self._derived.update(snapshot.derived_seen())
            if len(self._derived) > self._prune_derived_at:
                live = self._objects or {}
                self._derived = {k: v for k, v in self._derived.items() if id(v[0]) in live}
                self._prune_derived_at = 2 * len(self._derived) + 1024
            self._memo.update(snapshot.memo_seen())
            snapshot.known_derived, snapshot.known_memo = None, None
            self._snapshot = None
        if self._full:
            self._last_full = time.monotonic()

    @property
    def full(self) -> bool:
        return self._full

    def changed(self, *kinds: str) -> bool:
        """Whether an object of any of ``kinds`` changed since the previous pass (always, in a full pass)."""
        return self._full or EVERYTHING in kinds or any(k in self._changed for k in kinds)

    # ---------------------------------------------------------------- the parts it keeps

    def rules(self, snapshot: Snapshot, profile: Any, now: datetime) -> list[Finding]:
        """The doctor's findings: each rule run again only when something it read changed, or it reads the
        clock (the order of the findings is the rules' order, as ``run_rules`` gives it)."""
        out: list[Finding] = []
        counts = {k: len(v) for k, v in snapshot.by_kind.items()}
        for rule in self.rule_set:
            kept = self._rules.get(rule.id)
            if kept is not None and (not kept.clock.used or kept.clock.holds_at(now)) and not self.changed(*kept.reads):
                self.stats.rules_kept += 1
                # The pass ranks its findings by cause and writes ``cause`` into them (doctor/engine.py
                # rank_by_cause): a kept finding that carries last pass's cause (whose finding may be gone) is
                # handed out as a copy without it.
                out.extend(replace(f, cause="") if f.cause else f for f in kept.findings)
                continue
            reads: set[str] = set()
            clock, use = reading_clock(now) if reads_clock(rule.fn) else (now, ClockUse())
            found = rule.fn(cast(Snapshot, ReadingSnapshot(snapshot, reads)), profile, clock)
            # A rule may give a finding it kept (Snapshot.fold) that an earlier pass ranked: without that cause.
            found = [replace(f, cause="") if f.cause else f for f in found]
            self._rules[rule.id] = _RuleResult(found, frozenset(reads), use)
            self.stats.rules_run += 1
            self.stats.reevaluated += (sum(counts.values()) if EVERYTHING in reads
                                       else sum(counts.get(k, 0) for k in reads))
            out.extend(found)
        return out

    def keep(self, name: str, kinds: tuple[str, ...], build: Callable[[], Any], key: Any = None) -> Any:
        """``build()``, or what it gave last pass when no object of ``kinds`` changed and ``key`` (whatever else
        it reads, compared by value) is equal. ``build`` must not read the clock, Lustre or other kinds: each
        call site names the kinds its arguments come from."""
        kept = self._kept.get(name)
        if kept is not None and not self.changed(*kinds) and kept[0] == key:
            self.stats.kept.append(name)
            return kept[1]
        value = build()
        self._kept[name] = (key, value)
        self.stats.built.append(name)
        return value

def _same_context(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Same profile object (profiles are not edited in place), equal configuration and stale flag."""
    return len(a) == len(b) and all(x is y or x == y for x, y in zip(a, b, strict=True))
