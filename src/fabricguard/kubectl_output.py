"""Files of ``kubectl get ... -o json|yaml`` output: their documents, and the objects of their Lists.

One reader for every command that takes saved objects (``doctor --snapshot DIR``, ``verify-job --objects
FILE``): bounded reads (``userfiles``), JSON or YAML by content, and every error one ``SourceError`` naming the
file and line. The API server leaves ``kind`` out of a List's items and kubectl fills it in: both shapes are
accepted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fabricguard.yamlsource import SourceError, YamlSyntaxError, loads_documents, read_text


def documents(path: Path) -> list[Any]:
    """Every document in the file (a top-level JSON array is its documents); ``SourceError`` naming the file."""
    text = read_text(path)
    docs: list[Any]
    if path.suffix == ".json" or text.lstrip().startswith(("{", "[")):
        try:
            docs = [json.loads(text)]
        except json.JSONDecodeError as exc:
            raise SourceError(str(path), exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})") from None
        except RecursionError:
            raise SourceError(str(path), None, "JSON nested too deeply to read (no Kubernetes object is); "
                              "save the objects with kubectl get ... -o json") from None
    else:
        try:
            docs = loads_documents(text, str(path))
        except YamlSyntaxError as exc:
            raise SourceError(exc.source, exc.line, f"invalid YAML: {exc.problem}") from None
    if len(docs) == 1 and isinstance(docs[0], list):
        docs = docs[0]
    return docs


def is_object(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("kind"), str) and isinstance(doc.get("apiVersion"), str)


def is_list(doc: Any) -> bool:
    """A ``List`` (kubectl's) or a typed list (``PodList``, the API server's)."""
    return is_object(doc) and (doc["kind"] == "List" or (
        doc["kind"].endswith("List") and isinstance(doc.get("items"), list)))


def list_items(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The objects of a List, ``kind`` and ``apiVersion`` filled in from a typed list where the items lack them."""
    item_kind = doc["kind"][: -len("List")] if doc["kind"] != "List" else ""
    for item in doc.get("items") or ():
        if not isinstance(item, dict):
            continue
        if "kind" not in item and item_kind:
            item["kind"] = item_kind
            item.setdefault("apiVersion", doc["apiVersion"])
        if is_object(item):
            yield item


def objects_in(path: Path) -> list[dict[str, Any]]:
    """Every Kubernetes object in the file, Lists opened."""
    out: list[dict[str, Any]] = []
    for doc in documents(path):
        if is_list(doc):
            out.extend(list_items(doc))
        elif is_object(doc):
            out.append(doc)
    return out
