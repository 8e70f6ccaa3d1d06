"""One grammar per Kubernetes name (fabricguard.dnsnames), and a pool name is checked as the label value it
becomes: ``profile check`` once accepted an 80-character pool name that no node's label could carry."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from fabricguard import dnsnames
from fabricguard.cli import app

PROFILE = {"apiVersion": "fabricguard.io/v1alpha1", "kind": "PlatformProfile", "metadata": {"name": "p"},
           "spec": {"pools": [{"name": "x", "nodeSelector": {"k": "v"}, "gpusPerNode": 8, "fabric": {"type": "none"}}]}}


@pytest.mark.parametrize(("value", "label", "subdomain", "label_value"), [
    ("a", True, True, True),
    ("a" * 63, True, True, True),
    ("a" * 64, False, True, False),
    ("a-b.c", False, True, True),
    ("A", False, False, True),
    ("a_b", False, False, True),
    ("-a", False, False, False),
    ("a.", False, False, False),
    ("", False, False, True),
    (".".join(["a" * 63] * 4), False, False, False),  # 255 characters
])
def test_the_three_grammars(value: str, label: bool, subdomain: bool, label_value: bool) -> None:
    assert dnsnames.is_label(value) is label
    assert dnsnames.is_subdomain(value) is subdomain
    assert dnsnames.is_label_value(value) is label_value


@pytest.mark.parametrize(("name", "ok"), [("p" * 63, True), ("p" * 64, False), ("p" * 80, False)])
def test_profile_check_refuses_a_pool_name_no_label_can_carry(tmp_path: Path, name: str, ok: bool) -> None:
    doc = PROFILE | {"spec": {"pools": [{**PROFILE["spec"]["pools"][0], "name": name}]}}  # type: ignore[index]
    f = tmp_path / "profile.yaml"
    f.write_text(yaml.safe_dump(doc))
    r = CliRunner().invoke(app, ["profile", "check", str(f)])
    assert r.exit_code == (0 if ok else 3), r.output
    if not ok:
        assert f"{len(name)} characters; a pool name is at most 63" in " ".join(r.output.split())
        assert "Traceback" not in r.output
