"""One version source that moves: ``fabricguard.__version__`` is what pyproject, ``--version``, CHANGELOG.md
and the install tree's ``app.kubernetes.io/version`` labels say; and a change of the FabricValidation schema is a
decision recorded against the version the CRD serves, never an accident."""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from pathlib import Path

from typer.testing import CliRunner

from fabricguard import __version__, names
from fabricguard.cli import app
from fabricguard.controller.manifests import crd
from fabricguard.placement.install import Options, components
from fabricguard.profile import load_profile

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "tests" / "data" / "crd-schemas.json"
IMAGE = "registry.example.com/fabricguard@sha256:" + "a" * 64


def test_one_version_source() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "fabricguard.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)
    r = CliRunner().invoke(app, ["--version"])
    assert r.exit_code == 0 and __version__ in r.output
    first = re.search(r"^## \[?(\d+\.\d+\.\d+)\]?", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert first is not None and first.group(1) == __version__, "CHANGELOG.md's newest entry is not this version"


def test_every_installed_object_names_the_release_and_no_selector_does() -> None:
    path = ROOT / "examples" / "profiles" / "gke-a3-ultra.yaml"
    comps = components(load_profile(path), path.read_text(), Options(IMAGE, IMAGE, IMAGE))
    objs = [o for c in comps for o in c.objects]
    assert objs and all(o["metadata"]["labels"][names.LABEL_APP_VERSION] == __version__ for o in objs)
    for o in objs:
        sel = ((o.get("spec") or {}).get("selector") or {})
        assert names.LABEL_APP_VERSION not in (sel.get("matchLabels") or sel), o["metadata"]["name"]


def test_the_crd_schema_changes_only_with_a_recorded_decision() -> None:
    c = crd()
    recorded = json.loads(SCHEMAS.read_text())[c["metadata"]["name"]]
    served = {v["name"]: hashlib.sha256(json.dumps(v["schema"], sort_keys=True).encode()).hexdigest()
              for v in c["spec"]["versions"] if v.get("served")}
    assert set(served) == set(recorded), f"served versions {sorted(served)} != recorded {sorted(recorded)}"
    for version, digest in served.items():
        assert digest == recorded[version], (
            f"the {c['metadata']['name']} {version} schema changed: if old objects still validate (an added "
            f"optional field), record the new digest {digest} in {SCHEMAS.relative_to(ROOT)} and say so in "
            "CHANGELOG.md; otherwise serve a new version (names.FV_API) with a conversion")
    assert names.FV_API.endswith("/" + next(v["name"] for v in c["spec"]["versions"] if v.get("storage")))
