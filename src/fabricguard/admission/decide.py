"""The admission decision, shared by the HTTPS server and ``fabricguard admission review``.

:class:`Admission` turns a request body into ``(http status, response JSON, outcome)`` for one of three
endpoints: ``mutate`` (the patch), ``validate`` (the rejections) and ``review`` (mutation, then validation of
the mutated object: what the API server would end up deciding). No I/O happens here, and dry-run requests are
answered exactly like the others because nothing here has side effects.

It fails closed: a CREATE of a kind it handles must carry the object of that kind (the API server always sends
it), and an object too large or too deeply nested to review is refused with the limit it broke. Denial messages
and patches are bounded (:data:`MAX_MESSAGE`, :data:`MAX_PATCH_BYTES`), so one request cannot make an answer
the API server would choke on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import jsonpatch

from fabricguard import names
from fabricguard.admission import daemonsets as fabric_daemonsets
from fabricguard.admission import review as rv
from fabricguard.admission import validate as val
from fabricguard.admission import workloads as wl
from fabricguard.admission.claims import Resolver
from fabricguard.admission.mutate import Plan, make_plan, mutate_workload
from fabricguard.admission.queues import missing_local_queue
from fabricguard.profile.model import Mode, PlatformProfile, Pool, UnknownPoolError
from fabricguard.storage import layout

Endpoint = Literal["mutate", "validate", "review"]
Outcome = Literal["allowed", "patched", "denied", "skipped", "bad_request", "error", "observed"]
OBSERVE_PREFIX = "fabricguard observe mode: enforce would deny: "

MAX_MESSAGE = 4096
MAX_PATCH_BYTES = 1024 * 1024


@dataclass
class Decision:
    status: int
    body: dict[str, Any]
    outcome: Outcome
    # A denial observe mode does not relax: tenant isolation on the Lustre claim (admission/claimmount.py).
    enforced: bool = False


@dataclass
class _Subject:
    workload: wl.Workload
    pool: Pool


def bounded(message: str, limit: int = MAX_MESSAGE) -> str:
    """``message`` cut to ``limit`` characters at a '; ' boundary, saying how many reasons were left out."""
    if len(message) <= limit:
        return message
    parts = message.split("; ")
    kept: list[str] = []
    size = 0
    for p in parts:
        if size + len(p) + 2 > limit - 60:
            break
        kept.append(p)
        size += len(p) + 2
    if not kept:
        return message[: limit - 3] + "..."
    return "; ".join(kept) + f"; and {len(parts) - len(kept)} more reasons (fix these first)"


def _deny(uid: str, message: str, code: int = 403, reason: str = "Forbidden") -> Decision:
    return Decision(200, rv.deny(uid, bounded(message), code, reason), "denied")


def observed(decision: Decision, uid: str) -> Decision:
    """Observe mode: a denial becomes an allowed response whose warning says exactly what enforce would refuse
    (``kubectl`` prints it; the API server records it in the audit log); anything else is unchanged."""
    resp = decision.body.get("response") if isinstance(decision.body, dict) else None
    if decision.enforced or decision.status != 200 or not isinstance(resp, dict) or resp.get("allowed") is not False:
        return decision
    message = str((resp.get("status") or {}).get("message") or "denied")
    return Decision(200, rv.allow(uid, None, [bounded(OBSERVE_PREFIX + message, 512)]), "observed")


def _declared_kind(obj: dict[str, Any]) -> tuple[str, str]:
    api = str(obj.get("apiVersion") or "")
    return (api.rsplit("/", 1)[0] if "/" in api else ""), str(obj.get("kind") or "")


class Admission:
    """Decides admission requests against one platform profile."""

    def __init__(self, profile: PlatformProfile, resolve: Resolver | None = None, mode: str = "enforce",
                 job_dir_image: str | None = None) -> None:
        self.profile = profile
        # The job directory's init container image where the profile names none (``--job-dir-image``).
        self.job_dir_image = job_dir_image
        # The install's mode; a pool's own ``mode`` field wins (profile.mode_of). Observe: warn, never deny.
        self.mode: Mode = "observe" if mode == "observe" else "enforce"
        # Looks up ResourceClaimTemplates for DRA pools (admission/claims.py); None: not checked, with a warning.
        self.resolve = resolve
        # What to inject per (pool, opted out), built once per pool: this object lives as long as the profile.
        self._plans: dict[tuple[str, bool, bool], Plan] = {}

    # -- entry points

    def handle(self, endpoint: Endpoint, body: bytes | str) -> Decision:
        try:
            req = rv.parse_review(body)
        except rv.ReviewError as exc:
            if exc.uid:
                return Decision(200, rv.deny(exc.uid, bounded(f"fabricguard: bad AdmissionReview: {exc}"), 400,
                                             "BadRequest"), "bad_request")
            return Decision(400, {"error": f"bad AdmissionReview: {exc}"}, "bad_request")
        try:
            return self.decide(endpoint, req)
        except RecursionError:
            # JSON nested about as deep as the parser allows: no Kubernetes object is, so refuse it plainly.
            return Decision(200, rv.deny(req.uid, "fabricguard: the object is nested too deeply to review; no "
                                                  "Kubernetes object nests this deep", 400, "BadRequest"),
                            "bad_request")

    def decide(self, endpoint: Endpoint, req: rv.AdmissionRequest) -> Decision:
        decision, pool = self._decide(endpoint, req)
        mode = self.profile.mode_of(pool, self.mode) if pool is not None else self._default_mode()
        return observed(decision, req.uid) if mode == "observe" else decision

    def _default_mode(self) -> Mode:
        """A request that names no usable pool: observed when the install observes and no pool enforces (one
        enforcing pool makes the cluster's own refusals, such as an unknown pool label, real)."""
        if self.mode == "observe" and all(p.mode != "enforce" for p in self.profile.spec.pools):
            return "observe"
        return "enforce"

    def _decide(self, endpoint: Endpoint, req: rv.AdmissionRequest) -> tuple[Decision, Pool | None]:
        if req.kind.group == "apps" and req.kind.kind == "DaemonSet":
            # The fabric DaemonSets' readiness tolerations (admission/daemonsets.py); nothing to validate.
            if endpoint == "validate":
                return Decision(200, rv.allow(req.uid), "skipped"), None
            body, patched = fabric_daemonsets.decide(self.profile, req)
            return Decision(200, body, "patched" if patched else "skipped"), None
        subject = self._subject(req)
        if isinstance(subject, Decision):
            return subject, None
        if subject is None:
            return Decision(200, rv.allow(req.uid), "skipped"), None
        if endpoint == "validate":
            return self._validate(req.uid, subject), subject.pool
        mutation = self._mutate(req.uid, subject)
        if endpoint == "mutate" or mutation.outcome == "denied":
            return mutation, subject.pool
        patch = rv.decode_patch(mutation.body)
        obj = jsonpatch.apply_patch(subject.workload.obj, patch) if patch else subject.workload.obj
        mutated = wl.locate(obj, subject.workload.kind, subject.workload.namespace)
        checked = self._validate(req.uid, _Subject(mutated, subject.pool))
        if checked.outcome == "denied":
            return checked, subject.pool
        return mutation, subject.pool

    # -- steps

    def _subject(self, req: rv.AdmissionRequest) -> _Subject | Decision | None:
        if req.operation != "CREATE":
            return None
        kind = wl.kind_of(req.kind.group, req.kind.kind)
        if kind is None:
            return None
        what = f"{req.kind.group or 'core'}/{req.kind.version} {req.kind.kind}"
        if req.object is None:
            return _deny(req.uid, f"fabricguard: a CREATE of {what} without request.object cannot be reviewed; "
                                  "the API server always sends the object", 400, "BadRequest")
        group, declared = _declared_kind(req.object)
        if (group, declared) != (req.kind.group, req.kind.kind):
            return _deny(req.uid, f"fabricguard: request.object is apiVersion {req.object.get('apiVersion')!r} "
                                  f"kind {declared!r}, not the {what} the request declares", 400, "BadRequest")
        try:
            w = wl.locate(req.object, kind, req.namespace)
        except wl.WorkloadError as exc:
            return _deny(req.uid, f"fabricguard: cannot review this {kind}: {exc}", 400, "BadRequest")
        try:
            pool = self.profile.pool(w.pool_name)
        except UnknownPoolError as exc:
            return _deny(req.uid, f"fabricguard: {exc}; set label {names.LABEL_POOL} to one of them (or remove it "
                                  "to use the default pool)")
        if not wl.is_multi_node(w, pool.gpuResource, pool.gpusPerNode):
            return None
        return _Subject(w, pool)

    def _mutate(self, uid: str, s: _Subject) -> Decision:
        # The silent-path env gets its own explanation before any generic conflict message.
        if not s.workload.opted_out:
            silent = [f.message for f in val.silent_findings(s.workload, s.pool)]
            if silent:
                silent = [bounded("; ".join(silent), MAX_MESSAGE - len("fabricguard: "))]
                return Decision(200, rv.deny(uid, "fabricguard: " + "; ".join(silent)), "denied")
        # The job's directory differs between a claim rooted at the namespace's directory and one at the root.
        key = (s.pool.name, s.workload.opted_out, layout.namespace_dir(self.profile, s.workload.namespace) is None)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = make_plan(self.profile, s.pool, s.workload.opted_out, self.job_dir_image,
                                                s.workload.namespace)
        m = mutate_workload(s.workload, self.profile, s.pool, plan, self.resolve)
        if not m.allowed:
            return _deny(uid, m.message)
        lq = None if (s.workload.kind == "Pod" and s.workload.owned) else missing_local_queue(
            s.pool, s.workload.namespace)
        warnings = [bounded(w, 512) for w in ([lq] if lq else []) + m.warnings[:20]] or None
        body = rv.allow(uid, m.patch, warnings)
        if len(body["response"].get("patch", "")) > MAX_PATCH_BYTES:
            return _deny(uid, f"fabricguard: the patch for this {s.workload.kind} would be over "
                              f"{MAX_PATCH_BYTES} bytes; split the workload", 400, "BadRequest")
        return Decision(200, body, "patched" if m.patch else "allowed")

    def _validate(self, uid: str, s: _Subject) -> Decision:
        found = val.findings(s.workload, self.profile, s.pool)
        isolation = [f for f in found if f.rule == "claim-mount"]
        if isolation and self.profile.mode_of(s.pool, self.mode) == "observe":
            # Observe mode relaxes fabric judgments, never the boundary between tenants.
            denied = _deny(uid, f"fabricguard (pool {s.pool.name}): " + "; ".join(f.message for f in isolation))
            denied.enforced = True
            return denied
        if found:
            return _deny(uid, f"fabricguard (pool {s.pool.name}): " + "; ".join(f.message for f in found))
        return Decision(200, rv.allow(uid), "allowed")
