"""Image references: runtime-style parsing, grammar problems, pinning warnings, and render refusing bad ones."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricguard.cli import app
from fabricguard.imageref import parse_reference, pinning_warnings, reference_problem

GKE = Path(__file__).resolve().parents[2] / "examples" / "profiles" / "gke-a3-ultra.yaml"
DIGEST = "sha256:" + "ab" * 32


def test_parse_like_a_runtime() -> None:
    assert str(parse_reference("nginx")) == "docker.io/library/nginx:latest"
    r = parse_reference(f"registry.corp:5000/mirror/plugin:v1.5.2@{DIGEST}")
    assert (r.registry, r.repository, r.tag, r.digest) == ("registry.corp:5000", "mirror/plugin", "v1.5.2", DIGEST)


@pytest.mark.parametrize(
    ("image", "fragment"),
    [
        ("", "empty"),
        ("bad image", "white space"),
        ("ghcr.io/x/fg@sha256:00", "malformed digest"),
        ("Upper/Case:v1", "not a valid reference"),
        ("ghcr.io/x/fg:", "not a valid reference"),
    ],
)
def test_reference_problems(image: str, fragment: str) -> None:
    problem = reference_problem(image)
    assert problem is not None and fragment in problem


@pytest.mark.parametrize("image", ["fg", "ghcr.io/x/fg:v1", f"localhost:5000/a/b@{DIGEST}", f"a.io/b:v2@{DIGEST}"])
def test_good_references(image: str) -> None:
    assert reference_problem(image) is None


def test_pinning() -> None:
    assert pinning_warnings(f"ghcr.io/x/fg@{DIGEST}") == []
    assert "tag-only" in pinning_warnings("ghcr.io/x/fg:v1")[0]
    assert ":latest" in pinning_warnings("ghcr.io/x/fg")[0]


def test_render_refuses_an_unpullable_image() -> None:
    res = CliRunner().invoke(app, ["render", "webhook", "--profile", str(GKE), "--image", "Repo/UPPER:v1"])
    assert res.exit_code == 3
    assert "expected [host[:port]/]repo[:tag][@sha256:<digest>]" in res.output
