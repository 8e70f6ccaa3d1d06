"""The admission decision, shared by the HTTPS server and ``fabricguard admission review``.

:class:`Admission` turns a request body into ``(http status, response JSON, outcome)`` for one of three
endpoints: ``mutate`` (the patch), ``validate`` (the rejections) and ``review`` (mutation, then validation of
the mutated object: what the API server would end up deciding). No I/O happens here, and dry-run requests are
answered exactly like the others because nothing here has side effects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import jsonpatch

from fabricguard.admission import review as rv
from fabricguard.admission import validate as val
from fabricguard.admission import workloads as wl
from fabricguard.admission.mutate import Plan, make_plan, mutate_workload
from fabricguard.profile.model import PlatformProfile, Pool, UnknownPoolError

Endpoint = Literal["mutate", "validate", "review"]
Outcome = Literal["allowed", "patched", "denied", "skipped", "bad_request"]


@dataclass
class Decision:
    status: int
    body: dict[str, Any]
    outcome: Outcome


@dataclass
class _Subject:
    workload: wl.Workload
    pool: Pool


class Admission:
    """Decides admission requests against one platform profile."""

    def __init__(self, profile: PlatformProfile) -> None:
        self.profile = profile
        # What to inject per (pool, opted out), built once per pool: this object lives as long as the profile.
        self._plans: dict[tuple[str, bool], Plan] = {}

    # -- entry points

    def handle(self, endpoint: Endpoint, body: bytes | str) -> Decision:
        try:
            req = rv.parse_review(body)
        except rv.ReviewError as exc:
            if exc.uid:
                return Decision(200, rv.deny(exc.uid, f"fabricguard: bad AdmissionReview: {exc}", 400,
                                             "BadRequest"), "bad_request")
            return Decision(400, {"error": f"bad AdmissionReview: {exc}"}, "bad_request")
        return self.decide(endpoint, req)

    def decide(self, endpoint: Endpoint, req: rv.AdmissionRequest) -> Decision:
        subject = self._subject(req)
        if isinstance(subject, Decision):
            return subject
        if subject is None:
            return Decision(200, rv.allow(req.uid), "skipped")
        if endpoint == "validate":
            return self._validate(req.uid, subject)
        mutation = self._mutate(req.uid, subject)
        if endpoint == "mutate" or mutation.outcome == "denied":
            return mutation
        patch = rv.decode_patch(mutation.body)
        obj = jsonpatch.apply_patch(subject.workload.obj, patch) if patch else subject.workload.obj
        mutated = wl.locate(obj, subject.workload.kind, subject.workload.namespace)
        checked = self._validate(req.uid, _Subject(mutated, subject.pool))
        if checked.outcome == "denied":
            return checked
        return mutation

    # -- steps

    def _subject(self, req: rv.AdmissionRequest) -> _Subject | Decision | None:
        if req.operation != "CREATE" or req.object is None:
            return None
        kind = wl.kind_of(req.kind.group, req.kind.kind)
        if kind is None:
            return None
        try:
            w = wl.locate(req.object, kind, req.namespace)
        except wl.WorkloadError as exc:
            return Decision(200, rv.deny(req.uid, f"fabricguard: cannot read this {kind}: {exc}", 400,
                                         "BadRequest"), "denied")
        try:
            pool = self.profile.pool(w.pool_name)
        except UnknownPoolError as exc:
            return Decision(200, rv.deny(req.uid, f"fabricguard: {exc}; set label {wl.LABEL_POOL} to one of "
                                                  "them (or remove it to use the default pool)"), "denied")
        if not wl.is_multi_node(w, pool.gpuResource, pool.gpusPerNode):
            return None
        return _Subject(w, pool)

    def _mutate(self, uid: str, s: _Subject) -> Decision:
        # The silent-path env gets its own explanation before any generic conflict message.
        if not s.workload.opted_out:
            silent = [f for f in val.findings(s.workload, self.profile, s.pool)
                      if "NCCL_IB_DISABLE" in f or "forces TCP sockets" in f]
            if silent:
                return Decision(200, rv.deny(uid, "fabricguard: " + "; ".join(silent)), "denied")
        key = (s.pool.name, s.workload.opted_out)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = make_plan(self.profile, s.pool, s.workload.opted_out)
        m = mutate_workload(s.workload, self.profile, s.pool, plan)
        if not m.allowed:
            return Decision(200, rv.deny(uid, m.message), "denied")
        return Decision(200, rv.allow(uid, m.patch, m.warnings or None), "patched" if m.patch else "allowed")

    def _validate(self, uid: str, s: _Subject) -> Decision:
        found = val.findings(s.workload, self.profile, s.pool)
        if found:
            return Decision(200, rv.deny(uid, f"fabricguard (pool {s.pool.name}): " + "; ".join(found)), "denied")
        return Decision(200, rv.allow(uid), "allowed")
