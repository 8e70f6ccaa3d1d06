"""A command's JSON against its published schema (docs/schemas/<kind>.schema.json, listed in docs/json.md): the
envelope first (``apiVersion``, ``kind``, ``verdict``), the document as the schema allows, and the exit code the
verdict maps to. Shared by tests/cli/test_json_schemas.py and the tests that run a command against the emulator
(every ``controller --once`` pass of the controller tests is checked here)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema

from fabricguard.exitcodes import VERDICT_EXIT

SCHEMAS = Path(__file__).resolve().parents[1] / "docs" / "schemas"


@functools.cache
def _validator(kind: str) -> jsonschema.Draft202012Validator:
    s = json.loads((SCHEMAS / f"{kind}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(s)
    return jsonschema.Draft202012Validator(s)


def schema(kind: str) -> dict[str, Any]:
    return dict(_validator(kind).schema)


def schema_errors(kind: str, doc: Any) -> list[str]:
    """Where ``doc`` breaks the schema of ``kind`` (at most 5, each with its JSON path); [] when it matches."""
    errors = sorted(_validator(kind).iter_errors(doc), key=lambda e: list(e.path))
    return [f"{list(e.path)}: {e.message[:200]}" for e in errors[:5]]


def assert_matches(kind: str, doc: Any, exit_code: int | None = None) -> None:
    """``doc`` opens with the envelope of ``kind``, matches its schema and, given the command's exit code, the
    verdict is the one that exit code means."""
    assert isinstance(doc, dict) and list(doc)[:3] == ["apiVersion", "kind", "verdict"], list(doc)[:3]
    errors = schema_errors(kind, doc)
    assert not errors, errors
    if exit_code is not None:
        assert doc["verdict"] in VERDICT_EXIT and exit_code == VERDICT_EXIT[doc["verdict"]], (doc["verdict"], exit_code)
