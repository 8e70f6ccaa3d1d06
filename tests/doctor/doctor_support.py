"""Helpers for the doctor tests: the example snapshot builders (examples/snapshots/generate.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from fabricguard.doctor.snapshot import Snapshot, snapshot_from_lists

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "snapshots"


def _load_generate() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fg_example_snapshots", EXAMPLES / "generate.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


gen = _load_generate()


def snap(lists: dict) -> Snapshot:
    return snapshot_from_lists(lists, source="test")
