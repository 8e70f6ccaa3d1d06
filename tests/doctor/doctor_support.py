"""Helpers for the doctor tests: the example snapshot builders (examples/snapshots/generate.py)."""

from __future__ import annotations

from pathlib import Path

from fabricguard.doctor.snapshot import Snapshot, snapshot_from_lists
from kube_support import gen as example_snapshots

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "snapshots"


gen = example_snapshots


def snap(lists: dict) -> Snapshot:
    return snapshot_from_lists(lists, source="test")
