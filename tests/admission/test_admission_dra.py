"""DRA pools at admission: the claim a JobSet gets, its stored form reviewed again, and what is refused or left alone.

The ResourceClaimTemplates the resolver answers with are the controller's own (``claims.claim_template``) and are
validated, like the patched workloads, against ``resource.k8s.io/v1`` with kubernetes-validate in strict mode.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from admission_support import check, check_workload, load_review, with_object, workers
from apiserver_defaults import kueue_suspend, stored_form

from fabricguard.admission import claims
from fabricguard.admission import review as rv
from fabricguard.admission.decide import Admission
from fabricguard.admission.mutate import GKE_INTERFACES
from fabricguard.profile import PlatformProfile, load_profile, loads_profile

EXAMPLES = Path(__file__).parents[2] / "examples" / "profiles"
DRANET = load_profile(EXAMPLES / "gke-a4-dranet.yaml")
EFA_DRA = load_profile(EXAMPLES / "aws-p5-efa-dra.yaml")
NS = "ml-team"


def resolver(objects: list[dict[str, Any]]) -> claims.Resolver:
    by = {(o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objects}

    def resolve(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return by.get((kind, namespace, name))

    return resolve


def with_templates(profile: PlatformProfile, namespace: str = NS) -> Admission:
    tmpls = [t for p in profile.spec.pools if (t := claims.claim_template(p, namespace)) is not None]
    return Admission(profile, resolver(tmpls))


def answer(adm: Admission, review: dict[str, Any], endpoint: str = "review") -> dict[str, Any]:
    d = adm.handle(endpoint, json.dumps(review))  # type: ignore[arg-type]
    assert d.status == 200
    return d.body["response"]


def patched(adm: Admission, review: dict[str, Any]) -> dict[str, Any]:
    resp = answer(adm, review)
    assert resp["allowed"], resp.get("status")
    return jsonpatch.apply_patch(review["request"]["object"], rv.decode_patch({"response": resp}))


def test_claim_template_validates_against_resource_k8s_io_v1() -> None:
    tmpl = claims.claim_template(DRANET.pool(), NS)
    assert tmpl is not None
    check(tmpl)
    nic = tmpl["spec"]["spec"]["devices"]["requests"][0]
    assert nic == {"name": "nic", "exactly": {"deviceClassName": "mrdma.google.com", "allocationMode": "ExactCount",
                                              "count": 8}}
    assert claims.claim_template(EFA_DRA.pool(), NS) is None  # KEP-5004: the scheduler makes the claim


def test_jobset_on_dranet_pool_gets_claims_that_validate_and_settle() -> None:
    adm = with_templates(DRANET)
    review = load_review("jobset")
    obj = patched(adm, review)
    spec = obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    tmpl = DRANET.pool().claim_template_name
    assert spec["resourceClaims"] == [{"name": claims.CLAIM_NAME, "resourceClaimTemplateName": tmpl}]
    trainer = spec["containers"][0]
    assert trainer["resources"]["claims"] == [{"name": claims.CLAIM_NAME}]
    assert not any(k.startswith("networking.gke.io.networks") for k in trainer["resources"].get("limits", {}))
    coordinator = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert "resourceClaims" not in coordinator  # no GPU, no fabric claim
    anns = obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"].get("metadata", {}).get("annotations", {})
    assert GKE_INTERFACES not in anns
    env = {e["name"]: e.get("value") for e in trainer["env"]}
    assert env["NCCL_NET"] == "gIB"
    assert check_workload(obj) == 2  # strict resource.k8s.io-aware core/v1 + batch/v1 schemas (1.37)
    stored = stored_form(obj)
    for again in (stored, kueue_suspend(stored)):
        for endpoint in ("mutate", "validate", "review"):
            resp = answer(adm, with_object(review, again), endpoint)
            assert resp["allowed"], (endpoint, resp.get("status"))
            assert rv.decode_patch({"response": resp}) == [], endpoint


def test_missing_template_is_refused_with_the_namespace_and_name() -> None:
    adm = with_templates(DRANET, namespace="another-team")
    resp = answer(adm, load_review("jobset"))
    assert not resp["allowed"]
    msg = resp["status"]["message"]
    assert "ResourceClaimTemplate fabricguard-b200-dranet-fabric does not exist in namespace ml-team" in msg
    assert "fabricguard.io/enabled=true" in msg


def test_template_lookup_that_cannot_answer_fails_closed() -> None:
    def broken(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        raise claims.ResolverUnavailable("no list of ResourceClaimTemplates yet")

    resp = answer(Admission(DRANET, broken), load_review("jobset"))
    assert not resp["allowed"]
    assert "cannot check that ResourceClaimTemplate" in resp["status"]["message"]


def test_without_a_resolver_the_claim_is_injected_with_a_warning() -> None:
    resp = answer(Admission(DRANET), load_review("jobset"))
    assert resp["allowed"]
    assert any("was not checked" in w for w in resp.get("warnings", []))


def test_pod_that_already_claims_the_class_is_left_alone() -> None:
    own = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
           "metadata": {"name": "my-nics", "namespace": NS},
           "spec": {"spec": {"devices": {"requests": [
               {"name": "rdma", "exactly": {"deviceClassName": "mrdma.google.com", "count": 8}}]}}}}
    check(own)
    tmpls = [claims.claim_template(DRANET.pool(), NS), own]
    adm = Admission(DRANET, resolver([t for t in tmpls if t]))
    review = load_review("jobset")
    spec = workers(review)
    spec["resourceClaims"] = [{"name": "nics", "resourceClaimTemplateName": "my-nics"}]
    spec["containers"][0].setdefault("resources", {})["claims"] = [{"name": "nics"}]
    obj = patched(adm, review)
    out = obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    assert out["resourceClaims"] == [{"name": "nics", "resourceClaimTemplateName": "my-nics"}]
    assert out["containers"][0]["resources"]["claims"] == [{"name": "nics"}]


def test_gpu_container_without_any_claim_is_refused_by_validation() -> None:
    adm = with_templates(DRANET)
    resp = answer(adm, load_review("jobset"), "validate")
    assert not resp["allowed"]
    assert "uses no ResourceClaim" in resp["status"]["message"]


def test_kep5004_pool_keeps_the_extended_resource_request_and_injects_no_claim() -> None:
    adm = Admission(EFA_DRA)
    obj = patched(adm, load_review("jobset"))
    spec = obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    assert "resourceClaims" not in spec
    res = spec["containers"][0]["resources"]
    assert res["limits"]["vpc.amazonaws.com/efa"] == "32"
    assert "claims" not in res
    check_workload(obj)


ALIGNED = """
apiVersion: fabricguard.io/v1alpha1
kind: PlatformProfile
metadata: {name: aligned}
spec:
  pools:
  - name: gb300
    nodeSelector: {pool: gb300}
    gpusPerNode: 4
    fabric:
      type: roce
      dra:
        deviceClassName: dranet.net
        count: 4
        countPer: node
        alignWithGpus: gpu.nvidia.com
"""


def test_aligned_pool_claims_gpus_and_nics_together_on_one_pcie_root() -> None:
    prof = loads_profile(ALIGNED)
    tmpl = claims.claim_template(prof.pool(), NS)
    assert tmpl is not None
    check(tmpl)
    devices = tmpl["spec"]["spec"]["devices"]
    assert [r["name"] for r in devices["requests"]] == ["gpu", "nic"]
    assert devices["constraints"] == [{"requests": ["gpu", "nic"],
                                       "matchAttribute": "resource.kubernetes.io/pcieRoot"}]
    review = load_review("jobset")
    workers(review)["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 4}}
    obj = patched(Admission(prof, resolver([tmpl])), review)
    c = obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["containers"][0]
    assert c["resources"] == {"claims": [{"name": claims.CLAIM_NAME}]}  # the GPUs come from the claim
    check_workload(obj)


def test_per_node_pool_refuses_a_pod_that_does_not_take_the_whole_node() -> None:
    prof = loads_profile(ALIGNED)
    tmpl = claims.claim_template(prof.pool(), NS)
    review = load_review("jobset")
    workers(review)["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 2}}
    review["request"]["object"]["spec"]["replicatedJobs"][1]["template"]["spec"]["parallelism"] = 4
    resp = answer(Admission(prof, resolver([tmpl] if tmpl else [])), review)
    assert not resp["allowed"]
    assert "takes the whole node (4 GPUs)" in resp["status"]["message"]


def test_trainjob_on_a_claim_pool_is_admitted_with_what_the_runtime_must_carry() -> None:
    resp = answer(with_templates(DRANET), load_review("trainjob"))
    assert resp["allowed"], resp.get("status")
    assert any("TrainJob cannot carry" in w for w in resp.get("warnings", []))


@pytest.mark.parametrize("text,needle", [
    ("{deviceClassName: mrdma.google.com}", "needs count"),
    ("{deviceClassName: mrdma.google.com, count: 8, allocationMode: All}", "drop count"),
    ("{deviceClassName: Bad_Class, count: 1}", "DNS subdomain"),
    ("{deviceClassName: x.io, count: 1, alignWithGpus: gpu.nvidia.com}", "countPer: node"),
])
def test_profile_refuses_incoherent_dra_blocks(text: str, needle: str) -> None:
    from fabricguard.profile import ProfileError

    base = ALIGNED.split("      dra:")[0] + f"      dra: {text}\n"
    with pytest.raises(ProfileError) as exc:
        loads_profile(base)
    assert needle in str(exc.value)


def test_device_plugin_profiles_are_unchanged_by_the_dra_code() -> None:
    prof = load_profile(EXAMPLES / "gke-a3-ultra.yaml")
    obj = patched(Admission(prof), copy.deepcopy(load_review("jobset")))
    spec = obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    assert "resourceClaims" not in spec
    assert "claims" not in spec["containers"][0]["resources"]


def test_webhook_of_a_dra_profile_may_list_templates_and_reach_the_api_server() -> None:
    from fabricguard.admission.render import manifests

    objs = manifests("x: y\n", "ghcr.io/acme/fabricguard@sha256:" + "a" * 64, claim_templates=True)
    role = next(o for o in objs if o["kind"] == "ClusterRole")
    assert role["rules"] == [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaimtemplates"],
                              "verbs": ["list"]}]
    dep = next(o for o in objs if o["kind"] == "Deployment")
    assert dep["spec"]["template"]["spec"]["automountServiceAccountToken"] is True
    np = next(o for o in objs if o["kind"] == "NetworkPolicy")
    assert np["spec"]["egress"] == [{"ports": [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 6443}]}]
    for o in objs:
        if o["apiVersion"].split("/")[0] in ("v1", "apps", "rbac.authorization.k8s.io", "networking.k8s.io"):
            check(o)
    plain = manifests("x: y\n", "ghcr.io/acme/fabricguard@sha256:" + "a" * 64)
    assert not any(o["kind"] == "ClusterRole" for o in plain)
    assert next(o for o in plain if o["kind"] == "NetworkPolicy")["spec"]["egress"] == []


def test_a_pod_of_a_workload_without_the_claim_gets_it_at_pod_level() -> None:
    """TrainJob pods (and pods of workloads created before the webhook) are completed as they are created."""
    adm = with_templates(DRANET)
    review = load_review("pod-owned")
    obj = patched(adm, review)
    assert obj["spec"]["resourceClaims"] == [{"name": claims.CLAIM_NAME,
                                              "resourceClaimTemplateName": DRANET.pool().claim_template_name}]
    assert obj["spec"]["containers"][0]["resources"]["claims"] == [{"name": claims.CLAIM_NAME}]
    check_workload(obj)
    again = stored_form(obj)
    resp = answer(adm, with_object(review, again), "review")
    assert resp["allowed"] and rv.decode_patch({"response": resp}) == []


def test_review_command_checks_saved_templates(tmp_path: Path) -> None:
    from admission_support import FIXTURES
    from typer.testing import CliRunner

    from fabricguard.cli import app

    def run(items: Any) -> Any:
        (tmp_path / "t.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        return CliRunner().invoke(app, ["admission", "review", str(FIXTURES / "jobset.json"), "-p",
                                        str(EXAMPLES / "gke-a4-dranet.yaml"), "--claim-templates",
                                        str(tmp_path / "t.json")])

    ok = run([claims.claim_template(DRANET.pool(), NS)])
    assert ok.exit_code == 0 and json.loads(ok.stdout)["response"]["allowed"]
    missing = run([claims.claim_template(DRANET.pool(), "other")])
    assert missing.exit_code == 1
    assert "does not exist in namespace ml-team" in json.loads(missing.stdout)["response"]["status"]["message"]
    bad = run([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}])
    assert bad.exit_code == 3 and "not a List of ResourceClaimTemplates" in bad.stderr


def test_a_direct_claim_the_webhook_cannot_read_is_warned_about() -> None:
    review = load_review("jobset")
    spec = workers(review)
    spec["resourceClaims"] = [{"name": "shared", "resourceClaimName": "team-nics"}]
    resp = answer(with_templates(DRANET), review)
    assert resp["allowed"]
    assert any("also names ResourceClaim(s) team-nics" in w for w in resp.get("warnings", []))
