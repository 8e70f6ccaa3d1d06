"""Run ``promtool test rules`` (Debian package ``prometheus``) on rules rendered by fabricguard."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml


def promtool() -> str:
    exe = shutil.which("promtool")
    if exe is None:
        pytest.skip("promtool is not installed (Debian package prometheus; make deps installs it)")
    return exe


def without_annotations(groups: dict[str, Any]) -> dict[str, Any]:
    """The rules with their annotations left out: promtool compares annotations verbatim, and the tests judge
    expressions, durations and labels (``promtool check rules`` still checks the annotation templates)."""
    g = json.loads(json.dumps(groups))
    for grp in g["groups"]:
        for r in grp["rules"]:
            r.pop("annotations", None)
    return g


def run_promtool_tests(tmp: Path, groups: dict[str, Any], tests: list[dict[str, Any]], *,
                       annotations: bool = False) -> subprocess.CompletedProcess:
    """``annotations``: keep them, for a test that judges the rendered text (``exp_annotations``)."""
    exe = promtool()
    full = tmp / "full-rules.yaml"
    full.write_text(yaml.safe_dump(groups, sort_keys=False))
    check = subprocess.run([exe, "check", "rules", str(full)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    rules = tmp / "rules.yaml"
    rules.write_text(yaml.safe_dump(groups if annotations else without_annotations(groups), sort_keys=False))
    spec = {"rule_files": [rules.name], "evaluation_interval": "1m", "tests": tests}
    test_file = tmp / "rules_test.yaml"
    test_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    return subprocess.run([exe, "test", "rules", test_file.name], capture_output=True, text=True, timeout=120,
                          cwd=tmp)


def series_from_exposition(text: str) -> list[dict[str, str]]:
    """Prometheus text exposition -> promtool input series, each value held constant for an hour."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#") or "_created" in line.split(" ")[0]:
            continue
        name, value = line.rsplit(" ", 1)
        out.append({"series": name, "values": f"{float(value):g}x60"})
    return out
