"""The webhook notes its patch operations as it makes its changes (issue 31 item 6: no copy diffed afterwards).

For every example profile and every review fixture, the recorded patch applied to the request's object gives
exactly the object the injection built, and the request's object is never changed. The recorder's own rules: a
key added then removed leaves nothing, keys are escaped per RFC 6901, list items are added by index, and a map
removed from the object never lends its address to a new one.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
import pytest
from admission_support import KINDS, PROFILES, load_review

from fabricguard.admission import review as rv
from fabricguard.admission.decide import Admission
from fabricguard.patching import Recorder
from fabricguard.profile import load_profile


@pytest.mark.parametrize("profile_path", PROFILES, ids=lambda p: p.stem)
def test_the_recorded_patch_builds_what_the_injection_built(profile_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[dict[str, Any]] = []
    real = Recorder.copy_of.__func__  # type: ignore[attr-defined]

    def keep(cls: type[Recorder], obj: dict[str, Any]) -> tuple[dict[str, Any], Recorder]:
        copied, rec = real(cls, obj)
        built.append(copied)
        return copied, rec

    monkeypatch.setattr(Recorder, "copy_of", classmethod(keep))
    adm = Admission(load_profile(profile_path))
    patched = 0
    for kind in KINDS:
        review = load_review(kind)
        original = copy.deepcopy(review["request"]["object"])
        built.clear()
        d = adm.handle("mutate", json.dumps(review))  # type: ignore[arg-type]
        ops = rv.decode_patch(d.body)
        assert review["request"]["object"] == original, kind  # the request's object is never changed
        if not built or not d.body["response"]["allowed"]:
            continue
        assert jsonpatch.apply_patch(original, ops) == built[0], (kind, ops)
        patched += bool(ops)
    assert patched, "no fixture was patched under this profile"


def test_a_key_added_then_removed_leaves_no_operation() -> None:
    obj, rec = Recorder.copy_of({"metadata": {"name": "a"}, "spec": {}})
    anns = rec.set(obj["metadata"], "annotations", {})
    rec.pop(obj["metadata"], "annotations")
    assert rec.ops == [] and "annotations" not in obj["metadata"] and anns == {}
    rec.pop(obj["metadata"], "missing")
    assert rec.ops == []


def test_operations_carry_escaped_paths_indexes_and_final_values() -> None:
    src = {"metadata": {"labels": {"a/b~c": "1"}}, "spec": {"items": [{"x": 1}], "gone": {"k": 1}}}
    obj, rec = Recorder.copy_of(src)
    labels = obj["metadata"]["labels"]
    rec.set(labels, "x/y", "2")
    fresh = rec.set(obj["spec"], "extra", {})
    fresh["later"] = True  # a map the changes put in carries its final content in the op that added it
    rec.set(fresh, "and", [1])
    rec.append(obj["spec"]["items"], {"x": 2})
    rec.set(obj["spec"]["items"][0], "y", 3)
    rec.pop(obj["spec"], "gone")
    rec.set(labels, "a/b~c", "9")
    assert rec.ops == [
        {"op": "add", "path": "/metadata/labels/x~1y", "value": "2"},
        {"op": "add", "path": "/spec/extra", "value": {"later": True, "and": [1]}},
        {"op": "add", "path": "/spec/items/1", "value": {"x": 2}},
        {"op": "add", "path": "/spec/items/0/y", "value": 3},
        {"op": "remove", "path": "/spec/gone"},
        {"op": "replace", "path": "/metadata/labels/a~1b~0c", "value": "9"},
    ]
    assert jsonpatch.apply_patch(src, rec.ops) == obj
    assert src["spec"]["items"] == [{"x": 1}]  # the original is untouched


def test_a_removed_map_never_lends_its_address() -> None:
    obj, rec = Recorder.copy_of({"spec": {"a": {"k": 1}, "b": {}}})
    rec.pop(obj["spec"], "a")
    for _ in range(1000):  # new maps made after the removal: none may be taken for /spec/a
        rec.set({}, "k", 2)
    assert rec.ops == [{"op": "remove", "path": "/spec/a"}]
