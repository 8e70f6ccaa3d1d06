"""AdmissionReview v1 on the wire: the request and response typed field by field.

The API server sends ``admission.k8s.io/v1`` ``AdmissionReview`` objects with a ``request`` and expects the
same apiVersion back with a ``response`` whose ``uid`` echoes the request's. Anything else (another version,
a missing uid, a body that is not JSON) is reported as a :class:`ReviewError` carrying the reason, so the
server can answer with an HTTP 400 instead of crashing.
"""

from __future__ import annotations

import base64
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fabricguard import names

API_VERSION = names.ADMISSIONREVIEW_API
KIND = "AdmissionReview"


class _Wire(BaseModel):
    # The API server may add fields in later releases; unknown fields are kept out, never an error.
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class GroupVersionKind(_Wire):
    group: str = ""
    version: str
    kind: str


class GroupVersionResource(_Wire):
    group: str = ""
    version: str
    resource: str


class UserInfo(_Wire):
    username: str | None = None
    uid: str | None = None
    groups: list[str] | None = None
    extra: dict[str, list[str]] | None = None


class AdmissionRequest(_Wire):
    uid: str = Field(min_length=1)
    kind: GroupVersionKind
    resource: GroupVersionResource
    subResource: str | None = None
    requestKind: GroupVersionKind | None = None
    requestResource: GroupVersionResource | None = None
    requestSubResource: str | None = None
    name: str | None = None
    namespace: str | None = None
    operation: Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
    userInfo: UserInfo = Field(default_factory=UserInfo)
    object: dict[str, Any] | None = None
    oldObject: dict[str, Any] | None = None
    dryRun: bool | None = None
    options: dict[str, Any] | None = None


class Status(_Wire):
    """The ``metav1.Status`` subset a webhook may return on denial."""

    code: int | None = None
    message: str | None = None
    reason: str | None = None


class AdmissionResponse(_Wire):
    uid: str
    allowed: bool
    status: Status | None = None
    patch: str | None = None
    patchType: Literal["JSONPatch"] | None = None
    auditAnnotations: dict[str, str] | None = None
    warnings: list[str] | None = None


class AdmissionReview(_Wire):
    apiVersion: Literal["admission.k8s.io/v1"] = "admission.k8s.io/v1"
    kind: Literal["AdmissionReview"] = "AdmissionReview"
    request: AdmissionRequest | None = None
    response: AdmissionResponse | None = None


class ReviewError(ValueError):
    """The body is not an AdmissionReview v1 request; ``uid`` is set when one could still be read."""

    def __init__(self, message: str, uid: str | None = None) -> None:
        super().__init__(message)
        self.uid = uid


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "<document>"
    return f"{where}: {err['msg']}"


def parse_review(body: bytes | str) -> AdmissionRequest:
    """Parse an AdmissionReview v1 request body, or raise :class:`ReviewError` saying what is wrong."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ReviewError(f"body is not JSON: {exc}") from None
    except RecursionError:
        raise ReviewError("body is not JSON that can be read: nested too deeply") from None
    if not isinstance(data, dict):
        raise ReviewError("body is not a JSON object; send an admission.k8s.io/v1 AdmissionReview")
    raw_req = data.get("request")
    uid = raw_req.get("uid") if isinstance(raw_req, dict) and isinstance(raw_req.get("uid"), str) else None
    if data.get("apiVersion") != API_VERSION or data.get("kind") != KIND:
        raise ReviewError(
            f"expected apiVersion {API_VERSION} kind {KIND}, got apiVersion {data.get('apiVersion')!r} "
            f"kind {data.get('kind')!r}; set admissionReviewVersions: [v1] in the webhook configuration",
            uid,
        )
    if not isinstance(raw_req, dict):
        raise ReviewError("AdmissionReview has no request object", uid)
    try:
        return AdmissionRequest.model_validate(raw_req)
    except ValidationError as exc:
        raise ReviewError(f"request.{_first_error(exc)}", uid) from None


def _review(response: AdmissionResponse) -> dict[str, Any]:
    # Fields left unset are left out, as the API server's own encoder does.
    return AdmissionReview(response=response).model_dump(exclude_none=True)


def allow(
    uid: str, patch: list[dict[str, Any]] | None = None, warnings: list[str] | None = None
) -> dict[str, Any]:
    """An allowing response; a non-empty ``patch`` is sent as base64 JSONPatch."""
    encoded = base64.b64encode(json.dumps(patch, separators=(",", ":")).encode()).decode() if patch else None
    return _review(
        AdmissionResponse(
            uid=uid,
            allowed=True,
            patch=encoded,
            patchType="JSONPatch" if encoded else None,
            warnings=warnings or None,
        )
    )


def deny(uid: str, message: str, code: int = 403, reason: str = "Forbidden") -> dict[str, Any]:
    """A denying response whose message says what to change."""
    return _review(
        AdmissionResponse(uid=uid, allowed=False, status=Status(code=code, message=message, reason=reason))
    )


def decode_patch(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSONPatch carried by a response (empty when none); used by tests and ``admission review``."""
    resp = response.get("response") or {}
    if not resp.get("patch"):
        return []
    patch: list[dict[str, Any]] = json.loads(base64.b64decode(resp["patch"]))
    return patch
