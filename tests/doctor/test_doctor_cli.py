"""The CLI end to end on the example snapshots: exit codes, formats, diff, unusable input."""

from __future__ import annotations

import json
import re
from pathlib import Path

from doctor_support import EXAMPLES
from typer.testing import CliRunner

from fabricguard.cli import app

NOW = "2025-09-30T12:00:00Z"
PROD = EXAMPLES / "incident-271-days" / "production"
STAG = EXAMPLES / "incident-271-days" / "staging"
HEALTHY = EXAMPLES / "healthy"
runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_incident_exits_1_with_json_findings():
    r = run("doctor", "--snapshot", str(PROD), "--now", NOW, "--format", "json")
    assert r.exit_code == 1
    data = json.loads(r.stdout)
    rules = [f["rule"] for f in data["findings"]]
    # Cause first (issue 30): the image for the wrong CPU, then the never-ready DaemonSet it explains.
    assert rules[:2] == ["image-arch-mismatch", "daemonset-never-ready"] and "node-not-gated" in rules
    f = data["findings"][1]
    assert set(f) == {"rule", "severity", "objects", "message", "evidence", "fix", "cause"}
    assert "never ready in 271 days" in f["message"]
    assert f["cause"] == "image-arch-mismatch on DaemonSet network-operator/rdma-shared-dp-ds"
    assert "-l name=rdma-shared-dp-ds" in f["fix"] and "<selector>" not in f["fix"]
    assert data["summary"] == {"critical": 4, "warning": 2, "info": 0}


def test_healthy_and_staging_exit_0():
    assert run("doctor", "--snapshot", str(HEALTHY), "--now", NOW).exit_code == 0
    r = run("doctor", "--snapshot", str(STAG), "--now", NOW, "--format", "json")
    assert r.exit_code == 0 and {f["severity"] for f in json.loads(r.stdout)["findings"]} == {"warning"}


def test_fail_on_warning():
    assert run("doctor", "--snapshot", str(STAG), "--now", NOW, "--fail-on", "warning").exit_code == 1


def test_table_groups_by_severity():
    r = run("doctor", "--snapshot", str(PROD), "--now", NOW)
    out = r.stdout
    # The verdict first (issue 30), then every critical before any warning.
    assert out.startswith("DEGRADED  fabricguard doctor: 4 critical, 2 warning")
    assert out.rindex("\nCRITICAL ") < out.index("\nWARNING ")
    assert "daemonset-never-ready" in out


def test_markdown_has_grid_and_evidence():
    r = run("doctor", "--snapshot", str(PROD), "--now", NOW, "--format", "markdown")
    assert "| pool | daemonset-never-ready |" in r.stdout and "| gh200-roce (6 nodes) | FAIL |" in r.stdout
    assert "**Fix:**" in r.stdout


def test_html_is_self_contained(tmp_path: Path):
    out = tmp_path / "report.html"
    r = run("doctor", "--snapshot", str(PROD), "--now", NOW, "--format", "html", "--output", str(out))
    assert r.exit_code == 1
    page = out.read_text()
    assert page.startswith("<!doctype html>") and "<svg" in page and "Pools × checks" in page
    assert "network-operator/rdma-shared-dp-ds" in page and "never-ready · 271 days" in page
    assert not re.search(r"(src|href)=['\"]?https?://", page)  # no CDN, nothing fetched


def test_unusable_input_exits_3(tmp_path: Path):
    (tmp_path / "bad.json").write_text("{\n  nope\n}")
    r = run("doctor", "--snapshot", str(tmp_path), "--now", NOW)
    assert r.exit_code == 3 and "bad.json:2" in r.stderr
    assert run("doctor", "--snapshot", str(PROD), "--now", "yesterday").exit_code == 3
    assert run("doctor", "--snapshot", str(tmp_path / "missing"), "--now", NOW).exit_code == 3
    bad_profile = tmp_path / "p.yaml"
    bad_profile.write_text("apiVersion: fabricguard.io/v1alpha1\nkind: PlatformProfile\nmetadata: {name: x}\n")
    assert run("doctor", "--snapshot", str(PROD), "--profile", str(bad_profile), "--now", NOW).exit_code == 3


def test_explicit_profile_overrides_snapshot_profile():
    r = run(
        "doctor",
        "--snapshot",
        str(PROD),
        "--now",
        NOW,
        "--format",
        "json",
        "--profile",
        str(EXAMPLES.parent / "profiles" / "aws-p5-efa.yaml"),
    )
    # No node matches the AWS pools: only the profile-free rules fire.
    assert {f["rule"] for f in json.loads(r.stdout)["findings"]} == {"daemonset-never-ready", "image-arch-mismatch"}


def test_diff_names_both_sides():
    r = run("doctor", "diff", str(STAG), str(PROD), "--format", "json")
    assert r.exit_code == 0
    [f] = json.loads(r.stdout)["findings"]
    assert f["rule"] == "drift" and f["severity"] == "warning"
    [(path, sides)] = [(k, v) for k, v in f["evidence"].items() if k.endswith(".image")]
    assert path == "spec.template.spec.containers[name=rdma-shared-dp].image"
    assert sides["staging"].endswith("@" + sides["difference"].split()[1])
    assert sides["production"].endswith(":v1.5.2")
    assert "staging has" in f["message"] and "production has" in f["message"]
