"""Rejections: silent-path env, missing fabric, hostNetwork/privileged, unknown pool; every message says what to do."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest
from admission_support import decide, load_review, with_object, workers

from fabricguard.admission import review as rv
from fabricguard.profile import PlatformProfile


def set_env(review: dict[str, Any], name: str, value: str) -> None:
    workers(review)["containers"][0]["env"].append({"name": name, "value": value})


@pytest.mark.parametrize(("name", "value", "expect"), [
    ("NCCL_IB_DISABLE", "1", "NCCL_IB_DISABLE=1"),
    ("NCCL_NET", "Socket", "NCCL_NET=Socket"),
    ("NCCL_NET", "socket", "NCCL_NET=socket"),
])
def test_silent_path_env_is_rejected_even_with_allow_override(profile: PlatformProfile, name: str, value: str,
                                                               expect: str) -> None:
    review = load_review("jobset")
    set_env(review, name, value)
    review["request"]["object"]["metadata"]["annotations"] = {"fabricguard.io/allow-override": name}
    for endpoint in ("mutate", "review"):
        resp = decide(profile, review, endpoint)
        assert not resp["allowed"]
        msg = resp["status"]["message"]
        assert expect in msg and 'fabricguard.io/fabric: "none"' in msg and "remove it" in msg


def test_silent_path_env_passes_with_explicit_opt_out(profiles: dict[str, PlatformProfile]) -> None:
    prof = profiles["gke-a3-ultra"]
    review = load_review("jobset")
    set_env(review, "NCCL_NET", "Socket")
    review["request"]["object"]["metadata"]["annotations"] = {"fabricguard.io/fabric": "none"}
    resp = decide(prof, review)
    assert resp["allowed"]
    obj = jsonpatch.apply_patch(review["request"]["object"], rv.decode_patch({"response": resp}))
    tpl = obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]
    c = tpl["spec"]["containers"][0]
    # Opted out: no fabric resources, no RDMA network, but storage, logs and placement still come.
    assert not any(k.startswith("networking.gke.io.networks") for k in c["resources"]["limits"])
    assert "networking.gke.io/interfaces" not in tpl["metadata"]["annotations"]
    assert tpl["metadata"]["annotations"]["fabricguard.io/fabric"] == "none"
    names = [e["name"] for e in c["env"]]
    assert "NCCL_DEBUG_FILE" in names and names.count("NCCL_NET") == 1


def test_wrong_nccl_net_is_rejected_unless_overridden(profiles: dict[str, PlatformProfile]) -> None:
    prof = profiles["gke-a3-ultra"]
    review = load_review("jobset")
    set_env(review, "NCCL_NET", "IB")
    resp = decide(prof, review)
    assert not resp["allowed"] and "NCCL_NET" in resp["status"]["message"]
    review["request"]["object"]["metadata"]["annotations"] = {"fabricguard.io/allow-override": "NCCL_NET"}
    assert decide(prof, review)["allowed"]
    # The same net in another case is the same net (NCCL compares case-insensitively).
    review = load_review("jobset")
    set_env(review, "NCCL_NET", "gib")
    assert decide(prof, review)["allowed"]


@pytest.mark.parametrize("field", ["hostNetwork", "privileged"])
def test_host_network_and_privileged_are_rejected(profile: PlatformProfile, field: str) -> None:
    review = load_review("jobset")
    spec = workers(review)
    if field == "hostNetwork":
        spec["hostNetwork"] = True
    else:
        spec["containers"][0]["securityContext"] = {"privileged": True}
    review["request"]["object"]["metadata"]["annotations"] = {"fabricguard.io/fabric": "none"}
    resp = decide(profile, review)
    assert not resp["allowed"]
    assert field in resp["status"]["message"] and "remove" in resp["status"]["message"]


def test_unknown_pool_lists_known_pools(profile: PlatformProfile) -> None:
    review = load_review("job")
    review["request"]["object"]["metadata"]["labels"] = {"fabricguard.io/pool": "h100-typo"}
    for endpoint in ("mutate", "validate", "review"):
        resp = decide(profile, review, endpoint)
        assert not resp["allowed"]
        msg = resp["status"]["message"]
        assert "h100-typo" in msg
        for name in profile.pool_names:
            assert name in msg


def test_no_fabric_pool_rejects_multi_node_unless_opted_out(profiles: dict[str, PlatformProfile]) -> None:
    prof = profiles["aws-p5-efa"]
    review = load_review("job")
    review["request"]["object"]["metadata"]["labels"] = {"fabricguard.io/pool": "g6-single"}
    for c in review["request"]["object"]["spec"]["template"]["spec"]["containers"][:1]:
        c["resources"] = {"limits": {"nvidia.com/gpu": "4"}}
    resp = decide(prof, review)
    assert not resp["allowed"]
    assert "g6-single has no fabric" in resp["status"]["message"] and "p5-efa" in resp["status"]["message"]
    review["request"]["object"]["metadata"]["annotations"] = {"fabricguard.io/fabric": "none"}
    assert decide(prof, review)["allowed"]


def test_validate_alone_catches_a_workload_the_mutator_never_saw(profile: PlatformProfile) -> None:
    review = load_review("jobset")
    resp = decide(profile, review, "validate")
    pool = profile.pool()
    assert not resp["allowed"]
    msg = resp["status"]["message"]
    assert "NCCL_NET is missing" in msg
    for name in pool.fabric.resources:
        assert name in msg
    # After the mutator, the validator is satisfied.
    patched = decide(profile, review, "mutate")
    obj = jsonpatch.apply_patch(review["request"]["object"], rv.decode_patch({"response": patched}))
    assert decide(profile, with_object(review, obj), "validate")["allowed"]


def test_dry_run_is_answered_identically(profile: PlatformProfile) -> None:
    for kind in ("jobset", "trainjob"):
        review = load_review(kind)
        wet = decide(profile, review)
        review["request"]["dryRun"] = True
        assert decide(profile, review) == wet


def test_update_and_other_kinds_pass_untouched(profile: PlatformProfile) -> None:
    review = load_review("jobset")
    review["request"]["operation"] = "UPDATE"
    review["request"]["oldObject"] = review["request"]["object"]
    assert decide(profile, review) == {"uid": review["request"]["uid"], "allowed": True}
    review = load_review("job")
    review["request"]["kind"] = {"group": "apps", "version": "v1", "kind": "Deployment"}
    assert decide(profile, review) == {"uid": review["request"]["uid"], "allowed": True}


def test_bare_multi_node_pod_without_group_name_is_rejected(profiles: dict[str, PlatformProfile]) -> None:
    review = load_review("pod-bare-group")
    del review["request"]["object"]["metadata"]["labels"]
    resp = decide(profiles["aws-p5-efa"], review)
    assert not resp["allowed"] and "fabricguard.io/job" in resp["status"]["message"]


def test_malformed_workload_is_denied_with_the_field(profile: PlatformProfile) -> None:
    review = load_review("jobset")
    review["request"]["object"]["spec"]["replicatedJobs"] = {"not": "a list"}
    resp = decide(profile, review)
    assert not resp["allowed"] and "spec.replicatedJobs" in resp["status"]["message"]
    assert resp["status"]["code"] == 400
