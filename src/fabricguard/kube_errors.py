"""The typed errors of the Kubernetes edge: one class per refusal a caller handles differently, built from the API
server's ``Status`` answer (message, reason, causes) and its ``Retry-After`` header. :mod:`fabricguard.kube` raises
them; every caller imports them from there or here."""

from __future__ import annotations

import json


def retry_after_seconds(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (the API server sends delta-seconds); None when absent or a date."""
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def status_of(body: bytes) -> tuple[str, str, tuple[dict[str, str], ...]]:
    """(message, reason, causes) of a ``Status`` the API server answered a refusal with."""
    try:
        doc = json.loads(body)
    except ValueError:
        return body[:200].decode("utf-8", "replace"), "", ()
    if not isinstance(doc, dict):
        return "", "", ()
    details = doc.get("details") if isinstance(doc.get("details"), dict) else {}
    causes = tuple({k: str(c[k]) for k in ("reason", "message", "field") if k in c}
                   for c in (details or {}).get("causes") or () if isinstance(c, dict))
    return str(doc.get("message", "") or ""), str(doc.get("reason", "") or ""), causes


class KubeError(RuntimeError):
    """A request that did not succeed. ``status`` is the HTTP status (None when no answer came), ``server`` the
    API server's URL, ``what`` the request (method, path); from the server's ``Status`` body, ``reason``
    (``AlreadyExists``, ``Invalid``, ``Forbidden``...) and ``causes`` (``details.causes``: each a dict with
    ``reason``, ``message`` and ``field``), and ``retry_after`` (seconds, from a 429/503's ``Retry-After``)."""

    def __init__(self, status: int | None, message: str, *, server: str = "", what: str = "", reason: str = "",
                 causes: tuple[dict[str, str], ...] = (), retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.server = server
        self.what = what
        self.reason = reason
        self.causes = causes
        self.retry_after = retry_after


class Conflict(KubeError):
    """409: the object changed since it was read (or already exists, for a create)."""


class NotFound(KubeError):
    """404: the object, or its resource type (a CRD that is not installed), does not exist."""


class Forbidden(KubeError):
    """401 or 403: the credentials may not do this (RBAC, an admission policy, an expired token)."""


class Gone(KubeError):
    """410: a watch's or a list's resourceVersion is too old; list again."""


class Invalid(KubeError):
    """400 or 422: the server refused the body (a failed JSON patch ``test`` is one)."""


class Unreachable(KubeError):
    """No answer: the connection was refused or reset, the name did not resolve, TLS failed."""


class TimedOut(KubeError):
    """The server accepted the connection but did not answer within the timeout or the call's deadline."""


class Undeclared(KubeError):
    """A request that the client's permission table does not declare: a bug here, refused before it is sent."""


BY_STATUS: dict[int, type[KubeError]] = {409: Conflict, 404: NotFound, 403: Forbidden, 401: Forbidden, 410: Gone,
                                          422: Invalid, 400: Invalid}


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the API server did not answer (so a one-shot command exits 3, input unusable)."""
    return isinstance(exc, Unreachable | TimedOut)
