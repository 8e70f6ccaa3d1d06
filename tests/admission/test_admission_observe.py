"""Observe mode (issue 24 item 1): the webhook warns with exactly what enforce would refuse, and denies nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from admission_support import load_review, workers

from fabricguard.admission.decide import OBSERVE_PREFIX, Admission
from fabricguard.profile import PlatformProfile


def _answer(profile: PlatformProfile, review: dict[str, Any], mode: str, endpoint: str = "review") -> Any:
    d = Admission(profile, None, mode).handle(endpoint, json.dumps(review))  # type: ignore[arg-type]
    assert d.status == 200 and d.body["response"]["uid"] == review["request"]["uid"]
    return d


def _privileged() -> dict[str, Any]:
    review = load_review("jobset")
    workers(review)["containers"][0]["securityContext"] = {"privileged": True}
    review["request"]["object"]["metadata"]["annotations"] = {"fabricguard.io/fabric": "none"}
    return review


@pytest.mark.parametrize("endpoint", ["validate", "review"])
def test_observe_warns_what_enforce_denies(profile: PlatformProfile, endpoint: str) -> None:
    enforced = _answer(profile, _privileged(), "enforce", endpoint)
    assert enforced.outcome == "denied" and not enforced.body["response"]["allowed"]
    denial = enforced.body["response"]["status"]["message"]
    observed = _answer(profile, _privileged(), "observe", endpoint)
    resp = observed.body["response"]
    assert observed.outcome == "observed" and resp["allowed"] and "status" not in resp
    (warning,) = resp["warnings"]
    assert warning.startswith(OBSERVE_PREFIX) and "privileged" in warning
    assert warning[len(OBSERVE_PREFIX):len(OBSERVE_PREFIX) + 60] == denial[:60]


def test_observe_still_injects_the_fabric(profile: PlatformProfile) -> None:
    review = load_review("jobset")
    enforced = _answer(profile, review, "enforce", "mutate").body["response"]
    observed = _answer(profile, review, "observe", "mutate").body["response"]
    assert observed == enforced  # nothing refused: the same patch, no observe warning


def test_a_pool_in_enforce_denies_under_an_observing_install(profile: PlatformProfile) -> None:
    enforcing = profile.model_copy(deep=True)
    for p in enforcing.spec.pools:
        p.mode = "enforce"
    assert _answer(enforcing, _privileged(), "observe").outcome == "denied"
    observing = profile.model_copy(deep=True)
    for p in observing.spec.pools:
        p.mode = "observe"
    assert _answer(observing, _privileged(), "enforce").outcome == "observed"


def test_an_unknown_pool_is_denied_once_any_pool_enforces(profile: PlatformProfile) -> None:
    review = load_review("job")
    review["request"]["object"]["metadata"]["labels"] = {"fabricguard.io/pool": "typo"}
    assert _answer(profile, review, "observe").outcome == "observed"
    enforcing = profile.model_copy(deep=True)
    enforcing.spec.pools[0].mode = "enforce"
    assert _answer(enforcing, review, "observe").outcome == "denied"
