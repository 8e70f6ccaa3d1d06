"""Fail loud with today's NCCL: NIC-count mismatch fails init, EKS Pod Identity's link is never a socket
interface, and Kueue's multi-layer slice annotation is never joined by the slice pair it excludes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from admission_support import PROFILES, load_review, with_object

from fabricguard.admission import review as rv
from fabricguard.admission.decide import Admission
from fabricguard.admission.mutate import TAS_SLICE, TAS_SLICE_LAYERS, TAS_SLICE_SIZE, socket_ifname
from fabricguard.profile import PlatformProfile, load_profile
from fabricguard.profile.loader import ProfileError
from fabricguard.profile.model import FabricType

ROOT = Path(__file__).resolve().parents[2]
ONPREM = ROOT / "examples" / "profiles" / "onprem-infiniband.yaml"
AWS = ROOT / "examples" / "profiles" / "aws-p5-efa.yaml"


def _body(profile: PlatformProfile, review: dict[str, Any]) -> dict[str, Any]:
    d = Admission(profile).handle("review", json.dumps(review))  # type: ignore[arg-type]
    assert d.status == 200
    return d.body


def _patched(profile: PlatformProfile, review: dict[str, Any]) -> dict[str, Any]:
    body = _body(profile, review)
    assert body["response"]["allowed"], body["response"].get("status")
    return jsonpatch.apply_patch(review["request"]["object"], rv.decode_patch(body))


def _env(c: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}


def _gpu_env(obj: dict[str, Any]) -> dict[str, Any]:
    if obj["kind"] == "Job":
        return _env(obj["spec"]["template"]["spec"]["containers"][0])
    if obj["kind"] == "JobSet":
        return _env(obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["containers"][0])
    raise AssertionError(obj["kind"])


@pytest.mark.parametrize("path", PROFILES, ids=[p.stem for p in PROFILES])
def test_fabric_pools_inject_net_mismatch_fails_init(path: Path) -> None:
    profile = load_profile(path)
    pool = profile.pool(None)
    review = load_review("job")
    review["request"]["object"]["metadata"].setdefault("labels", {})["fabricguard.io/pool"] = pool.name
    if not pool.fabric.has_fabric:
        pytest.skip("no fabric pool to inject")
    body = _body(profile, review)
    assert rv.decode_patch(body), "a fabric pool's job got no patch at all"
    obj = jsonpatch.apply_patch(review["request"]["object"], rv.decode_patch(body))
    assert _gpu_env(obj)["NCCL_IGNORE_NET_MISMATCH"] == "0"
    again = _body(profile, with_object(review, obj))
    assert rv.decode_patch(again) == []  # idempotent on the stored form


def test_efa_socket_ifname_excludes_the_pod_identity_link() -> None:
    assert socket_ifname(FabricType.efa, None) == "^lo,docker,pod-id-link"
    assert socket_ifname(FabricType.efa, "^lo,docker") == "^lo,docker,pod-id-link"
    assert socket_ifname(FabricType.efa, "^pod-id-link0,lo") == "^pod-id-link0,lo"
    assert socket_ifname(FabricType.efa, "^p") == "^p"  # "p" already excludes pod-id-link0
    assert socket_ifname(FabricType.efa, "eth0") == "eth0"
    assert socket_ifname(FabricType.infiniband, None) is None


def test_efa_job_gets_the_exclusion_in_its_env() -> None:
    obj = _patched(load_profile(AWS), load_review("jobset"))
    assert _gpu_env(obj)["NCCL_SOCKET_IFNAME"] == "^lo,docker,pod-id-link"


@pytest.mark.parametrize("value", ["pod", "=pod-id-link0", "eth,p"])
def test_efa_profile_refuses_an_include_list_that_matches_the_link(tmp_path: Path, value: str) -> None:
    text = AWS.read_text().replace("type: efa", f"type: efa\n      socketIfname: '{value}'", 1)
    f = tmp_path / "p.yaml"
    f.write_text(text)
    with pytest.raises(ProfileError, match="pod-id-link0"):
        load_profile(f)


def test_profile_refuses_ignoring_a_net_mismatch(tmp_path: Path) -> None:
    text = ONPREM.read_text().replace("socketIfname: eth0", "socketIfname: eth0\n      env: {NCCL_IGNORE_NET_MISMATCH: '1'}", 1)
    f = tmp_path / "p.yaml"
    f.write_text(text)
    with pytest.raises(ProfileError, match="NCCL_IGNORE_NET_MISMATCH"):
        load_profile(f)


def _sliced(tmp_path: Path) -> PlatformProfile:
    text = ONPREM.read_text().replace(
        "topology: {level: network.example.com/leaf, mode: required}",
        "topology: {level: network.example.com/leaf, mode: required, sliceLevel: kubernetes.io/hostname, "
        "sliceSize: 2}",
        1,
    )
    f = tmp_path / "sliced.yaml"
    f.write_text(text)
    return load_profile(f)


def test_pool_slices_are_added_without_multi_layer_constraints(tmp_path: Path) -> None:
    obj = _patched(_sliced(tmp_path), load_review("job"))
    anns = obj["spec"]["template"]["metadata"]["annotations"]
    assert anns[TAS_SLICE] == "kubernetes.io/hostname" and anns[TAS_SLICE_SIZE] == "2"


def test_multi_layer_constraints_keep_the_slice_pair_out(tmp_path: Path) -> None:
    prof = _sliced(tmp_path)
    review = load_review("job")
    layers = '[{"topology":"network.example.com/leaf","size":4},{"topology":"kubernetes.io/hostname","size":2}]'
    tpl = review["request"]["object"]["spec"]["template"]
    tpl.setdefault("metadata", {}).setdefault("annotations", {})[TAS_SLICE_LAYERS] = layers
    obj = _patched(prof, review)
    anns = obj["spec"]["template"]["metadata"]["annotations"]
    assert anns[TAS_SLICE_LAYERS] == layers
    assert TAS_SLICE not in anns and TAS_SLICE_SIZE not in anns
    assert anns["kueue.x-k8s.io/podset-required-topology"] == "network.example.com/leaf"
    assert rv.decode_patch(_body(prof, with_object(review, obj))) == []


def test_both_forms_written_by_the_user_get_a_warning(tmp_path: Path) -> None:
    prof = _sliced(tmp_path)
    review = load_review("job")
    tpl = review["request"]["object"]["spec"]["template"]
    tpl.setdefault("metadata", {}).setdefault("annotations", {}).update(
        {TAS_SLICE_LAYERS: '[{"topology":"kubernetes.io/hostname","size":2}]', TAS_SLICE: "kubernetes.io/hostname",
         TAS_SLICE_SIZE: "2"}
    )
    body = _body(prof, review)
    assert any(TAS_SLICE_LAYERS in w for w in body["response"].get("warnings", [])), body["response"]
