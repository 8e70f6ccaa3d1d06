"""``render readiness`` against the Node Readiness Controller's own CRD (v0.5.0, schema and CEL rules), and
``render agent``: kubernetes-validate, tolerations, least privilege, the image reference."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from agent_support import GKE, HERE, PROFILES, cel
from typer.testing import CliRunner

from fabricguard.agent.render import agent_manifests, readiness_rules
from fabricguard.cli import app
from fabricguard.profile import load_profile

CRD = HERE / "fixtures" / "nrc-v0.5.0" / "readiness.node.x-k8s.io_nodereadinessrules.yaml"
ALL_PROFILES = sorted(PROFILES.glob("*.yaml"))
IMAGE = "ghcr.io/acme/fabricguard:0.1.0@sha256:" + "ab" * 32
RUN = CliRunner()


def crd_schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text())
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    return version["schema"]["openAPIV3Schema"]


def cel_rules(schema: dict[str, Any], value: Any, path: str = "") -> list[str]:
    """Evaluate every ``x-kubernetes-validations`` rule that needs no old object; the messages that fail."""
    import celpy

    failures = []
    for rule in schema.get("x-kubernetes-validations", []):
        if "oldSelf" in rule["rule"]:
            continue  # transition rules (immutability) apply to updates only
        if not cel(rule["rule"], {"self": celpy.json_to_cel(value)}):
            failures.append(f"{path}: {rule['message']}")
    if isinstance(value, dict):
        for k, sub in (schema.get("properties") or {}).items():
            if k in value:
                failures += cel_rules(sub, value[k], f"{path}.{k}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            failures += cel_rules(schema["items"], item, f"{path}[{i}]")
    return failures


@pytest.mark.parametrize("profile", ALL_PROFILES, ids=[p.stem for p in ALL_PROFILES])
def test_readiness_rules_match_the_controllers_crd(profile: Path) -> None:
    prof = load_profile(profile)
    rules = readiness_rules(prof)
    assert len(rules) == 2 * len(prof.spec.pools)
    schema = crd_schema()
    for r in rules:
        jsonschema.validate(r, schema)
        assert cel_rules(schema, r) == [], r["metadata"]["name"]
        kubernetes_validate.validate(  # metadata.name must be a DNS subdomain like any object's
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": r["metadata"]["name"]}},
            kubernetes_validate.latest_version(), strict=True)


def test_the_crd_check_can_fail() -> None:
    bad = readiness_rules(load_profile(GKE))[0]
    bad["spec"]["taint"]["key"] = "fabricguard.io/unverified"
    assert cel_rules(crd_schema(), bad) == [".spec.taint: taint key must start with 'readiness.k8s.io/'"]
    bad["spec"]["enforcementMode"] = "sometimes"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, crd_schema())


def test_bootstrap_and_continuous_rules_per_pool() -> None:
    rules = {r["metadata"]["name"]: r["spec"] for r in readiness_rules(load_profile(GKE))}
    boot = rules["fabricguard-h200-rdma-fabric-unverified"]
    cont = rules["fabricguard-h200-rdma-fabric-degraded"]
    assert boot["enforcementMode"] == "bootstrap-only" and cont["enforcementMode"] == "continuous"
    assert boot["taint"] == {"key": "readiness.k8s.io/fabric-unverified", "value": "h200-rdma", "effect": "NoSchedule"}
    assert cont["taint"]["effect"] == "NoSchedule"  # never NoExecute: running jobs are not evicted
    assert boot["conditions"] == [{"type": "FabricReady", "requiredStatus": "True"}]
    assert boot["nodeSelector"] == {"matchLabels": {"cloud.google.com/gke-nodepool": "a3u-pool-1"}}


@pytest.mark.parametrize("profile", ALL_PROFILES, ids=[p.stem for p in ALL_PROFILES])
@pytest.mark.parametrize("manage_taints", [False, True])
def test_agent_manifests_pass_kubernetes_validate(profile: Path, manage_taints: bool) -> None:
    objs = agent_manifests(load_profile(profile), profile.read_text(), IMAGE, manage_taints=manage_taints)
    for o in objs:
        kubernetes_validate.validate(o, kubernetes_validate.latest_version(), strict=True)
    kinds = [o["kind"] for o in objs]
    assert kinds.count("DaemonSet") == len(load_profile(profile).spec.pools)
    assert {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding", "CronJob"} <= set(kinds)


def test_staleness_sweep_runs_every_minute_with_its_own_narrow_account() -> None:
    objs = agent_manifests(load_profile(GKE), GKE.read_text(), IMAGE, interval=30)
    [cron] = by_kind(objs, "CronJob")
    assert cron["spec"]["schedule"] == "* * * * *" and cron["spec"]["concurrencyPolicy"] == "Forbid"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    # the agent rewrites an unchanged condition every 300 s (its heartbeat): stale after that plus 3 runs
    assert pod["containers"][0]["args"] == ["agent-sweep", "--max-age", "390"]
    roles = {r["metadata"]["name"]: r["rules"] for r in by_kind(objs, "ClusterRole")}
    assert roles[pod["serviceAccountName"]] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]},
                                                {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]}]
    assert not by_kind(agent_manifests(load_profile(GKE), GKE.read_text(), IMAGE, sweep=False), "CronJob")


def by_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def test_daemonset_is_least_privilege_and_tolerates_its_taints() -> None:
    onprem = PROFILES / "onprem-infiniband.yaml"
    prof = load_profile(onprem)
    objs = agent_manifests(prof, onprem.read_text(), IMAGE)
    ds = next(d for d in by_kind(objs, "DaemonSet") if d["metadata"]["name"] == "fabricguard-agent-h100-ib")
    pod = ds["spec"]["template"]["spec"]
    # The agent, and (the pool mounts Lustre) the lnet sidecar: the one privileged part, said in an annotation.
    c, lnet = pod["containers"]
    assert c["name"] == "agent" and lnet["name"] == "lnet"
    assert lnet["securityContext"]["privileged"] is True and lnet["securityContext"]["readOnlyRootFilesystem"]
    assert "lnetctl" in lnet["command"][-1] and c["args"][c["args"].index("--lnetctl") + 1].startswith("dir:")
    tol = {(t.get("key"), t.get("effect")) for t in pod["tolerations"]}
    assert {("readiness.k8s.io/fabric-unverified", "NoSchedule"), ("readiness.k8s.io/fabric-degraded", "NoSchedule")} <= tol
    sc = c["securityContext"]
    assert sc["privileged"] is False and sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert not pod.get("hostNetwork") and not pod.get("hostPID")
    assert ds["metadata"]["annotations"]["fabricguard.io/privileged-for"].startswith("lnet sidecar: lustre.lnet")
    agent_vols = {m["name"] for m in c["volumeMounts"]}
    host_vols = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v and v["name"] in agent_vols}
    # /run/mellanox/drivers: the DOCA/MOFED driver container's root (rdma-core may live only there; issue 24).
    assert set(host_vols.values()) == {"/sys", "/proc", "/usr", "/lib", "/etc/ld.so.conf.d", "/run/mellanox/drivers"}
    doca = next(m for m in c["volumeMounts"] if m["mountPath"] == "/host/run/mellanox/drivers")
    assert doca["mountPropagation"] == "HostToContainer"
    assert {m["name"] for m in lnet["volumeMounts"]} == {"lnet", "host-root"}  # the host's root: the sidecar's alone
    for m in c["volumeMounts"]:
        assert m["readOnly"] is True, m
    lustre = [v for v in pod["volumes"] if "persistentVolumeClaim" in v]
    assert lustre == [{"name": "lustre", "persistentVolumeClaim": {"claimName": "exa-lustre", "readOnly": True}}]
    assert "nvidia.com/gpu" not in c["resources"].get("requests", {})  # never takes a GPU from training
    assert c["image"] == IMAGE and c["command"] == ["python", "-m", "fabricguard.agent"]
    assert c["args"][c["args"].index("--pool") + 1] == "h100-ib" and "--manage-taints" not in c["args"]
    [role] = [r for r in by_kind(objs, "ClusterRole") if r["metadata"]["name"] == "fabricguard-agent"]
    # ResourceSlices: GPUs a DRA driver offers (GPU Operator's GPUCluster) are never in allocatable, whatever the
    # pool's fabric (issue 24 item 8: the grant is now on every agent, on purpose).
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
                             {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
                             {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"], "verbs": ["list"]}]


def test_gke_needs_privilege_for_nvml_only_and_says_so() -> None:
    """GKE installs the driver on the host without the NVIDIA container toolkit: /dev/nvidia* only reaches
    GPU requests or privileged containers, so the GPU health checks are the one reason for privilege."""
    objs = agent_manifests(load_profile(GKE), GKE.read_text(), IMAGE)
    [ds] = by_kind(objs, "DaemonSet")
    c = ds["spec"]["template"]["spec"]["containers"][0]
    assert c["name"] == "agent" and c["securityContext"]["privileged"] is True
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    why = ds["metadata"]["annotations"]["fabricguard.io/privileged-for"]
    assert why.startswith("agent: gpu.count, gpu.ecc, gpu.memory")
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["LD_LIBRARY_PATH"] == "/host/home/kubernetes/bin/nvidia/lib64"
    host_vols = {v["hostPath"]["path"] for v in ds["spec"]["template"]["spec"]["volumes"] if "hostPath" in v}
    assert "/home/kubernetes/bin" in host_vols
    lustre = [v for v in ds["spec"]["template"]["spec"]["volumes"] if "persistentVolumeClaim" in v]
    assert lustre[0]["persistentVolumeClaim"]["claimName"] == "training-lustre"
    # Where the cluster does run the toolkit, say so and the privilege goes.
    [ds] = by_kind(agent_manifests(load_profile(GKE), GKE.read_text(), IMAGE, nvml_access="runtime"), "DaemonSet")
    c = ds["spec"]["template"]["spec"]["containers"][0]
    assert c["securityContext"]["privileged"] is False and "LD_LIBRARY_PATH" not in {e["name"] for e in c["env"]}
    r = RUN.invoke(app, ["render", "agent", "-p", str(GKE), "--image", IMAGE, "--nvml-access", "maybe"])
    assert r.exit_code == 3 and "--nvml-access 'maybe'" in r.output


def test_manage_taints_adds_only_node_patch() -> None:
    objs = agent_manifests(load_profile(GKE), GKE.read_text(), IMAGE, manage_taints=True)
    [role] = [r for r in by_kind(objs, "ClusterRole") if r["metadata"]["name"] == "fabricguard-agent"]
    granted = {(g, res, v) for r in role["rules"] for g in r["apiGroups"] for res in r["resources"] for v in r["verbs"]}
    # The pool's FabricValidation too: the agent must not re-taint what an open breaker withholds (issue 24).
    assert granted == {("", "nodes", "get"), ("", "nodes", "patch"), ("", "nodes/status", "patch"),
                       ("resource.k8s.io", "resourceslices", "list"), ("fabricguard.io", "fabricvalidations", "get")}
    [ds] = by_kind(objs, "DaemonSet")
    assert "--manage-taints" in ds["spec"]["template"]["spec"]["containers"][0]["args"]


def test_render_commands(tmp_path: Path) -> None:
    r = RUN.invoke(app, ["render", "readiness", "--profile", str(GKE)])
    assert r.exit_code == 0, r.output
    docs = [d for d in yaml.safe_load_all(r.stdout) if d]
    assert [d["kind"] for d in docs] == ["NodeReadinessRule", "NodeReadinessRule"]
    r = RUN.invoke(app, ["render", "readiness", "--profile", str(GKE), "--dry-run-rules"])
    assert all(d["spec"]["dryRun"] is True for d in yaml.safe_load_all(r.stdout) if d)
    r = RUN.invoke(app, ["render", "readiness", "--profile", str(tmp_path / "absent.yaml")])
    assert r.exit_code == 3 and "absent.yaml" in r.output
    r = RUN.invoke(app, ["render", "agent", "--profile", str(GKE), "--image", IMAGE])
    assert r.exit_code == 0, r.output
    assert any(d["kind"] == "DaemonSet" for d in yaml.safe_load_all(r.stdout) if d)
    r = RUN.invoke(app, ["render", "agent", "--profile", str(GKE), "--image", IMAGE, "--lnet", "none"])
    [ds] = [d for d in yaml.safe_load_all(r.stdout) if d and d["kind"] == "DaemonSet"]
    assert [c["name"] for c in ds["spec"]["template"]["spec"]["containers"]] == ["agent"]
    r = RUN.invoke(app, ["render", "agent", "--profile", str(GKE), "--image", IMAGE, "--lnet", "host"])
    assert r.exit_code == 3 and "--lnet 'host'" in r.output


@pytest.mark.parametrize(
    ("image", "needle"),
    [
        ("ghcr.io/acme/fabricguard:0.1.0", "lacks the digest of its multi-architecture index"),
        ("ghcr.io/acme/fabricguard@sha256:" + "ab" * 32, "lacks a tag"),
        ("ghcr.io/Acme/fabricguard:0.1.0@sha256:" + "ab" * 32, "ghcr.io/Acme"),
    ],
)
def test_agent_image_needs_tag_and_index_digest(image: str, needle: str) -> None:
    r = RUN.invoke(app, ["render", "agent", "--profile", str(GKE), "--image", image])
    assert r.exit_code == 3
    assert needle in " ".join(r.output.split()) and "Traceback" not in r.output


def test_policy_guards_every_node_field_of_the_oldest_supported_release() -> None:
    """The policy names fields explicitly (CEL cannot drop one field from an object): it must cover all of
    Kubernetes 1.30's NodeStatus and NodeSpec, and nothing newer (that would not compile on 1.30)."""
    import json

    from fabricguard.agent.render import SPEC_FIELDS, STATUS_FIELDS

    base = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / "v1.30.0-local"
    status = set(json.loads((base / "nodestatus-v1.json").read_text())["properties"]) - {"conditions"}
    spec = set(json.loads((base / "nodespec-v1.json").read_text())["properties"]) - {"taints"}
    assert set(STATUS_FIELDS) == status and set(SPEC_FIELDS) == spec
