"""The stored form of an object and the JSON Patch between two forms: pure, shared by the webhook and the controller.

:func:`stored` is a value as the API server stores it (Go's ``omitempty``, ``fieldRef.apiVersion: v1``,
canonical quantities), for comparisons: an object the webhook patched, stored and reviewed again must compare
equal. :func:`diff` is the RFC 6902 patch from an object to a copy that only adds keys, appends items or changes
values, with RFC 6901 escaping (``jsonpointer``); :class:`Recorder` notes the operations as the changes are made
(the admission webhook's patch, ``admission/mutate.py``). The controller compares what it wants with what is
stored (``controller/claims.py``).
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



# ---------------------------------------------------------------------------------------------- recorded patch


class Recorder:
    """The JSON Patch of the changes made to an object, recorded as they are made: no copy compared afterwards.

    ``Recorder.copy_of(obj)`` copies the object once and addresses every map and list of the copy by identity.
    Each change goes through :meth:`set`, :meth:`append`, :meth:`insert`, :meth:`pop` or :meth:`replace`: on a map
    or list of the object it is made and its operation noted (``add``, ``replace`` or ``remove``, RFC 6901 escaped, list
    items by index); a map or list the changes themselves put in is new, so it is changed directly and its final
    content rides in the operation that added it. A key added and then removed again (an empty map put in on the
    way) leaves no operation, so a run that changes nothing records nothing.
    """

    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []
        self._up: dict[int, tuple[Any, str | int] | None] = {}  # map or list of the object -> (parent, key)
        self._added: dict[tuple[int, str], dict[str, Any]] = {}  # (map, key) -> the operation that added it
        self._kept: list[Any] = []  # what was removed or replaced stays alive: its id is never another's
        self._paths: dict[int, str] = {}

    @classmethod
    def copy_of(cls, obj: dict[str, Any]) -> tuple[dict[str, Any], Recorder]:
        """A copy of ``obj`` to change (``obj`` itself is never changed) and the recorder of its changes."""
        rec = cls()
        root: dict[str, Any] = rec._copy(obj, None)
        return root, rec

    def _copy(self, value: Any, up: tuple[Any, str | int] | None) -> Any:
        if isinstance(value, dict):
            d: dict[str, Any] = {}
            self._up[id(d)] = up
            for k, v in value.items():
                d[k] = self._copy(v, (d, k)) if isinstance(v, (dict, list)) else v
            return d
        if isinstance(value, list):
            items: list[Any] = []
            self._up[id(items)] = up
            for i, v in enumerate(value):
                items.append(self._copy(v, (items, i)) if isinstance(v, (dict, list)) else v)
            return items
        return value

    def _path(self, container: Any) -> str | None:
        """The JSON pointer of a map or list of the object (kept once asked); None for one the changes put in."""
        key = id(container)
        path = self._paths.get(key)
        if path is not None or key not in self._up:
            return path
        up = self._up[key]
        path = "" if up is None else f"{self._path(up[0])}/{_escape(str(up[1]))}"
        self._paths[key] = path
        return path

    def set(self, mapping: dict[str, Any], key: str, value: Any) -> Any:
        """``mapping[key] = value``, noted; returns ``value``."""
        if id(mapping) not in self._up:  # a map the changes put in: its content rides in the operation that added it
            mapping[key] = value
            return value
        existed = key in mapping
        if existed:
            self._kept.append(mapping[key])
        mapping[key] = value
        added = self._added.get((id(mapping), key))
        if added is not None:
            added["value"] = value
            return value
        op = {"op": "replace" if existed else "add", "path": f"{self._path(mapping)}/{_escape(key)}", "value": value}
        self.ops.append(op)
        if not existed:
            self._added[(id(mapping), key)] = op
        return value

    def pop(self, mapping: dict[str, Any], key: str) -> None:
        """``mapping.pop(key)`` (nothing when absent), noted; a key this recorder added leaves no operation."""
        if key not in mapping:
            return
        self._kept.append(mapping.pop(key))
        added = self._added.pop((id(mapping), key), None)
        if added is not None:
            del self.ops[next(i for i, op in enumerate(self.ops) if op is added)]  # that very op, not an equal one
            return
        where = self._path(mapping)
        if where is not None:
            self.ops.append({"op": "remove", "path": f"{where}/{_escape(key)}"})

    def append(self, items: list[Any], value: Any) -> Any:
        """``items.append(value)``, noted by the index it takes; returns ``value``."""
        items.append(value)
        if id(items) in self._up:
            self.ops.append({"op": "add", "path": f"{self._path(items)}/{len(items) - 1}", "value": value})
        return value

    def insert(self, items: list[Any], index: int, value: Any) -> Any:
        """``items.insert(index, value)``, noted; the items after it are addressed by their new index from here
        on (a later change to one of them names where it now is). Returns ``value``."""
        items.insert(index, value)
        if id(items) in self._up:
            for j in range(index + 1, len(items)):
                if id(items[j]) in self._up:
                    self._up[id(items[j])] = (items, j)
            self._paths.clear()  # a cache of addresses, some of which just moved
            self.ops.append({"op": "add", "path": f"{self._path(items)}/{index}", "value": value})
        return value

    def replace(self, items: list[Any], index: int, value: Any) -> None:
        """``items[index] = value``, noted."""
        self._kept.append(items[index])
        items[index] = value
        where = self._path(items)
        if where is not None:
            self.ops.append({"op": "replace", "path": f"{where}/{index}", "value": value})


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
