"""The controller keeps one ResourceClaimTemplate per opted-in namespace and DRA claim pool (controller/claims.py)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate

from fabricguard.admission.claims import claim_template
from fabricguard.controller.actions import Delete
from fabricguard.controller.claims import claim_template_actions
from fabricguard.controller.manifests import rbac_rules
from fabricguard.doctor.snapshot import snapshot_from_lists
from fabricguard.profile import load_profile

PROFILES = Path(__file__).resolve().parents[2] / "examples" / "profiles"
DRANET = load_profile(PROFILES / "gke-a4-dranet.yaml")


def namespace(name: str, enabled: bool) -> dict[str, Any]:
    labels = {"kubernetes.io/metadata.name": name, **({"fabricguard.io/enabled": "true"} if enabled else {})}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}


def snap(*objs: dict[str, Any]) -> Any:
    return snapshot_from_lists({"all": {"apiVersion": "v1", "kind": "List", "items": list(objs)}})


def test_missing_templates_are_created_in_opted_in_namespaces_only() -> None:
    actions = claim_template_actions(DRANET, snap(namespace("ml-search", True), namespace("other", False)))
    assert [(type(a).__name__, a.namespace, a.name) for a in actions] == [
        ("Create", "ml-search", "fabricguard-b200-dranet-fabric")]
    body = actions[0].body  # type: ignore[union-attr]
    kubernetes_validate.validate(body, kubernetes_validate.latest_version(), strict=True)


def test_a_pass_with_the_template_stored_asks_for_nothing() -> None:
    tmpl = claim_template(DRANET.pool(), "ml-search")
    assert tmpl is not None
    stored = copy.deepcopy(tmpl)
    stored["metadata"] |= {"uid": "u-1", "resourceVersion": "12", "creationTimestamp": "2026-11-30T10:00:00Z"}
    assert claim_template_actions(DRANET, snap(namespace("ml-search", True), stored)) == []


def test_an_outdated_template_of_ours_is_replaced_and_a_foreign_one_left_alone() -> None:
    tmpl = claim_template(DRANET.pool(), "ml-search")
    assert tmpl is not None
    old = copy.deepcopy(tmpl)
    old["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 4
    actions = claim_template_actions(DRANET, snap(namespace("ml-search", True), old))
    assert actions == [Delete("resource.k8s.io/v1", "resourceclaimtemplates", "ml-search", tmpl["metadata"]["name"])]
    old["metadata"]["labels"] = {}
    assert claim_template_actions(DRANET, snap(namespace("ml-search", True), old)) == []


def test_device_plugin_and_kep5004_profiles_make_no_template() -> None:
    for name in ("gke-a3-ultra.yaml", "aws-p5-efa-dra.yaml"):
        assert claim_template_actions(load_profile(PROFILES / name), snap(namespace("ml-search", True))) == []


def test_rbac_allows_reading_namespaces_and_writing_templates() -> None:
    rules = rbac_rules()
    granted = {(g, res, v) for r in rules for g in r["apiGroups"] for res in r["resources"] for v in r["verbs"]}
    assert {("resource.k8s.io", "resourceclaimtemplates", "create"),
            ("resource.k8s.io", "resourceclaimtemplates", "delete")} <= granted
    listed = {r for rule in rules if "list" in rule["verbs"] for r in rule["resources"]}
    assert {"namespaces", "deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates"} <= listed


def test_the_canary_namespace_gets_the_template_and_the_canary_claims_the_fabric() -> None:
    from datetime import UTC, datetime

    from fabricguard.controller.canary import render_canary, spec_for

    actions = claim_template_actions(DRANET, snap(), "fabricguard-system")
    assert [(a.namespace, a.name) for a in actions] == [("fabricguard-system", "fabricguard-b200-dranet-fabric")]
    pool = DRANET.pool()
    spec = spec_for(DRANET, pool, "fabricguard-system", datetime(2026, 12, 1, tzinfo=UTC))
    js = render_canary(DRANET, pool, spec, image="ghcr.io/acme/fabricguard:1", owner=None)
    pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "fabricguard-fabric",
                                      "resourceClaimTemplateName": "fabricguard-b200-dranet-fabric"}]
    assert pod["containers"][0]["resources"]["claims"] == [{"name": "fabricguard-fabric"}]
    efa = load_profile(PROFILES / "aws-p5-efa-dra.yaml")
    js = render_canary(efa, efa.pool(), spec_for(efa, efa.pool(), "fabricguard-system",
                                                 datetime(2026, 12, 1, tzinfo=UTC)),
                       image="ghcr.io/acme/fabricguard:1", owner=None)
    pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"] == "32"
    assert "resourceClaims" not in pod


async def test_the_actions_reach_the_api_server_as_namespaced_creates_and_deletes(tmp_path: Path) -> None:
    """Carried out by the controller's I/O edge over real HTTP (kmock)."""
    from controller_support import CONTROLLER_USER, controller_rbac
    from kmock import Server

    from fabricguard.controller.kube import apply_actions, controller_permissions
    from fabricguard.kube import Kube
    from kube_support import Emulator, kubeconfig

    plural = "resource.k8s.io/v1/resourceclaimtemplates"
    # The rendered controller role enforced, as for every controller test.
    async with Emulator(rbac=controller_rbac(), tokens={"c": {"username": CONTROLLER_USER}}) as k8s, \
            Server(k8s) as server:
        k8s["get /version/"] << {"major": "1", "minor": "35", "gitVersion": "v1.35.0", "platform": "linux/amd64"}
        kube = await Kube.connect(kubeconfig(tmp_path, str(server.url).rstrip("/"), "c"),
                                  permissions=controller_permissions("fabricguard-system"))
        create = claim_template_actions(DRANET, snap(namespace("ml-search", True)), "fabricguard-system")
        assert await apply_actions(kube, create, {}) == []
        keys = {(k[1], k[2]) for k in k8s.objects if k[0] == plural}
        assert keys == {("ml-search", "fabricguard-b200-dranet-fabric"),
                        ("fabricguard-system", "fabricguard-b200-dranet-fabric")}
        old = copy.deepcopy(k8s.objects[plural, "ml-search", "fabricguard-b200-dranet-fabric"].raw)
        old["kind"], old["apiVersion"] = "ResourceClaimTemplate", "resource.k8s.io/v1"
        old["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 4
        delete = claim_template_actions(DRANET, snap(namespace("ml-search", True), old))
        assert await apply_actions(kube, delete, {}) == []
        assert k8s.objects[plural, "ml-search", "fabricguard-b200-dranet-fabric"].deleted
        await kube.close()
