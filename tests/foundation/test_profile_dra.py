"""``profile check`` explains each pool's fabric mode in one line; the DRA block's forms and refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricguard.cli import app
from fabricguard.profile import ProfileError, load_profile, loads_profile

PROFILES = Path(__file__).resolve().parents[2] / "examples" / "profiles"


def test_profile_check_explains_every_pools_fabric_mode() -> None:
    res = CliRunner().invoke(app, ["profile", "check", "--format", "json", str(PROFILES / "gke-a4-dranet.yaml"),
                                   str(PROFILES / "aws-p5-efa-dra.yaml"), str(PROFILES / "aws-p5-efa.yaml")])
    assert res.exit_code == 0, res.output
    modes = {k: v for r in json.loads(res.stdout)["results"] for k, v in r["fabricModes"].items()}
    assert modes["b200-dranet"].startswith("DRA claim: 8 device(s) of DeviceClass mrdma.google.com per GPU pod")
    assert "ResourceClaimTemplate fabricguard-b200-dranet-fabric" in modes["b200-dranet"]
    assert modes["p5-efa-dra"].startswith("DRA, KEP-5004: pods request vpc.amazonaws.com/efa=32, backed by "
                                          "DeviceClass efa.networking.k8s.aws")
    assert modes["p5-efa"].startswith("device plugin: kube-system/aws-efa-k8s-device-plugin-daemonset advertises "
                                      "vpc.amazonaws.com/efa=32")
    assert modes["g6-single"] == "no fabric: pods talk over the pod network"
    human = CliRunner().invoke(app, ["profile", "check", str(PROFILES / "gke-a4-dranet.yaml")])
    assert "b200-dranet: DRA claim" in " ".join(human.stdout.split())


BASE = PROFILES / "aws-p5-efa-dra.yaml"


@pytest.mark.parametrize("old,new,needle", [
    ("      resources: {vpc.amazonaws.com/efa: 32}\n", "", "must be the one key of fabric.resources"),
    ("        extendedResourceName: vpc.amazonaws.com/efa\n", "        count: 32\n",
     "is not an extended resource: drop fabric.resources"),
    ("      dra:\n", "      devicePlugin: {namespace: kube-system, daemonSet: efa}\n      dra:\n",
     "set fabric.devicePlugin or fabric.dra, not both"),
    ("        extendedResourceName: vpc.amazonaws.com/efa\n",
     "        extendedResourceName: vpc.amazonaws.com/efa\n        count: 4\n", "drop dra.count"),
])
def test_incoherent_dra_fabrics_are_refused_naming_the_field(old: str, new: str, needle: str) -> None:
    text = BASE.read_text()
    assert old in text
    with pytest.raises(ProfileError) as exc:
        loads_profile(text.replace(old, new, 1))
    assert needle in str(exc.value)


def test_dra_pools_get_their_driver_as_fabric_daemonset_and_no_network_annotation() -> None:
    prof = load_profile(PROFILES / "gke-a4-dranet.yaml")
    pool = prof.pool()
    assert pool.fabric.fabric_daemonset is not None
    assert pool.fabric.fabric_daemonset.daemonSet == "networking-dra-driver"
    assert next((d.name, d.role) for d in prof.fabric_daemonsets()) == ("networking-dra-driver", "dra-driver")
    assert pool.fabric.network_annotation_style == "none"
