"""The stored form of an object and the JSON Patch between two forms: pure, shared by the webhook and the controller.

:func:`stored` is a value as the API server stores it (Go's ``omitempty``, ``fieldRef.apiVersion: v1``,
canonical quantities), for comparisons: an object the webhook patched, stored and reviewed again must compare
equal. :func:`diff` is the RFC 6902 patch from an object to a copy that only adds keys, appends items or changes
values, with RFC 6901 escaping (``jsonpointer``). The admission webhook builds its patch with them
(``admission/mutate.py``); the controller compares what it wants with what is stored (``controller/claims.py``).
"""

from __future__ import annotations

from typing import Any

from jsonpointer import escape as _escape

from fabricguard import quantity

# ---------------------------------------------------------------------------------------------- JSON Patch


def escape(token: str | int) -> str:
    """One RFC 6901 reference token (``~`` is ``~0``, ``/`` is ``~1``)."""
    return _escape(str(token))


def pointer(path: tuple[str | int, ...]) -> str:
    return "".join("/" + escape(p) for p in path)


# ---------------------------------------------------------------------------------------------- stored form

_QUANTITY_KEYS = frozenset({"sizeLimit", "divisor"})


def stored(value: Any, key: str = "") -> Any:
    """``value`` as the API server would store it, for comparisons only.

    Empty strings, false, null and empty maps/lists are dropped (Go's ``omitempty``); ``fieldRef`` gets its
    default ``apiVersion: v1``; quantities (``sizeLimit``, ``divisor``, resource amounts) are canonical.
    """
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            sv = stored(v, k)
            if sv not in ("", False, None, {}, []):
                out[k] = sv
        if key == "fieldRef" and "apiVersion" not in out:
            out["apiVersion"] = "v1"
        if key in ("limits", "requests"):
            out = {k: quantity.canonical(v) for k, v in out.items()}
        return out
    if isinstance(value, list):
        return [stored(v) for v in value]
    if key in _QUANTITY_KEYS:
        return quantity.canonical(value)
    return value



def diff(old: Any, new: Any, base: str = "") -> list[dict[str, Any]]:
    """The JSONPatch from ``old`` to ``new`` where ``new`` only adds keys, appends items or changes values.

    ``base`` is the JSON pointer of ``old`` within the document.
    """
    if isinstance(old, dict) and isinstance(new, dict):
        ops: list[dict[str, Any]] = []
        for k, v in new.items():
            if k not in old:
                ops.append({"op": "add", "path": f"{base}/{_escape(k)}", "value": v})
            elif old[k] is not v and old[k] != v:
                ops += diff(old[k], v, f"{base}/{_escape(k)}")
        for k in old:
            if k not in new:
                ops.append({"op": "remove", "path": f"{base}/{_escape(k)}"})
        return ops
    if isinstance(old, list) and isinstance(new, list) and len(new) >= len(old):
        ops = []
        for i, v in enumerate(new):
            if i >= len(old):
                ops.append({"op": "add", "path": f"{base}/{i}", "value": v})
            elif old[i] is not v and old[i] != v:
                ops += diff(old[i], v, f"{base}/{i}")
        return ops
    return [{"op": "replace", "path": base, "value": new}]
