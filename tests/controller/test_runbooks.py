"""Every alert has a runbook that exists: whoever adds an alert adds docs/runbooks/<alert>.md.

The alerts are rendered as a person installs them (every example profile, and a profile with every optional
alert on: NCCL's Inspector, a Lustre baseline), for Prometheus Operator and for GKE Managed Prometheus; an
alert-like name written anywhere in the source (``"Fabricguard..."``) must have a runbook too, so an alert
that only some profile renders cannot slip past.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from controller_support import PROFILE
from typer.testing import CliRunner

from fabricguard.cli import app
from fabricguard.controller.alerts import RUNBOOK_BASE_URL, prometheus_rule, rule_groups
from fabricguard.controller.exporters import gmp_rules
from fabricguard.profile import load_profile, loads_profile

ROOT = Path(__file__).resolve().parents[2]
RUNBOOKS = ROOT / "docs" / "runbooks"
EVERYTHING_ON = PROFILE.replace(
    "spec:\n", "spec:\n  inspector: {delivery: hostPath, hostPath: /opt/nccl-inspector, belowFloorFor: 5m}\n", 1,
).replace("baseline: {allReduceBusBwGBps: 45}",
          "baseline: {allReduceBusBwGBps: 45, lustreRpcLatencyMs: 2}\n    proof: {every: 24h}")
SECTIONS = ("## What it means", "## How to confirm", "## What to do")
PLATFORMS = ("### GKE", "### EKS", "### InfiniBand / RoCE", "### DRA")


def invoke(args: list[str]):
    return CliRunner().invoke(app, args)


def _profiles() -> list:
    out = [load_profile(p) for p in sorted((ROOT / "examples" / "profiles").glob("*.yaml"))]
    out.append(loads_profile(EVERYTHING_ON))
    return out


def _rendered_alerts() -> dict[str, dict]:
    alerts: dict[str, dict] = {}
    for prof in _profiles():
        for doc in (prometheus_rule(prof, "fabricguard-system")["spec"],
                    gmp_rules(rule_groups(prof), "fabricguard-system")["spec"]):
            for g in doc["groups"]:
                for r in g["rules"]:
                    if "alert" in r:
                        alerts.setdefault(r["alert"], r)
    return alerts


def _named_in_source() -> set[str]:
    found: set[str] = set()
    for f in (ROOT / "src").rglob("*.py"):
        found |= set(re.findall(r'"(Fabricguard[A-Z][A-Za-z0-9]+)"', f.read_text()))
    return found


def test_the_everything_on_profile_renders_the_optional_alerts() -> None:
    names = set(_rendered_alerts())
    assert {"FabricguardJobBusBwBelowFloor", "FabricguardLustreLatencyHigh",
            "FabricguardFabricDaemonSetNeverReady"} <= names


def test_every_rendered_alert_links_a_runbook_that_exists() -> None:
    missing = []
    for name, rule in sorted(_rendered_alerts().items()):
        url = (rule.get("annotations") or {}).get("runbook_url", "")
        if url != f"{RUNBOOK_BASE_URL}/{name}.md":
            missing.append(f"{name}: runbook_url {url!r} (use alerts._rule, which sets it)")
        elif not (RUNBOOKS / f"{name}.md").is_file():
            missing.append(f"{name}: write docs/runbooks/{name}.md (see docs/runbooks/README.md for its sections)")
    assert not missing, "\n".join(missing)


def test_every_alert_named_in_the_source_has_a_runbook() -> None:
    missing = sorted(n for n in _named_in_source() if not (RUNBOOKS / f"{n}.md").is_file())
    assert not missing, f"alerts without docs/runbooks/<alert>.md: {missing}"


@pytest.mark.parametrize("path", sorted(RUNBOOKS.glob("Fabricguard*.md")), ids=lambda p: p.stem)
def test_each_runbook_says_what_it_means_how_to_confirm_and_what_to_do_per_platform(path: Path) -> None:
    text = path.read_text()
    assert text.startswith(f"# {path.stem}\n"), "the runbook's title is the alert's name"
    for heading in SECTIONS:
        assert f"\n{heading}\n" in text, f"{path.name}: no '{heading}' section"
    todo = text.split("## What to do", 1)[1]
    for heading in PLATFORMS:
        assert heading in todo, f"{path.name}: '## What to do' has no '{heading}' part"
    assert "```" in text.split("## How to confirm", 1)[1].split("## What to do", 1)[0], \
        f"{path.name}: 'How to confirm' gives no command to run"


def test_no_runbook_is_left_for_an_alert_that_no_longer_exists() -> None:
    alerts = set(_rendered_alerts()) | _named_in_source()
    orphans = sorted(p.stem for p in RUNBOOKS.glob("Fabricguard*.md") if p.stem not in alerts)
    assert not orphans, f"runbooks of alerts that no longer exist: {orphans}"


def test_the_runbook_index_lists_every_runbook() -> None:
    index = (RUNBOOKS / "README.md").read_text()
    for p in sorted(RUNBOOKS.glob("Fabricguard*.md")):
        assert f"({p.name})" in index, f"docs/runbooks/README.md does not link {p.name}"


def test_render_alerts_points_runbooks_at_a_mirror(tmp_path: Path) -> None:
    prof = tmp_path / "p.yaml"
    prof.write_text(PROFILE)
    r = invoke(["render", "alerts", "-p", str(prof), "--runbook-base-url", "https://wiki.example.com/rb/"])
    assert r.exit_code == 0, r.output
    rules = yaml.safe_load(r.stdout)["spec"]["groups"][0]["rules"]
    assert {x["annotations"]["runbook_url"] for x in rules} == {
        f"https://wiki.example.com/rb/{x['alert']}.md" for x in rules}
    bad = invoke(["render", "alerts", "-p", str(prof), "--runbook-base-url", "wiki/rb"])
    assert bad.exit_code == 3 and "--runbook-base-url" in bad.output
