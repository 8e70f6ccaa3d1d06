"""``kubectl fabricguard why JOB`` and ``kubectl fabricguard pools``: the answer from what the cluster stores.

The ML engineer's question ("why is my job held / slow / failed?") is answered from the objects the controller
already writes, read as the API server stores them: the Workload's ``fabric-validated`` check (state and hold
message), the pool's FabricValidation (``Validated`` and ``RootCause`` conditions, last outcome and last
success), and the job's annotations (``fabricguard.io/verdict``, ``transport``, ``busbw``, ``hang``). The most
decisive state wins, told first: held > hung > a finished job's verdict > a running job's transport or busbw >
waiting for quota > nothing wrong. Each answer carries the cause and the next step: the RootCause's own fix
(``rootcause.root_cause_message``), or, with the controller's profile, the pool's per-fabric fix
(``verdict.fixes``), and always the command that shows the rest.

Pure: objects in, an :class:`Answer` out; the plugin's command (fabricguard/kubectl/commands.py) does the reads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fabricguard import kinds, names, times
from fabricguard import objects as o
from fabricguard.controller.busbw import ANN_BUSBW, ANN_BUSBW_STATE
from fabricguard.controller.gate import OBSERVE_PREFIX
from fabricguard.controller.hang import ANN_HANG, nic_words
from fabricguard.controller.rootcause import read_root_cause
from fabricguard.profile.model import PlatformProfile, Pool, UnknownPoolError
from fabricguard.verdict.fixes import fix_for, transport_fix

# A finished job's verdict annotation, as the verdict vocabulary says it (missing logs never pass).
_VERDICT_WORD = {"pass": "pass", "degraded": "degraded", "failed": "failed", "missing-logs": "degraded",
                 "input-unusable": "degraded", "unknown-pool": "unjudged"}
_FALLBACK = {"socket", "mixed", "unknown"}


@dataclass
class Answer:
    """One job's answer: the verdict word, what state it is in, the cause, the fix, the facts read."""

    verdict: str  # pass | degraded | failed | unjudged
    subject: str  # "JobSet ml-training/llama-ft"
    state: str  # held | would-hold | hung | finished | slow | running | waiting | admitted | not-found
    headline: str
    cause: str = ""
    fix: str = ""
    facts: list[tuple[str, str]] = field(default_factory=list)
    more: list[str] = field(default_factory=list)  # commands that show the rest

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "subject": self.subject, "state": self.state, "headline": self.headline,
                "cause": self.cause or None, "fix": self.fix or None, "facts": dict(self.facts), "more": self.more}


def split_ref(ref: str) -> tuple[str | None, str]:
    """``jobset/llama-ft`` -> ("JobSet", "llama-ft"); ``llama-ft`` -> (None, "llama-ft"). Raises ValueError
    naming the kinds for an unknown one."""
    if "/" not in ref:
        return None, ref
    kind, _, name = ref.partition("/")
    for k in kinds.KINDS:
        if kind.lower() in (k.kind.lower(), k.plural, f"{k.plural}.{k.group}".rstrip("."), f"{k.kind.lower()}s"):
            return k.kind, name
    raise ValueError(f"{kind!r} is not a workload kind fabricguard knows; use one of "
                     + ", ".join(k.kind.lower() for k in kinds.KINDS))


def workloads_of(job: dict[str, Any] | None, kind: str | None, name: str, workloads: list[dict[str, Any]]
                 ) -> list[dict[str, Any]]:
    """The job's Kueue Workloads: owned by it (Kueue sets the owner reference and ``kueue.x-k8s.io/job-uid``),
    or, when the job itself is gone, named for it (``<kind>-<name>-<hash>``)."""
    uid = o.meta(job).get("uid") if job else None
    out = []
    for w in workloads:
        owners = o.meta(w).get("ownerReferences") or ()
        if (uid and (o.labels_of(w).get(names.KUEUE_JOB_UID) == uid or any(r.get("uid") == uid for r in owners))) \
                or any(r.get("name") == name and (kind is None or r.get("kind") == kind) for r in owners) \
                or (job is None and o.name_of(w).startswith(f"{(kind or '').lower()}-{name}-")):
            out.append(w)
    return out


def pool_of(job: dict[str, Any] | None, workloads: list[dict[str, Any]]) -> str | None:
    """The pool: the webhook's label on the job, else the flavor Kueue assigned (fabricguard's flavors are named
    after their pools)."""
    if job is not None and o.labels_of(job).get(names.LABEL_POOL):
        return o.labels_of(job)[names.LABEL_POOL]
    for w in workloads:
        for psa in ((w.get("status") or {}).get("admission") or {}).get("podSetAssignments") or ():
            for f in (psa.get("flavors") or {}).values():
                return str(f)
    return None


def _our_check(w: dict[str, Any]) -> dict[str, Any] | None:
    for c in (w.get("status") or {}).get("admissionChecks") or ():
        if c.get("name") == names.CHECK_NAME:
            return dict(c)
    return None


def _age(ts: Any, now: datetime) -> str:
    t = times.parse_time(ts) if isinstance(ts, str) else None
    if t is None:
        return "never"
    return f"{times.format_time(t)} ({_span((now - t).total_seconds())} ago)"


def _span(s: float) -> str:
    s = max(int(s), 0)
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n:
            return f"{s // n}{unit}"
    return f"{s}s"


def pool_facts(fv: dict[str, Any] | None, pool: str | None, now: datetime) -> list[tuple[str, str]]:
    if pool is None:
        return [("pool", "unknown (the job has no fabricguard.io/pool label and no flavor yet)")]
    if fv is None:
        return [("pool", f"{pool}: no FabricValidation (not a fabric pool, or the controller is not running)")]
    st = fv.get("status") or {}
    validated = o.find_condition(fv, names.FV_VALIDATED) or {}
    word = {"True": "validated", "False": "NOT validated"}.get(str(validated.get("status")), "not yet judged")
    out = [("pool", f"{pool}: {word}" + (f" ({validated['reason']})" if validated.get("reason") else "")),
           ("last canary", f"{st.get('lastOutcome') or 'none yet'} at {_age(st.get('lastRun'), now)}"),
           ("last pass", "never passed" if not st.get("lastSuccess") else _age(st.get("lastSuccess"), now))]
    opened = [b.get("check") for b in st.get("breakers") or () if b.get("open")]
    if opened:
        out.append(("breakers open", ", ".join(map(str, opened))))
    return out


def _pool_in(profile: PlatformProfile | None, pool: str | None) -> Pool | None:
    if profile is None or pool is None:
        return None
    try:
        return profile.pool(pool)
    except UnknownPoolError:
        return None


def _root_cause(fv: dict[str, Any] | None) -> tuple[str, str]:
    rc = o.find_condition(fv, names.FV_ROOT_CAUSE) if fv else None
    if not rc or rc.get("status") != "True":
        return "", ""
    return read_root_cause(str(rc.get("message") or ""))


def explain(ref: str, job: dict[str, Any] | None, kind: str | None, namespace: str,
            all_workloads: list[dict[str, Any]], fvs: dict[str, dict[str, Any]], now: datetime,
            profile: PlatformProfile | None = None) -> Answer:
    """Why ``job`` (of ``kind`` in ``namespace``; None when only its Workload is left) is held, slow or failed."""
    name = o.name_of(job) if job else ref
    wls = workloads_of(job, kind, name, all_workloads)
    pool = pool_of(job, wls)
    fv = fvs.get(pool) if pool else None
    subject = f"{kind or 'job'} {namespace}/{name}"
    facts = pool_facts(fv, pool, now)
    more = [f"kubectl describe fabricvalidation {pool}"] if fv is not None else []
    p = _pool_in(profile, pool)
    rc_cause, rc_fix = _root_cause(fv)
    if job is None and not wls:
        return Answer("unjudged", subject, "not-found", f"no workload named {ref} in namespace {namespace}",
                      fix=f"`kubectl get workloads -n {namespace}` lists what Kueue holds there", facts=[])
    ann = o.annotations_of(job) if job else {}

    for w in wls:
        check = _our_check(w)
        admitted = o.condition_true(w, "Admitted")
        facts.insert(0, ("workload", f"{o.name_of(w)}: " + ("admitted" if admitted else "not admitted")
                         + (f", check {names.CHECK_NAME} {check.get('state')}" if check else "")))
        if check is None or admitted:
            continue
        msg = str(check.get("message") or "")
        if msg.startswith(OBSERVE_PREFIX):
            return Answer("degraded", subject, "would-hold", "not held (observe mode), but enforce would hold it: "
                          + msg.removeprefix(OBSERVE_PREFIX), cause=rc_cause, fix=rc_fix or _wait_fix(pool),
                          facts=facts, more=more)
        if check.get("state") in ("Pending", "Retry", "Rejected"):
            word = "failed" if check.get("state") == "Rejected" else "degraded"
            head = msg.removeprefix("fabricguard: ").split(" — ")[0].split("; ")[0] or \
                f"held: pool {pool} not validated yet"
            cause = rc_cause or _validated_message(fv) or msg
            return Answer(word, subject, "held", f"{head} (check {check.get('state')})", cause=cause,
                          fix=rc_fix or _wait_fix(pool), facts=facts, more=more)

    if ann.get(ANN_HANG):
        cause = _hang_text(ann[ANN_HANG])
        return Answer("failed", subject, "hung", "hung: its ranks wait for one rank", cause=cause,
                      fix="Look at the node the ranks wait for (its pod's logs, `kubectl describe node NODE`); "
                          "its pair test decides whether the fabric is at fault: `fabricguard pool coverage -p "
                          f"PROFILE --pool {pool}`", facts=[*facts, ("transport", ann.get(names.ANN_TRANSPORT, "-"))],
                      more=more)
    verdict = ann.get(names.ANN_VERDICT)
    if verdict:
        word = _VERDICT_WORD.get(verdict, "degraded")
        detail = ann.get(names.ANN_VERDICT_DETAIL, "")
        fix = ""
        if word != "pass":
            fix = (transport_fix(p) if p is not None and any(f"transport {t}" in detail for t in _FALLBACK)
                   else _verify_fix(namespace, name, pool))
        return Answer(word, subject, "finished", f"finished: verdict {verdict}", cause=detail, fix=fix,
                      facts=facts, more=more)
    transport = ann.get(names.ANN_TRANSPORT)
    if transport:
        facts.append(("transport", f"{transport}: {ann.get(names.ANN_TRANSPORT_DETAIL, '')}"))
    if ann.get(ANN_BUSBW):
        facts.append(("busbw", f"{ann.get(ANN_BUSBW_STATE, '?')}: {ann[ANN_BUSBW]}"))
    if transport in _FALLBACK and (p is None or transport not in {t.value for t in p.fabric.expected_transports}):
        return Answer("degraded", subject, "slow", f"slow: inter-node traffic over {transport}, not the fabric",
                      cause=ann.get(names.ANN_TRANSPORT_DETAIL, ""),
                      fix=transport_fix(p) if p is not None else _verify_fix(namespace, name, pool),
                      facts=facts, more=more)
    if ann.get(ANN_BUSBW_STATE) == "below":
        return Answer("degraded", subject, "slow", "slow: collective bus bandwidth below the pool's floor",
                      cause=ann.get(ANN_BUSBW, ""),
                      fix=fix_for("busbw", p, profile) if p is not None and profile is not None else
                      f"Compare the pool's canary: `kubectl describe fabricvalidation {pool}`; a canary also below "
                      "the floor points at the fabric, one at the floor at this job's placement or settings.",
                      facts=facts, more=more)
    for w in wls:
        quota = o.find_condition(w, "QuotaReserved") or {}
        if quota.get("status") != "True" and not o.condition_true(w, "Admitted"):
            queue = (w.get("spec") or {}).get("queueName") or "?"
            return Answer("unjudged", subject, "waiting", f"waiting for quota in LocalQueue {queue} (not held by "
                          "fabricguard)", cause=str(quota.get("message") or "no quota reserved yet"),
                          fix=f"`kubectl describe localqueue -n {namespace} {queue}` shows its ClusterQueue's usage",
                          facts=facts, more=more)
    state = "running" if transport else "admitted"
    head = f"nothing wrong seen: {'transport ' + transport if transport else 'admitted'}"
    return Answer("pass", subject, state, head, facts=facts, more=more)


def _validated_message(fv: dict[str, Any] | None) -> str:
    c = o.find_condition(fv, names.FV_VALIDATED) if fv else None
    return str(c.get("message") or "") if c and c.get("status") == "False" else ""


def _wait_fix(pool: str | None) -> str:
    return (f"Nothing in the job to change: it runs once pool {pool} is validated again (its next canary passes). "
            f"Why it is not: `kubectl describe fabricvalidation {pool}`")


def _verify_fix(namespace: str, name: str, pool: str | None) -> str:
    return (f"Every reason with its fix, from the job's logs: `fabricguard verify-job JOB_DIR -p PROFILE --pool {pool}"
            " --html report.html` (JOB_DIR: the job's log directory on the pool's Lustre, "
            f"<mount>/{namespace}/{name})")


def _hang_text(raw: str) -> str:
    try:
        doc = json.loads(raw)
    except ValueError:
        return raw
    w = (doc.get("waited_for") or [{}])[0] if isinstance(doc, dict) else {}
    nics = doc.get("nics") if isinstance(doc, dict) else None
    nic = nics.get(w.get("node")) if isinstance(nics, dict) and isinstance(w, dict) else None
    said = f"; {nic_words(nic)[:300]}" if isinstance(nic, dict) and ("absent" in nic or "counters" in nic) else ""
    return (f"the ranks wait for rank {w.get('rank', '?')} (pod {w.get('pod') or '?'}, node {w.get('node') or '?'}: "
            f"{w.get('why', '')}){said}; {doc.get('rule', '') if isinstance(doc, dict) else ''}").strip("; ")


@dataclass
class PoolRow:
    pool: str
    word: str  # pass | degraded | unjudged
    validated: str
    last_outcome: str
    last_pass: str
    message: str
    breakers: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"pool": self.pool, "verdict": self.word, "validated": self.validated, "lastOutcome": self.last_outcome,
                "lastPass": self.last_pass, "message": self.message, "openBreakers": self.breakers}


def pool_rows(fvs: list[dict[str, Any]], now: datetime) -> list[PoolRow]:
    """One row per FabricValidation, not validated first (a pool that never passed is never hidden)."""
    rows = []
    for fv in fvs:
        st = fv.get("status") or {}
        c = o.find_condition(fv, names.FV_VALIDATED) or {}
        status = str(c.get("status") or "Unknown")
        word = {"True": "pass", "False": "degraded"}.get(status, "unjudged")
        causes, _fix = _root_cause(fv)
        msg = causes or str(c.get("message") or "no verdict yet (the controller writes it on its next pass)")
        rows.append(PoolRow(o.name_of(fv), word, f"{status} ({c.get('reason', '-')})",
                            str(st.get("lastOutcome") or "-"),
                            "never passed" if not st.get("lastSuccess") else _age(st.get("lastSuccess"), now), msg,
                            [str(b.get("check")) for b in st.get("breakers") or () if b.get("open")]))
    order = {"degraded": 0, "unjudged": 1, "pass": 2}
    return sorted(rows, key=lambda r: (order[r.word], r.pool))
