"""``render controller``: built-in kinds pass kubernetes-validate; Kueue objects pass Kueue v0.19.2's schemas.

The Kueue schemas are the CRDs of kubernetes-sigs/kueue v0.19.2 (tests/data/schemas/kueue-v0.19.2/); the
Workload's is applied to ``status.admissionChecks`` only, all that the controller's apply sends.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from controller_support import PROFILE, kueue_validate
from typer.testing import CliRunner

from fabricguard import kinds, names
from fabricguard.cli import app
from fabricguard.controller import actions
from fabricguard.controller.actions import Annotate, ApplyStatus, Create, Delete, Emit, MergePatch, MergeStatus
from fabricguard.controller.manifests import (
    clusterqueue_fragment,
    crd,
    manifests,
    namespace_rules,
    rbac_rules,
    service_monitor,
)
from fabricguard.profile import load_profile, loads_profile

ROOT = Path(__file__).resolve().parents[2]
PROFILES = sorted((ROOT / "examples" / "profiles").glob("*.yaml"))
IMAGE = "ghcr.io/acme/fabricguard@sha256:" + "ab" * 32
CANARY_IMAGE = "ghcr.io/acme/fabricguard-probe@sha256:" + "cd" * 32
K8S = kubernetes_validate.latest_version()
NOT_BUILTIN = {"AdmissionCheck", "ServiceMonitor"}


@pytest.fixture(params=PROFILES, ids=[p.stem for p in PROFILES])
def rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return manifests(load_profile(request.param), request.param.read_text(), IMAGE, "fg-system", CANARY_IMAGE)


def by_kind(objs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [obj] = [x for x in objs if x["kind"] == kind]
    return obj


def test_builtin_kinds_pass_kubernetes_validate(rendered) -> None:
    kinds = []
    for obj in rendered:
        if obj["kind"] not in NOT_BUILTIN:
            kubernetes_validate.validate(obj, K8S, strict=True)
            kinds.append(obj["kind"])
    assert set(kinds) == {"CustomResourceDefinition", "PriorityClass", "ServiceAccount", "ClusterRole",
                          "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap", "Deployment",
                          "PodDisruptionBudget", "Service", "NetworkPolicy"}


def test_admission_check_and_clusterqueue_fragment_pass_kueue_schemas(rendered) -> None:
    ac = by_kind(rendered, "AdmissionCheck")
    kueue_validate(ac, "admissionchecks")
    assert ac["spec"]["controllerName"] == "fabricguard.io/fabric-validated"
    profile = loads_profile(PROFILE)
    cq = {"apiVersion": names.KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": "gh200"},
          "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
              {"name": "gh200-roce", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 6}]}]}],
                   **clusterqueue_fragment(profile)}}
    kueue_validate(cq, "clusterqueues")
    assert cq["spec"]["admissionChecksStrategy"]["admissionChecks"] == [
        {"name": "fabric-validated", "onFlavors": ["gh200-roce"]}]


def test_deployment_is_two_replicas_non_root_read_only_with_lustre(rendered) -> None:
    dep = by_kind(rendered, "Deployment")
    spec = dep["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    assert dep["spec"]["replicas"] == 2
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    lustre = [v for v in spec["volumes"] if v["name"] == "lustre"]
    assert lustre and lustre[0]["persistentVolumeClaim"]["readOnly"] is True
    assert "--lustre-root" in c["args"] and "$(POD_NAME)" in c["args"]
    assert c["image"] == IMAGE and c["args"][c["args"].index("--canary-image") + 1] == CANARY_IMAGE
    assert by_kind(rendered, "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    sm = service_monitor("fg-system", release="kps")
    assert sm["spec"]["endpoints"][0]["port"] == by_kind(rendered, "Service")["spec"]["ports"][0]["name"]
    # The controller exports the jobs' job/namespace labels: without honorLabels they become exported_*.
    assert sm["spec"]["endpoints"][0]["honorLabels"] is True and sm["metadata"]["labels"]["release"] == "kps"
    # The profile is the ConfigMap's directory (a subPath mount never updates) and a change rolls the pods.
    mount = next(m for m in c["volumeMounts"] if m["name"] == "profile")
    assert "subPath" not in mount and mount["mountPath"] == "/etc/fabricguard"
    assert dep["spec"]["template"]["metadata"]["annotations"]["fabricguard.io/profile-sha256"]
    assert by_kind(rendered, "PriorityClass")["value"] < 0  # below training's default 0


def _allowed(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules)


def test_rbac_grants_exactly_the_writes_the_controller_makes() -> None:
    cluster, ns = rbac_rules(), namespace_rules()
    from fabricguard.controller.manifests import watched_rules

    writes = {(r_group, res, verb) for r in cluster + ns for r_group in r["apiGroups"] for res in r["resources"]
              for verb in r["verbs"] if verb not in ("list", "watch")}
    assert writes == {
        ("fabricguard.io", "fabricvalidations", "create"),
        ("fabricguard.io", "fabricvalidations/status", "patch"),
        ("", "nodes", "patch"),  # node proof: the quarantine taint, the last-proven annotation (pairs.py)
        ("", "nodes/status", "patch"),  # node proof: the FabricProven condition
        ("resource.k8s.io", "resourceclaimtemplates", "create"),  # DRA pools' templates (controller/claims.py)
        # blast.py: the rules' dryRun, and the readiness taints of nodes behind an open blast-radius breaker
        ("readiness.node.x-k8s.io", "nodereadinessrules", "patch"),
        ("", "nodes", "patch"),
        ("resource.k8s.io", "resourceclaimtemplates", "delete"),
        # node proof on a DRA claim pool: a DeviceTaintRule on just the bad NIC, deleted on release (pairs.py)
        ("resource.k8s.io", "devicetaintrules", "create"),
        ("resource.k8s.io", "devicetaintrules", "delete"),
        ("kueue.x-k8s.io", "workloads/status", "patch"),
        ("kueue.x-k8s.io", "admissionchecks/status", "patch"),
        ("kueue.x-k8s.io", "workloads", "patch"),  # onFallback: stop (spec.active=false)
        # the verdict and transport annotations (and onFallback: stop) on every kind it follows (fabricguard.kinds)
        *((k.group, k.plural, "patch") for k in kinds.MANAGED),
        ("", "events", "create"),
        ("", "pods/exec", "create"),  # hang.py: NCCL's RAS asked inside one pod of a stalled job (issue 28)
        ("", "pods/exec", "get"),  # the websocket exec is a GET: authorized as get (and create from 1.35)
        ("jobset.x-k8s.io", "jobsets", "create"),
        ("jobset.x-k8s.io", "jobsets", "delete"),
        ("coordination.k8s.io", "leases", "get"),
        ("coordination.k8s.io", "leases", "create"),
        ("coordination.k8s.io", "leases", "patch"),
    }
    assert not _allowed(cluster, "", "secrets", "list")
    # ConfigMaps only where drift compares them and in its own namespace (--reference), never cluster-wide.
    assert not any(_allowed(cluster, "", "configmaps", v) for v in ("get", "list", "watch"))
    assert watched_rules() == [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]
    # onFallback: stop patches the Workload itself (spec.active); the old hand-written role granted only /status.
    assert _allowed(cluster, "kueue.x-k8s.io", "workloads", "patch")
    assert _allowed(cluster, "", "pods", "watch") and _allowed(cluster, "", "nodes", "list")
    # Each kind of action the reconcile core emits maps onto one of those grants: a new action type fails here
    # until it is mapped, and each is granted on every resource the code writes with it.
    verb_of = {Create: ("create", ""), Delete: ("delete", ""), ApplyStatus: ("patch", "/status"),
               MergeStatus: ("patch", "/status"), Annotate: ("patch", ""), MergePatch: ("patch", ""),
               actions.JsonPatch: ("patch", ""), Emit: ("create", "")}
    emitted = {c for _n, c in inspect.getmembers(actions, inspect.isclass)
               if c.__module__ == actions.__name__ and c is not actions.Counters}
    assert emitted == set(verb_of)
    uses = [(Create, "fabricguard.io", "fabricvalidations"), (Create, "jobset.x-k8s.io", "jobsets"),
            (Delete, "jobset.x-k8s.io", "jobsets"), (ApplyStatus, "kueue.x-k8s.io", "workloads"),
            (ApplyStatus, "kueue.x-k8s.io", "admissionchecks"), (MergeStatus, "fabricguard.io", "fabricvalidations"),
            (MergePatch, "kueue.x-k8s.io", "workloads"), (Emit, "", "events"), (actions.JsonPatch, "", "nodes"),
            (Create, "resource.k8s.io", "devicetaintrules"), (Delete, "resource.k8s.io", "devicetaintrules"),
            *((a, k.group, k.plural) for k in kinds.MANAGED for a in (Annotate, MergePatch))]
    for cls, group, resource in uses:
        verb, sub = verb_of[cls]
        assert _allowed(cluster + ns, group, resource + sub, verb), (cls.__name__, group, resource)


def test_crd_status_accepts_what_the_controller_writes() -> None:
    c = crd()
    kubernetes_validate.validate(c, K8S, strict=True)
    (v,) = c["spec"]["versions"]
    assert c["spec"]["scope"] == "Cluster" and v["subresources"] == {"status": {}}
    cols = {col["name"]: col["jsonPath"] for col in v["additionalPrinterColumns"]}
    assert cols["Pool"] == ".spec.pool" and cols["Last outcome"] == ".status.lastOutcome"
    assert cols["Last success"] == ".status.lastSuccess" and cols["Age"] == ".metadata.creationTimestamp"
    schema = v["schema"]["openAPIV3Schema"]
    status = {"pool": "gh200-roce", "lastOutcome": "unschedulable", "lastRun": "2025-09-30T12:04:00Z",
              "runs": [{"name": "fgc-gh200-roce-1759233600", "outcome": "unschedulable",
                        "started": "2025-09-30T12:00:00Z", "finished": "2025-09-30T12:04:00Z",
                        "message": "Pending for 240 s", "evidence": ["Pod x: 0/9 nodes are available"]}]}
    jsonschema.validate({"spec": {"pool": "gh200-roce"}, "status": status}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"spec": {"pool": "x"}, "status": {"runs": [{**status["runs"][0], "outcome": "ok"}]}},
                            schema)


def test_render_controller_cli_prints_the_fragment_and_refuses_a_bad_image() -> None:
    prof = str(PROFILES[0])
    r = CliRunner().invoke(app, ["render", "controller", "--profile", prof, "--image", IMAGE])
    assert r.exit_code == 3 and "--canary-image" in r.output  # the controller's image has no torch
    r = CliRunner().invoke(app, ["render", "controller", "--profile", prof, "--image", IMAGE,
                                 "--canary-image", CANARY_IMAGE])
    assert r.exit_code == 0, r.output
    assert "#       - name: fabric-validated" in r.stdout and "kind: CustomResourceDefinition" in r.stdout
    r = CliRunner().invoke(app, ["render", "controller", "--profile", prof, "--image", "UPPER/Case:tag"])
    assert r.exit_code == 3 and "error:" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(app, ["render", "controller", "--profile", prof, "--image", "ghcr.io/acme/fg:latest",
                                 "--canary-image", CANARY_IMAGE])
    assert r.exit_code == 3 and ":latest" in r.output  # it moves under a running install
    assert "kind: ServiceMonitor" in CliRunner().invoke(app, ["render", "controller", "--profile", prof, "--image",
                                                             IMAGE, "--canary-image", CANARY_IMAGE]).stdout


def test_render_controller_refuses_a_profile_without_storage(tmp_path: Path) -> None:
    text = PROFILE.replace("  storage:", "  unused:", 1) if "  storage:" in PROFILE else None
    assert text is not None
    doc = yaml.safe_load(text)
    doc["spec"].pop("unused")
    for pool in doc["spec"]["pools"]:
        pool.pop("canary", None)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(doc))
    r = CliRunner().invoke(app, ["render", "controller", "--profile", str(path), "--image", IMAGE,
                                 "--canary-image", CANARY_IMAGE])
    assert r.exit_code == 3 and "spec.storage.lustre is not set" in r.output and "never pass a canary" in r.output


def test_render_kueue_check_prints_the_check_and_the_fragment() -> None:
    import yaml

    r = CliRunner().invoke(app, ["render", "kueue-check", "--profile", str(ROOT / "examples/profiles/onprem-infiniband.yaml")])
    assert r.exit_code == 0, r.output
    ac = yaml.safe_load(r.stdout)
    kueue_validate(ac, "admissionchecks")
    assert ac["spec"]["controllerName"] == "fabricguard.io/fabric-validated"
    assert "#         onFlavors:" in r.stdout and "#         - h100-ib" in r.stdout and "#         - gh200-roce" in r.stdout


def test_configmaps_are_read_only_where_drift_looks() -> None:
    """Issue 25: the controller could read the ConfigMaps of every namespace; now a Role in each namespace drift
    compares (kube-system, the device plugins') and its own, nothing else, and the client refuses the rest."""
    from fabricguard.controller.kube import controller_permissions, controller_watched, reads
    from fabricguard.rbac import grants

    profile = load_profile(ROOT / "examples" / "profiles" / "gke-a3-ultra.yaml")
    objs = manifests(profile, "kind: x", IMAGE, "fabricguard-system")
    roles = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objs
             if o["kind"] == "Role" and o["metadata"]["name"] == "fabricguard-controller-configmaps"}
    watched = controller_watched(profile, "fabricguard-system")
    assert {ns for ns, _n in roles} == watched and {"kube-system", "fabricguard-system"} <= watched
    assert "team-a" not in watched
    # What a pass lists stays inside: every ConfigMap read names a watched namespace.
    cm_reads = [r for r in reads(profile, "fabricguard-system") if r.plural == "configmaps"]
    assert cm_reads and all(r.namespace in watched for r in cm_reads)
    perms = controller_permissions("fabricguard-system", profile)
    [get] = grants("v1", "configmaps", ["get"])
    assert perms.allows(get, "kube-system") and perms.allows(get, "fabricguard-system")
    assert not perms.allows(get, "team-a") and not perms.allows(get, None)
    assert controller_permissions("fabricguard-system", profile, "staging").allows(get, "staging")
