"""Validate custom resources against a CustomResourceDefinition's openAPIV3Schema, as the API server would.

The schemas are Kubernetes structural schemas; JSON Schema reads them once three Kubernetes extensions are
translated: ``x-kubernetes-int-or-string`` (no ``type``: an integer or a string), ``x-kubernetes-preserve-unknown-
fields`` (anything goes below), and strict field validation (kubectl's default since 1.27: an unknown field is an
error, which catches a misspelt key that pruning would silently drop). CEL rules (``x-kubernetes-validations``) are
not evaluated here; the tests that depend on one say so.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

SCHEMAS = Path(__file__).resolve().parent / "data" / "schemas"


def _translate(node: Any) -> Any:
    if isinstance(node, list):
        return [_translate(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _translate(v) for k, v in node.items() if not k.startswith("x-kubernetes-")}
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("x-kubernetes-preserve-unknown-fields"):
        return out
    if out.get("type") == "object" and "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


@cache
def _crds() -> dict[tuple[str, str], tuple[str, dict[str, Any]]]:
    """(apiVersion, kind) -> (file, translated schema) for every served version of every CRD under SCHEMAS."""
    found: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
    for path in sorted(SCHEMAS.rglob("*.yaml")):
        # libyaml's loader: the pure-Python one took 15 s (70 s on a loaded machine) for these 2 MiB, per worker.
        for doc in yaml.load_all(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            for version in spec["versions"]:
                if not version.get("served"):
                    continue
                schema = _translate(version["schema"]["openAPIV3Schema"])
                # metadata is validated by the API server's ObjectMeta, not by the CRD.
                schema.setdefault("properties", {})["metadata"] = {"type": "object"}
                found[(f"{spec['group']}/{version['name']}", spec["names"]["kind"])] = (path.name, schema)
    return found


def crd_errors(obj: dict[str, Any]) -> list[str]:
    """Every schema violation of ``obj`` (empty when valid); raises KeyError when no shipped CRD serves its kind."""
    _, schema = _crds()[(obj["apiVersion"], obj["kind"])]
    validator = jsonschema.Draft7Validator(schema)
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}" for e in validator.iter_errors(obj)]


def has_schema(api_version: str, kind: str) -> bool:
    return (api_version, kind) in _crds()


def crd_subschema_errors(api_version: str, kind: str, path: tuple[str, ...], value: Any) -> list[str]:
    """Violations of ``value`` against the part of a CRD's schema at ``path`` (e.g. ``("status",
    "admissionChecks")``): for a patch that carries only that part, as a server-side apply of one field does."""
    _, schema = _crds()[(api_version, kind)]
    node = schema
    for key in path:
        node = node["properties"][key]
    validator = jsonschema.Draft7Validator(node)
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}" for e in validator.iter_errors(value)]
