"""A reference snapshot: what another environment runs, published where this cluster's controller can read it.

The 271-day stopgap lived in staging and never reached production; ``doctor diff`` finds that on demand, and
this module makes it continuous. ``fabricguard snapshot --publish NS/NAME`` (run in staging) writes the objects
``doctor diff`` compares, normalized and gzipped, into a ConfigMap (``binaryData``, under the API server's 1 MiB
object limit) in the cluster named by ``--publish-kubeconfig``; the controller of that cluster reads it on every
pass (``--reference NS/NAME``), diffs it against itself and exports the drift as metrics for an alert.

Pure: bytes in, bytes out; the I/O is the caller's.
"""

from __future__ import annotations

import base64
import gzip
import json
import zlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fabricguard import dnsnames, names
from fabricguard.doctor.diff import Scope, normalize, select_objects
from fabricguard.doctor.snapshot import Snapshot
from fabricguard.options import namespace_problem
from fabricguard.times import format_time

DATA_KEY = "reference.json.gz"
LABEL = names.LABEL_REFERENCE
ANN_ENVIRONMENT = names.ANN_REFERENCE_ENVIRONMENT
ANN_PUBLISHED = names.ANN_REFERENCE_PUBLISHED
# The API server refuses objects over 1.5 MiB (etcd's request limit); stay well below with base64's growth.
MAX_BYTES = 900 * 1024


class ReferenceError(ValueError):
    """A reference that cannot be published or read; the message says which and why."""


@dataclass(frozen=True)
class Reference:
    snapshot: Snapshot
    environment: str
    published: str | None


def encode(snapshot: Snapshot, scope: Scope) -> bytes:
    """The objects ``scope`` covers, without server-managed fields, as gzipped JSON."""
    return encode_objects([normalize(obj) for obj in select_objects(snapshot, scope).values()])


def encode_objects(objs: list[dict[str, Any]]) -> bytes:
    """Already normalized objects as the reference's gzipped JSON ``List``; too big for a ConfigMap raises."""
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}, sort_keys=True).encode()
    data = gzip.compress(body, mtime=0)
    if len(data) > MAX_BYTES:
        raise ReferenceError(f"the reference is {len(data) // 1024} KiB gzipped, over the {MAX_BYTES // 1024} KiB a "
                             "ConfigMap can carry; narrow it with --publish-namespace NS (repeatable: only the "
                             "DaemonSets and ConfigMaps of those namespaces)")
    return data


MAX_DECODED_BYTES = 256 * 1024**2  # what a 900 KiB gzip may expand to before it is refused (a gzip bomb)


def decode(data: bytes, source: str) -> Snapshot:
    try:
        z = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        raw = z.decompress(data, MAX_DECODED_BYTES)
        if z.unconsumed_tail:
            raise ReferenceError(f"{source}: the reference expands past {MAX_DECODED_BYTES // 1024**2} MiB; "
                                 "publish it again with fabricguard snapshot --publish")
        doc = json.loads(raw)
    except (zlib.error, ValueError, EOFError) as exc:
        if isinstance(exc, ReferenceError):
            raise
        raise ReferenceError(f"{source}: not a fabricguard reference ({exc})") from None
    except RecursionError:
        raise ReferenceError(f"{source}: not a fabricguard reference (JSON nested too deeply)") from None
    items = doc.get("items") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise ReferenceError(f"{source}: not a fabricguard reference (no items)")
    return Snapshot(objects=[o for o in items if isinstance(o, dict)], source=source)


def configmap(name: str, namespace: str, data: bytes, environment: str, now: datetime) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {LABEL: "true", names.LABEL_MANAGED_BY: "fabricguard"},
            "annotations": {ANN_ENVIRONMENT: environment, ANN_PUBLISHED: format_time(now)},
        },
        "binaryData": {DATA_KEY: base64.b64encode(data).decode()},
    }


def from_configmap(cm: dict[str, Any]) -> Reference:
    meta = cm.get("metadata") or {}
    where = f"ConfigMap {meta.get('namespace')}/{meta.get('name')}"
    raw = (cm.get("binaryData") or {}).get(DATA_KEY)
    if not raw:
        raise ReferenceError(f"{where} has no binaryData {DATA_KEY}; publish it with fabricguard snapshot --publish")
    try:
        data = base64.b64decode(raw, validate=True)
    except ValueError:
        raise ReferenceError(f"{where}: binaryData {DATA_KEY} is not base64") from None
    ann = meta.get("annotations") or {}
    return Reference(decode(data, where), str(ann.get(ANN_ENVIRONMENT) or "reference"), ann.get(ANN_PUBLISHED))


def parse_target(text: str) -> tuple[str, str]:
    """``NAMESPACE/NAME`` of a ConfigMap."""
    ns, sep, name = text.partition("/")
    if not sep or not ns or not name or "/" in name:
        raise ReferenceError(f"{text!r} is not NAMESPACE/NAME, e.g. fabricguard-system/staging-reference")
    problem = namespace_problem(ns)
    if problem:
        raise ReferenceError(f"{text!r}: the namespace {problem}")
    if not dnsnames.is_subdomain(name):
        raise ReferenceError(
            f"{text!r}: {name!r} is not a ConfigMap name: lowercase letters, digits, '-' and '.', starting and "
            "ending with a letter or digit (RFC 1123 subdomain), e.g. staging-reference"
        )
    return ns, name
