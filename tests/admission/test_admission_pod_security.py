"""Compensating Pod Security (issue 24 item 7): in an opted-in (``privileged``) namespace, the rendered
ValidatingAdmissionPolicy refuses hostPID, a hostPath of ``/`` and SYS_ADMIN, and admits what the webhook injects.

The policy's CEL is evaluated with cel-python, as the API server would evaluate it on the stored Pod."""

from __future__ import annotations

import copy
import json
from typing import Any

import celpy
import jsonpatch
import pytest
from admission_support import PROFILES, load_review

from fabricguard.admission import review as rv
from fabricguard.admission.decide import Admission
from fabricguard.admission.podsecurity import allowed_host_paths, policy
from fabricguard.profile import load_profile

ENV = celpy.Environment()


def refusals(pol: dict[str, Any], pod: dict[str, Any]) -> list[str]:
    """The messages of the policy's failed validations for ``pod`` ([] when admitted)."""
    act: dict[str, Any] = {"object": celpy.json_to_cel(pod)}
    variables: dict[Any, Any] = {}
    for v in pol["spec"]["variables"]:
        act["variables"] = celpy.celtypes.MapType(variables)
        variables[celpy.celtypes.StringType(v["name"])] = ENV.program(ENV.compile(v["expression"])).evaluate(act)
    act["variables"] = celpy.celtypes.MapType(variables)
    out = []
    for val in pol["spec"]["validations"]:
        result = ENV.program(ENV.compile(val["expression"])).evaluate(act)
        if not bool(result):
            out.append(val["message"])
    return out


def _mutated_pod(profile: Any) -> dict[str, Any]:
    """A bare multi-node pod as the webhook injects it (the review fixture's pod, through /mutate)."""
    review = load_review("pod-bare-group")
    # With the job directory's init container (root, CHOWN/FOWNER), which the policy must admit too.
    d = Admission(profile, job_dir_image="ghcr.io/acme/fabricguard-agent:0.2.0").handle("mutate", json.dumps(review))
    patch = rv.decode_patch(d.body)
    return jsonpatch.apply_patch(review["request"]["object"], patch) if patch else review["request"]["object"]


@pytest.mark.parametrize("path", PROFILES, ids=[p.stem for p in PROFILES])
def test_what_the_webhook_injects_is_admitted_and_node_root_is_refused(path: Any) -> None:
    profile = load_profile(path)
    pol, binding = policy(profile)
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert binding["spec"]["matchResources"]["namespaceSelector"] == {"matchLabels": {"fabricguard.io/enabled": "true"}}
    pod = _mutated_pod(profile)
    assert refusals(pol, pod) == [], pod
    for field, change in (
        ("hostPID", lambda p: p["spec"].update(hostPID=True)),
        ("hostPath /", lambda p: p["spec"].setdefault("volumes", []).append(
            {"name": "root", "hostPath": {"path": "/"}})),
        ("SYS_ADMIN", lambda p: p["spec"]["containers"][0].setdefault("securityContext", {}).setdefault(
            "capabilities", {}).setdefault("add", []).append("SYS_ADMIN")),
        ("privileged", lambda p: p["spec"]["containers"][0].setdefault("securityContext", {}).update(
            privileged=True)),
    ):
        bad = copy.deepcopy(pod)
        change(bad)
        assert refusals(pol, bad), f"{field} admitted"


def test_the_fabric_host_directories_are_allowed_read_only_only() -> None:
    gke = load_profile(next(p for p in PROFILES if p.stem == "gke-a3-ultra"))
    paths = allowed_host_paths(gke)
    assert paths and all(p.startswith("/home/kubernetes") for p in paths)
    pol, _ = policy(gke)
    pod = _mutated_pod(gke)
    assert any("hostPath" in v for v in pod["spec"]["volumes"])
    writable = copy.deepcopy(pod)
    for c in writable["spec"]["containers"]:
        for m in c.get("volumeMounts", []):
            m.pop("readOnly", None)
    assert refusals(pol, writable) == ["the fabric's host directories may only be mounted readOnly"]


def test_observe_mode_warns_instead_of_denying() -> None:
    _, binding = policy(load_profile(PROFILES[0]), "observe")
    assert binding["spec"]["validationActions"] == ["Warn", "Audit"]
