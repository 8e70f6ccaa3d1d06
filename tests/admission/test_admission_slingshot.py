"""The webhook on an HPE Slingshot pool (fabric type added as one module): NCCL_NET, the cxi devices, the
profile's libfabric variables, on the stored form of a JobSet."""

from __future__ import annotations

from pathlib import Path

import jsonpatch
from admission_support import check_workload, decide, load_review

from fabricguard.admission import review as rv
from fabricguard.profile import load_profile

PROFILE = Path(__file__).resolve().parents[2] / "examples" / "profiles" / "hpe-slingshot.yaml"


def test_the_webhook_injects_libfabric_and_the_cxi_devices() -> None:
    profile = load_profile(PROFILE)
    review = load_review("jobset")
    resp = decide(profile, review, "mutate")
    assert resp["allowed"], resp.get("status")
    obj = jsonpatch.apply_patch(review["request"]["object"], rv.decode_patch({"response": resp}))
    seen = 0
    for rj in obj["spec"]["replicatedJobs"]:
        for c in rj["template"]["spec"]["template"]["spec"]["containers"]:
            limits = (c.get("resources") or {}).get("limits") or {}
            if "nvidia.com/gpu" not in limits:
                continue
            env = {e["name"]: e.get("value") for e in c.get("env") or ()}
            assert env["NCCL_NET"] == "Libfabric" and env["FI_CXI_DISABLE_HOST_REGISTER"] == "1"
            assert limits["beta.hpe.com/cxi"] == "4"
            seen += 1
    assert seen
    assert check_workload(obj) >= 1
