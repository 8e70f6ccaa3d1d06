"""``render install`` for each example profile: the kustomize tree builds with kubectl, every object validates
(built-ins with kubernetes-validate, custom resources with their upstream CRDs), the objects applied in order to
the emulator leave no pod with a missing reference, and each component's documented removal leaves no ``Fail``
webhook and no ClusterQueue check without its server."""

from __future__ import annotations

import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kmock import KubernetesEmulator, Server
from typer.testing import CliRunner

from crd_schema import crd_errors, has_schema
from fabricguard import names
from fabricguard.cli import app
from fabricguard.controller import canary as canary_mod
from fabricguard.controller.manifests import memory_for
from fabricguard.kube import Kube
from fabricguard.placement import install
from fabricguard.profile import load_profile
from kube_support import ROOT, kubeconfig

PROFILES = sorted((ROOT / "examples" / "profiles").glob("*.yaml"))
DIGEST = "@sha256:" + "ab" * 32
IMAGE, AGENT_IMAGE, CANARY_IMAGE = (f"registry.example.com/{n}:0.1.0{DIGEST}" for n in
                                    ("fabricguard", "fabricguard-agent", "fabricguard-canary"))
K8S = kubernetes_validate.latest_version()
NRR_CRD = ROOT / "tests" / "agent" / "fixtures" / "nrc-v0.5.0" / "readiness.node.x-k8s.io_nodereadinessrules.yaml"
KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl (>= 1.27) is not on PATH: it builds the kustomize tree")
# Where the emulator keeps each kind the install renders (group/version/plural), and whether it is namespaced.
PLURAL = {
    "Namespace": ("v1/namespaces", False), "ResourceQuota": ("v1/resourcequotas", True),
    "PersistentVolume": ("v1/persistentvolumes", False),
    "PersistentVolumeClaim": ("v1/persistentvolumeclaims", True),
    "ServiceAccount": ("v1/serviceaccounts", True), "ConfigMap": ("v1/configmaps", True),
    "Secret": ("v1/secrets", True), "Service": ("v1/services", True),
    "Deployment": ("apps/v1/deployments", True), "DaemonSet": ("apps/v1/daemonsets", True),
    "CronJob": ("batch/v1/cronjobs", True), "Job": ("batch/v1/jobs", True),
    "PodDisruptionBudget": ("policy/v1/poddisruptionbudgets", True),
    "NetworkPolicy": ("networking.k8s.io/v1/networkpolicies", True),
    "PriorityClass": ("scheduling.k8s.io/v1/priorityclasses", False),
    "ClusterRole": ("rbac.authorization.k8s.io/v1/clusterroles", False),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io/v1/clusterrolebindings", False),
    "Role": ("rbac.authorization.k8s.io/v1/roles", True),
    "RoleBinding": ("rbac.authorization.k8s.io/v1/rolebindings", True),
    "CustomResourceDefinition": ("apiextensions.k8s.io/v1/customresourcedefinitions", False),
    "MutatingWebhookConfiguration": ("admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", False),
    "ValidatingWebhookConfiguration": ("admissionregistration.k8s.io/v1/validatingwebhookconfigurations", False),
    "ValidatingAdmissionPolicy": ("admissionregistration.k8s.io/v1/validatingadmissionpolicies", False),
    "ValidatingAdmissionPolicyBinding": ("admissionregistration.k8s.io/v1/validatingadmissionpolicybindings", False),
    "Issuer": ("cert-manager.io/v1/issuers", True), "Certificate": ("cert-manager.io/v1/certificates", True),
    "NodeReadinessRule": ("readiness.node.x-k8s.io/v1alpha1/nodereadinessrules", False),
    "AdmissionCheck": ("kueue.x-k8s.io/v1beta2/admissionchecks", False),
    "Topology": ("kueue.x-k8s.io/v1beta2/topologies", False),
    "ResourceFlavor": ("kueue.x-k8s.io/v1beta2/resourceflavors", False),
    "ClusterQueue": ("kueue.x-k8s.io/v1beta2/clusterqueues", False),
    "LocalQueue": ("kueue.x-k8s.io/v1beta2/localqueues", True),
    "ServiceMonitor": ("monitoring.coreos.com/v1/servicemonitors", True),
    "PodMonitor": ("monitoring.coreos.com/v1/podmonitors", True),
    "PrometheusRule": ("monitoring.coreos.com/v1/prometheusrules", True),
    "PodMonitoring": ("monitoring.googleapis.com/v1/podmonitorings", True),
    "Rules": ("monitoring.googleapis.com/v1/rules", True),
    "ClusterRules": ("monitoring.googleapis.com/v1/clusterrules", False),
}
BUILTIN_PRIORITY = {"system-node-critical", "system-cluster-critical"}


def render(profile: Path, out: Path, *extra: str) -> None:
    r = CliRunner().invoke(app, ["render", "install", "-p", str(profile), "--image", IMAGE, "--agent-image",
                                 AGENT_IMAGE, "--canary-image", CANARY_IMAGE, "-o", str(out),
                                 "--apiserver-cidr", "172.16.0.0/28", *extra])
    assert r.exit_code == 0, r.output


_BUILT: dict[Path, str] = {}


def build(path: Path) -> list[dict[str, Any]]:
    """``kubectl kustomize path`` (once per directory: the rendered trees do not change during the module)."""
    assert KUBECTL is not None
    if path in _BUILT:
        return [d for d in yaml.load_all(_BUILT[path], Loader=yaml.CSafeLoader) if d]
    done = subprocess.run([KUBECTL, "kustomize", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    _BUILT[path] = done.stdout
    return [d for d in yaml.load_all(done.stdout, Loader=yaml.CSafeLoader) if d]


def key(obj: dict[str, Any]) -> tuple[str, str | None, str]:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace"), meta["name"]


@pytest.fixture(scope="module", params=PROFILES, ids=[p.stem for p in PROFILES])
def rendered(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp(request.param.stem) / "install"
    render(request.param, out)
    profile = load_profile(request.param)
    comps = install.components(profile, request.param.read_text(), install.Options(
        image=IMAGE, agent_image=AGENT_IMAGE, canary_image=CANARY_IMAGE, apiserver_cidrs=("172.16.0.0/28",)))
    built = build(out) if KUBECTL else []
    return profile, out, comps, built


@needs_kubectl
def test_the_tree_builds_in_component_order_with_one_owner_per_object(rendered) -> None:
    _profile, out, comps, built = rendered
    expected = [key(x) for c in comps for x in c.objects]
    # kustomize refuses two objects with one id, so the build alone proves a single owner; fifo keeps our order.
    assert [key(x) for x in built] == expected
    assert len(set(expected)) == len(expected)
    assert [k for k in expected if k[0] == "Namespace"] == [("Namespace", None, "fabricguard-system")]
    for c in comps:
        assert (out / c.name / "kustomization.yaml").is_file()
        for sibling in c.siblings:
            assert build(out / sibling)


@needs_kubectl
def test_every_object_validates_strictly(rendered) -> None:
    _profile, _out, _comps, built = rendered
    nrr = yaml.safe_load(NRR_CRD.read_text())
    import jsonschema

    [v] = [v for v in nrr["spec"]["versions"] if v["name"] == "v1alpha1"]
    custom = 0
    for obj in built:
        if obj["kind"] == "NodeReadinessRule":
            jsonschema.validate(obj, v["schema"]["openAPIV3Schema"])
            custom += 1
        elif has_schema(obj["apiVersion"], obj["kind"]):
            assert crd_errors(obj) == [], (obj["kind"], obj["metadata"]["name"])
            custom += 1
        else:
            kubernetes_validate.validate(obj, K8S, strict=True)
    assert custom >= 8  # cert-manager, Kueue, NRR, Prometheus Operator objects were all checked


def test_gmp_variant_validates_against_managed_prometheus_crds(tmp_path: Path) -> None:
    profile = load_profile(PROFILES[1])
    comps = install.components(profile, PROFILES[1].read_text(), install.Options(
        image=IMAGE, agent_image=AGENT_IMAGE, canary_image=CANARY_IMAGE, monitoring="gmp"))
    [mon] = [c for c in comps if c.name == install.MONITOR]
    kinds = sorted(x["kind"] for x in mon.objects)
    # ClusterRules, not Rules: GMP scopes a namespaced Rules to its own namespace's series (issue 24).
    assert kinds == ["ClusterRules", "ConfigMap", "PodMonitoring", "PodMonitoring", "PodMonitoring"]
    for x in mon.objects:
        if x["kind"] == "ClusterRules":
            # GMP's ClusterRules and Rules share one spec type (RulesSpec); only the scope differs, and the
            # shipped schema is Rules': validate the spec through it.
            assert "namespace" not in x["metadata"]
            x = {**x, "kind": "Rules", "metadata": {**x["metadata"], "namespace": "fabricguard-system"}}
        if x["kind"] != "ConfigMap":
            assert crd_errors(x) == [], x["metadata"]["name"]
    assert {x["metadata"]["name"] for x in mon.objects if x["kind"] == "PodMonitoring"} >= {
        "fabricguard-admission", "fabricguard-controller"}


def test_monitoring_for_kube_prometheus_stack(rendered) -> None:
    profile, _out, _comps, _built = rendered
    comps = install.components(profile, "x", install.Options(image=IMAGE, agent_image=AGENT_IMAGE,
                                                             canary_image=CANARY_IMAGE, release="kps"))
    [mon] = [c for c in comps if c.name == install.MONITOR]
    by = {x["kind"]: x for x in mon.objects}
    assert by["ServiceMonitor"]["spec"]["endpoints"][0]["honorLabels"] is True
    assert all(x["metadata"]["labels"]["release"] == "kps" for x in mon.objects if x["kind"] != "ConfigMap")
    assert by["ConfigMap"]["metadata"]["labels"]["grafana_dashboard"] == "1"


# ------------------------------------------------------------------------------------------ the cluster model


def refs(pod: dict[str, Any]) -> list[tuple[str, str]]:
    """(kind, name) of every object a pod spec needs to start."""
    out = [("ServiceAccount", pod.get("serviceAccountName") or "default")]
    if pod.get("priorityClassName"):
        out.append(("PriorityClass", pod["priorityClassName"]))
    for v in pod.get("volumes") or ():
        if "persistentVolumeClaim" in v:
            out.append(("PersistentVolumeClaim", v["persistentVolumeClaim"]["claimName"]))
        if "configMap" in v:
            out.append(("ConfigMap", v["configMap"]["name"]))
        if "secret" in v:
            out.append(("Secret", v["secret"]["secretName"]))
    out += [("Secret", s["name"]) for s in pod.get("imagePullSecrets") or ()]
    return out


def pod_specs(objs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for x in objs:
        ns = x["metadata"].get("namespace")
        if x["kind"] in ("Deployment", "DaemonSet"):
            out.append((ns, x["spec"]["template"]["spec"]))
        elif x["kind"] == "CronJob":
            out.append((ns, x["spec"]["jobTemplate"]["spec"]["template"]["spec"]))
        elif x["kind"] == "Job":  # the training namespaces' directories (10-storage)
            out.append((ns, x["spec"]["template"]["spec"]))
    return out


def missing_refs(state: dict[tuple[str, str | None, str], dict[str, Any]],
                 pods: list[tuple[str, dict[str, Any]]]) -> list[str]:
    bad = []
    for ns, pod in pods:
        for kind, name in refs(pod):
            if kind == "ServiceAccount" and name == "default":
                continue  # every namespace has it
            if kind == "PriorityClass":
                if name in BUILTIN_PRIORITY or (kind, None, name) in state:
                    continue
            elif (kind, ns, name) in state:
                continue
            bad.append(f"{ns}: {kind}/{name}")
        if pod.get("priorityClassName") in BUILTIN_PRIORITY and ns != "kube-system":
            # GKE admits system-*-critical pods outside kube-system only under a quota scoped to the class.
            quotas = [q for (k, qns, _), q in state.items() if k == "ResourceQuota" and qns == ns]
            if not any(pod["priorityClassName"] in e["values"] for q in quotas
                       for e in q["spec"]["scopeSelector"]["matchExpressions"] if e["scopeName"] == "PriorityClass"):
                bad.append(f"{ns}: no ResourceQuota scoped to PriorityClass {pod['priorityClassName']}")
    return bad


def cert_manager(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What cert-manager makes of the Certificates: their Secrets."""
    return [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": x["spec"]["secretName"],
                                                                "namespace": x["metadata"]["namespace"]}}
            for x in objs if x["kind"] == "Certificate"]


def dangling(state: dict[tuple[str, str | None, str], dict[str, Any]]) -> list[str]:
    """Fail webhooks without a server, ClusterQueue checks without their controller, readiness rules without agent."""
    bad = []
    objs = list(state.values())
    deployments = [x for x in objs if x["kind"] == "Deployment"]
    for x in objs:
        if x["kind"] in install.WEBHOOK_KINDS:
            for hook in x["webhooks"]:
                if hook.get("failurePolicy", "Fail") != "Fail":
                    continue
                svc = hook["clientConfig"]["service"]
                service = state.get(("Service", svc["namespace"], svc["name"]))
                served = service is not None and any(
                    d["metadata"]["namespace"] == svc["namespace"]
                    and all(d["spec"]["template"]["metadata"]["labels"].get(k) == v
                            for k, v in service["spec"]["selector"].items()) for d in deployments)
                if not served:
                    bad.append(f"{x['kind']}/{x['metadata']['name']}: Fail webhook {hook['name']} has no server")
        if x["kind"] == "ClusterQueue":
            checks = (x["spec"].get("admissionChecksStrategy") or {}).get("admissionChecks") or []
            for check in checks:
                ac = state.get(("AdmissionCheck", None, check["name"]))
                answered = ac is not None and ac["spec"]["controllerName"] == names.CHECK_CONTROLLER and any(
                    d["metadata"]["name"] == "fabricguard-controller" for d in deployments)
                if not answered:
                    bad.append(f"ClusterQueue/{x['metadata']['name']}: check {check['name']} has no controller")
        agents = [d for d in objs if d["kind"] == "DaemonSet" and d["metadata"]["name"].startswith("fabricguard-agent")]
        if x["kind"] == "NodeReadinessRule" and not agents:
            bad.append(f"NodeReadinessRule/{x['metadata']['name']}: taints nodes that no agent can clear")
    return bad


@pytest.fixture()
async def emulator(tmp_path: Path):
    async with KubernetesEmulator() as k8s, Server(k8s) as server:
        k8s["get /version/"] << {"major": "1", "minor": "33", "gitVersion": "v1.33.5"}
        for resource, _namespaced in PLURAL.values():  # the CRDs the prerequisites install, and the built-ins
            k8s.resources[resource] = {}
        kube = await Kube.connect(kubeconfig(tmp_path, str(server.url).rstrip("/")))
        try:
            yield k8s, kube
        finally:
            await kube.close()


def store(k8s: KubernetesEmulator, obj: dict[str, Any]) -> None:
    resource, namespaced = PLURAL[obj["kind"]]
    meta = obj["metadata"]
    assert namespaced == ("namespace" in meta), key(obj)
    k8s.objects[resource, meta.get("namespace"), meta["name"]] = obj


async def read_back(kube: Kube, namespaces: list[str]) -> dict[tuple[str, str | None, str], dict[str, Any]]:
    """Everything the emulator holds, read through the API as a client would."""
    state: dict[tuple[str, str | None, str], dict[str, Any]] = {}
    for kind, (resource, namespaced) in PLURAL.items():
        if kind == "Namespace":
            continue  # kmock's emulator does not list /api/v1/namespaces; nothing here references a Namespace
        api, plural = resource.rsplit("/", 1)
        for ns in (namespaces if namespaced else [None]):
            for x in await kube.list(api, plural, ns):
                x.setdefault("kind", kind)
                state[key(x)] = x
    return state


@needs_kubectl
async def test_applied_in_order_no_pod_lacks_what_it_references(rendered, emulator) -> None:
    profile, _out, comps, built = rendered
    k8s, kube = emulator
    applied: dict[tuple[str, str | None, str], dict[str, Any]] = {}
    for comp in comps:
        objs = [x for x in built if key(x) in {key(y) for y in comp.objects}]
        for x in objs + cert_manager(objs):
            store(k8s, x)
            applied[key(x)] = x
        # After each component: what is there so far is complete (nothing waits on a later component).
        assert missing_refs(applied, pod_specs(list(applied.values()))) == [], comp.name
        assert dangling(applied) == [], comp.name
    state = await read_back(kube, sorted({k[1] for k in applied if k[1]}))  # as a client reads it back
    assert set(state) == {k for k in applied if k[0] != "Namespace"}
    assert missing_refs(state, pod_specs(list(state.values()))) == []
    # The canary of every pool, as the controller creates it in its namespace.
    now = datetime(2026, 12, 1, tzinfo=UTC)
    for pool in profile.spec.pools:
        if profile.canary(pool) is None:
            continue
        spec = canary_mod.spec_for(profile, pool, "fabricguard-system", now)
        js = canary_mod.render_canary(profile, pool, spec, image=CANARY_IMAGE, owner=None)
        pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        assert missing_refs(state, [("fabricguard-system", pod)]) == [], pool.name


@needs_kubectl
@pytest.mark.parametrize("component", [install.ADMISSION, install.AGENT, install.READINESS, install.CONTROLLER,
                                       install.KUEUE, install.WEBHOOKS, install.MONITOR])
def test_removing_one_component_by_its_documented_commands_leaves_nothing_fail_closed(rendered, component) -> None:
    _profile, out, comps, built = rendered
    [comp] = [c for c in comps if c.name == component]
    state = {key(x): x for x in built + cert_manager(built)}
    assert dangling(state) == []
    readme = (out / "README.md").read_text()
    for step in comp.remove:
        assert step.command() in readme  # the documented command is the one run here
        objs = build(out / step.path)
        if step.verb == "apply":
            state.update({key(x): x for x in objs})
        else:
            for x in objs:
                state.pop(key(x), None)
    assert not any(key(x) in state for x in comp.objects)
    assert dangling(state) == []
    assert missing_refs(state, pod_specs(list(state.values()))) == []
    # Put back as the README says: the component, then what was removed with it, in apply order.
    order = [c.name for c in comps]
    back = sorted({comp.name, *(install.KUEUE if s.path.startswith(install.KUEUE) else s.path for s in comp.remove)},
                  key=order.index)
    for path in back:
        state.update({key(x): x for x in build(out / path)})
        assert dangling(state) == [], path
    assert state == {key(x): x for x in built + cert_manager(built)}


@needs_kubectl
def test_uninstall_order_never_leaves_anything_fail_closed(rendered) -> None:
    _profile, out, comps, built = rendered
    state = {key(x): x for x in built + cert_manager(built)}
    for step in install.uninstall(comps):
        for x in build(out / step.path):
            state.pop(key(x), None)
        assert dangling(state) == [], step.path
    assert not [k for k in state if k[0] != "Secret"]


@pytest.mark.parametrize(("platform", "dcgm_ns"), [("gpu-operator", "gpu-operator"),
                                                   ("dcgm-exporter", "dcgm-exporter"), ("gke", None)])
def test_dcgm_exporter_targets_per_platform(platform: str, dcgm_ns: str | None) -> None:
    profile = load_profile(PROFILES[0])
    comps = install.components(profile, "x", install.Options(image=IMAGE, agent_image=AGENT_IMAGE,
                                                             canary_image=CANARY_IMAGE, dcgm_platform=platform))
    [mon] = [c for c in comps if c.name == install.MONITOR]
    dcgm = [x for x in mon.objects if x["metadata"]["name"] == "fabricguard-dcgm-exporter"]
    assert [x["spec"]["namespaceSelector"]["matchNames"] for x in dcgm] == ([[dcgm_ns]] if dcgm_ns else [])
    assert all(crd_errors(x) == [] for x in dcgm)


@needs_kubectl
def test_manage_taints_renders_no_readiness_rules_and_still_builds(tmp_path: Path) -> None:
    render(PROFILES[0], tmp_path / "o", "--manage-taints", "--monitoring", "none")
    built = build(tmp_path / "o")
    assert not [x for x in built if x["kind"] == "NodeReadinessRule"]
    assert not (tmp_path / "o" / install.READINESS).exists() and not (tmp_path / "o" / install.MONITOR).exists()
    agent = next(x for x in built if x["kind"] == "DaemonSet")
    assert "--manage-taints" in agent["spec"]["template"]["spec"]["containers"][0]["args"]


def test_webhook_and_preflight_roles_come_from_their_permission_tables(rendered) -> None:
    """20-admission's ClusterRole is WEBHOOK_GRANTS (DRA claim pools only); the optional preflight ClusterRole is
    PREFLIGHT_GRANTS, written beside the install but not applied by ``kubectl apply -k DIR``."""
    from fabricguard.admission.templates import WEBHOOK_GRANTS
    from fabricguard.placement.preflight import PREFLIGHT_ROLE, preflight_role
    from fabricguard.rbac import rbac_rules

    profile, out, _comps, _built = rendered
    admission = [d for d in yaml.safe_load_all((out / install.ADMISSION / "manifests.yaml").read_text()) if d]
    roles = [d for d in admission if d["kind"] in ("ClusterRole", "Role")]
    if any(p.claim_template_name for p in profile.spec.pools):
        assert [(r["kind"], r["rules"]) for r in roles] == [("ClusterRole", rbac_rules(WEBHOOK_GRANTS, "cluster"))]
        binding = next(d for d in admission if d["kind"] == "ClusterRoleBinding")
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "fabricguard-admission",
                                        "namespace": "fabricguard-system"}]
    else:
        assert roles == []
    opt = out / install.OPTIONAL_PREFLIGHT
    [role] = [d for d in yaml.safe_load_all((opt / "manifests.yaml").read_text()) if d]
    assert role == preflight_role() and role["metadata"]["name"] == PREFLIGHT_ROLE
    top = yaml.safe_load((out / "kustomization.yaml").read_text())
    assert not any(r.startswith("optional") for r in top["resources"])
    assert f"kubectl apply -k DIR/{install.OPTIONAL_PREFLIGHT}" in (out / "README.md").read_text()
    if KUBECTL:
        assert [key(x) for x in build(opt)] == [("ClusterRole", None, PREFLIGHT_ROLE)]


def test_storage_is_a_static_claim_of_the_profile_file_system(rendered) -> None:
    profile, _out, comps, _built = rendered
    [storage] = [c for c in comps if c.name == install.STORAGE]
    pv, pvc, *job = storage.objects
    vol = profile.spec.storage.lustre.volume
    if vol.namespaceDirectory is not None:
        # The training namespaces' directories, made before their volumes (rooted there) are mounted.
        [job] = job
        assert job["kind"] == "Job" and job["spec"]["template"]["spec"]["containers"][0]["args"][:4] == [
            "storage", "namespace-dirs", "--root", "/lustre"]
        assert any(f"wait job/{job['metadata']['name']}" in a for a in storage.after_apply)
        assert any("kubectl -n NS delete pvc" in n for n in storage.notes)  # the upgrade, in the README
    else:
        assert job == []
    assert pv["spec"]["csi"]["volumeHandle"] == vol.volumeHandle and pv["spec"]["csi"]["driver"] == vol.csi_driver
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert pvc["spec"]["storageClassName"] == "" and pvc["spec"]["volumeName"] == pv["metadata"]["name"]
    assert pv["spec"]["claimRef"] == {"namespace": "fabricguard-system", "name": profile.spec.storage.lustre.claimName}
    assert pv["metadata"]["annotations"]["fabricguard.io/claim-root"] == "/"  # the controller reads every namespace
    # The team namespaces' pairs name the same file system: rooted at the namespace's own directory where the
    # driver can (FSx: <mountname>/<namespace>, a handle of its own), at the root where it cannot (GKE: admission).
    team = [x for x in storage.overlay_objects.get(install.TEAM_STORAGE, []) if x["kind"] == "PersistentVolume"]
    for x in team:
        ns = x["spec"]["claimRef"]["namespace"]
        csi = x["spec"]["csi"]
        if vol.provider == "fsx":
            assert csi["volumeHandle"] == f"{vol.volumeHandle}:{ns}"
            assert csi["volumeAttributes"]["mountname"] == vol.volumeAttributes["mountname"] + "/" + ns
            assert x["metadata"]["annotations"]["fabricguard.io/claim-root"] == ns
        elif vol.csi_driver == "exa.csi.ddn.com":  # the static handle's last field is the volume's directory
            assert csi["volumeHandle"] == f"{vol.volumeHandle}/{ns}"
            assert csi["volumeAttributes"] == vol.volumeAttributes
        elif vol.csi_driver == "azurelustre.csi.azure.com":
            assert csi["volumeHandle"] == f"{vol.volumeHandle}#{ns}#" and csi["volumeAttributes"]["sub-dir"] == ns
        elif vol.namespaceDirectory is None:
            assert csi == pv["spec"]["csi"] and x["metadata"]["annotations"]["fabricguard.io/claim-root"] == "/"


def test_refusals_name_what_to_change(tmp_path: Path) -> None:
    text = (ROOT / "examples" / "profiles" / "aws-p5-efa.yaml").read_text()
    no_volume = tmp_path / "p.yaml"
    start = text.index("      volume:")
    end = text.index("  pools:")
    no_volume.write_text(text[:start] + text[end:])
    r = CliRunner().invoke(app, ["render", "install", "-p", str(no_volume), "--image", IMAGE, "--agent-image",
                                 AGENT_IMAGE, "--canary-image", CANARY_IMAGE, "-o", str(tmp_path / "o"),
                                 "--apiserver-cidr", "172.16.0.0/28"])
    assert r.exit_code == 3 and "spec.storage.lustre.volume" in r.output
    r = CliRunner().invoke(app, ["render", "install", "-p", str(PROFILES[0]), "--image", "acme/fg:latest",
                                 "--agent-image", AGENT_IMAGE, "--canary-image", CANARY_IMAGE, "-o",
                                 str(tmp_path / "o2")])
    assert r.exit_code == 3 and ":latest" in r.output
    latest = tmp_path / "latest.yaml"
    latest.write_text(text.replace("    fabric:\n      type: efa", "    canary: {image: acme/canary:latest}\n    fabric:\n"
                                   "      type: efa", 1))
    r = CliRunner().invoke(app, ["render", "install", "-p", str(latest), "--image", IMAGE, "--agent-image",
                                 AGENT_IMAGE, "--canary-image", CANARY_IMAGE, "-o", str(tmp_path / "o3")])
    assert r.exit_code == 3 and "spec.pools[0].canary.image" in r.output and ":latest" in r.output
    # Without --apiserver-cidr the webhook port would be open to every source: refused unless --any-source.
    r = CliRunner().invoke(app, ["render", "install", "-p", str(PROFILES[0]), "--image", IMAGE, "--agent-image",
                                 AGENT_IMAGE, "--canary-image", CANARY_IMAGE, "-o", str(tmp_path / "o4")])
    assert r.exit_code == 3 and "no --apiserver-cidr" in r.output and "--any-source" in r.output
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    r = CliRunner().invoke(app, ["render", "install", "-p", str(PROFILES[0]), "--image", IMAGE, "--agent-image",
                                 AGENT_IMAGE, "--canary-image", CANARY_IMAGE, "-o", str(tmp_path / "full")])
    assert r.exit_code == 3 and "not an empty directory" in r.output




def test_gmp_rules_read_the_jobs_labels_as_managed_prometheus_stores_them(tmp_path: Path) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("promtool_support", ROOT / "tests" / "controller" /
                                                  "promtool_support.py")
    assert spec and spec.loader
    support = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(support)
    profile = load_profile(ROOT / "examples" / "profiles" / "gke-a3-ultra.yaml")
    comps = install.components(profile, "x", install.Options(image=IMAGE, agent_image=AGENT_IMAGE,
                                                             canary_image=CANARY_IMAGE, monitoring="gmp"))
    [rules] = [x for c in comps for x in c.objects if x["kind"] == "ClusterRules"]
    # GMP: the target's namespace/job win; the job's own labels arrive as exported_*.
    series = ('fabricguard_job_on_sockets{namespace="fabricguard-system",job="fabricguard-controller",'
              'exported_namespace="ml-search",exported_job="qwen",pool="h200-rdma"}')
    done = support.run_promtool_tests(tmp_path, {"groups": rules["spec"]["groups"]}, [{
        "interval": "1m", "input_series": [{"series": series, "values": "1x10"}],
        "alert_rule_test": [{"eval_time": "2m", "alertname": "FabricguardJobOnSockets", "exp_alerts": [{
            "exp_labels": {"severity": "critical", "exported_namespace": "ml-search", "exported_job": "qwen",
                           "pool": "h200-rdma"}}]}]}])
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_gmp_dashboard_reads_the_job_labels_as_gmp_stores_them_and_every_query_parses(tmp_path: Path) -> None:
    import json as _json
    import shutil as _shutil

    profile = load_profile(ROOT / "examples" / "profiles" / "gke-a3-ultra.yaml")
    comps = install.components(profile, "x", install.Options(image=IMAGE, agent_image=AGENT_IMAGE,
                                                             canary_image=CANARY_IMAGE, monitoring="gmp"))
    [cm] = [x for c in comps for x in c.objects if x["kind"] == "ConfigMap" and "grafana_dashboard" in
            x["metadata"]["labels"]]
    board = _json.loads(cm["data"]["fabricguard.json"])
    exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]
    job_view = [e for e in exprs if "fabricguard_job_transport" in e]
    assert job_view and all('exported_namespace="$namespace"' in e for e in job_view)
    assert not any(re_search(r'[{,]namespace="\$namespace"', e) for e in exprs if "fabricguard_job_" in e)
    promtool = _shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian package prometheus)")
    rules = {"groups": [{"name": "q", "rules": [
        {"record": f"q:{i}", "expr": e.replace("$namespace", "ns").replace("$job", "j")} for i, e in enumerate(exprs)]}]}
    f = tmp_path / "q.yaml"
    f.write_text(yaml.safe_dump(rules))
    done = subprocess.run([promtool, "check", "rules", str(f)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def re_search(pattern: str, text: str) -> bool:
    import re

    return re.search(pattern, text) is not None


def test_the_install_writes_the_kueue_configuration_it_needs(tmp_path: Path) -> None:
    """Issue 24 item 5: the fragment preflight checks the live Configuration against, beside the components."""
    from fabricguard.placement.kueue import configuration, configuration_problems

    for path in PROFILES:
        out = tmp_path / path.stem
        render(path, out)
        text = (out / "kueue-configuration.yaml").read_text()
        cfg = yaml.safe_load(text)
        profile = load_profile(path)
        assert cfg == configuration(profile) and configuration_problems(profile, cfg, "fabricguard-system") == []
        assert "kueue-configuration.yaml" in (out / "README.md").read_text()


@needs_kubectl
def test_knobs_for_fabricguards_own_pods_build_and_validate(tmp_path: Path) -> None:
    """A real install behind a private registry, on tainted system nodes, with the NVIDIA runtime not the default:
    pull secrets on every pod and ServiceAccount of ours (the canaries' default one too), placement for the
    controller, the webhook and the sweep (never the agents: they follow their pools), the agents' RuntimeClass,
    resources per component, and every NodeReadinessRule dryRun. The tree still builds and validates strictly."""
    profile = ROOT / "examples" / "profiles" / "gke-a3-ultra.yaml"
    render(profile, tmp_path / "o", "--mode", "enforce", "--runtime-class", "nvidia", "--dry-run-rules",
           "--image-pull-secret", "registry-credentials", "--node-selector", "cloud.google.com/gke-nodepool=system",
           "--toleration", "components.gke.io/gke-managed-components=true:NoSchedule", "--toleration",
           "dedicated:NoExecute", "--resources", "controller:limits.memory=4Gi", "--resources",
           "webhook:requests.cpu=250m")
    built = build(tmp_path / "o")
    pods = {(o["kind"], o["metadata"]["name"]): install._pod_spec(o) for o in built
            if o["kind"] in install.POD_KINDS}
    assert pods and all(p is not None and p["imagePullSecrets"] == [{"name": "registry-credentials"}]
                        for p in pods.values()), pods.keys()
    sas = [o for o in built if o["kind"] == "ServiceAccount"]
    assert {"default", "fabricguard-controller"} <= {o["metadata"]["name"] for o in sas}
    assert all(o["imagePullSecrets"] == [{"name": "registry-credentials"}] for o in sas)
    for (kind, name), pod in pods.items():
        assert pod is not None
        agent = kind == "DaemonSet"
        assert (pod.get("nodeSelector", {}).get("cloud.google.com/gke-nodepool") == "system") is not agent, name
        assert ({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"} in pod.get("tolerations", [])) \
            is not agent, name
        assert (pod.get("runtimeClassName") == "nvidia") is agent, name
    ctrl = pods[("Deployment", "fabricguard-controller")]
    hook = pods[("Deployment", "fabricguard-admission")]
    assert ctrl is not None and hook is not None
    assert ctrl["containers"][0]["resources"]["limits"]["memory"] == "4Gi"
    assert hook["containers"][0]["resources"]["requests"]["cpu"] == "250m"
    assert all(o["spec"]["dryRun"] is True for o in built if o["kind"] == "NodeReadinessRule")
    for obj in built:
        if not has_schema(obj["apiVersion"], obj["kind"]) and obj["kind"] != "NodeReadinessRule":
            kubernetes_validate.validate(obj, K8S, strict=True)


@pytest.mark.parametrize(("option", "value", "says"), [
    ("--toleration", "dedicated:Sometimes", "EFFECT one of"),
    ("--node-selector", "no-equals-sign", "KEY=VALUE"),
    ("--resources", "scheduler:limits.memory=1Gi", "component 'scheduler'"),
    ("--resources", "controller:memory=1Gi", "requests.RESOURCE or limits.RESOURCE"),
    ("--resources", "controller:limits.memory=lots", "not a positive Kubernetes quantity"),
    ("--image-pull-secret", "Registry_Creds", "lowercase DNS subdomain"),
    ("--runtime-class", "NVIDIA", "lowercase DNS subdomain"),
])
def test_a_bad_knob_is_one_line_naming_the_option(tmp_path: Path, option: str, value: str, says: str) -> None:
    r = CliRunner().invoke(app, ["render", "install", "-p", str(PROFILES[0]), "--image", IMAGE, "--agent-image",
                                 AGENT_IMAGE, "--canary-image", CANARY_IMAGE, "-o", str(tmp_path / "o"),
                                 "--apiserver-cidr", "172.16.0.0/28", option, value])
    assert r.exit_code == 3 and option in r.output and says in r.output and "Traceback" not in r.output, r.output
    assert not (tmp_path / "o").exists()


def test_cluster_size_sizes_the_controllers_memory_and_resources_still_wins(tmp_path: Path) -> None:
    """`--cluster-size NODES:PODS:JOBS` renders the memory docs/install.md derives from the cluster's size (20,000
    nodes, 200,000 pods, 50,000 running jobs: about 5.7 GiB, past the 1Gi default that OOM-kills there); an
    explicit `--resources controller:...` is applied after it; a bad value is one line naming the option."""
    profile = ROOT / "examples" / "profiles" / "gke-a3-ultra.yaml"

    def controller_memory(out: Path) -> dict[str, str]:
        docs = [d for f in sorted(out.rglob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
        dep = next(d for d in docs if d.get("kind") == "Deployment" and d["metadata"]["name"] == "fabricguard-controller")
        res = dep["spec"]["template"]["spec"]["containers"][0]["resources"]
        return {part: res[part]["memory"] for part in ("requests", "limits")}

    # Cache 26 KiB a node + 17 KiB a pod, what incremental passes keep (1,200 B an object, a job's JobSet and
    # Workload included), followers 32 KiB a job: 4,451 MiB -> 4480Mi and 6,157 MiB -> 6208Mi.
    assert memory_for(20000, 200000, 50000) == {"requests": "4480Mi", "limits": "6208Mi"}
    assert memory_for(100, 1000, 50) == {"requests": "320Mi", "limits": "1024Mi"}  # never below the default
    # One render: the request comes from the size, the limit from the explicit --resources that wins over it.
    render(profile, tmp_path / "both", "--cluster-size", "20000:200000:50000", "--resources",
           "controller:limits.memory=8Gi")
    assert controller_memory(tmp_path / "both") == {"requests": "4480Mi", "limits": "8Gi"}
    r = CliRunner().invoke(app, ["render", "install", "-p", str(profile), "--image", IMAGE, "--agent-image",
                                 AGENT_IMAGE, "--canary-image", CANARY_IMAGE, "-o", str(tmp_path / "bad"),
                                 "--apiserver-cidr", "172.16.0.0/28", "--cluster-size", "20k"])
    assert r.exit_code == 3 and "--cluster-size" in r.output and "NODES:PODS:JOBS" in r.output, r.output
    assert "Traceback" not in r.output and not (tmp_path / "bad").exists()


@needs_kubectl
def test_every_object_names_its_component_and_each_component_prunes_its_own_kinds(rendered) -> None:
    """Upgrade with prune: each object carries fabricguard.io/install-component (its directory; a team overlay its
    own value, so pruning the base never deletes the teams' claims), and the README's prune command for a component
    selects exactly that label with an allowlist of every kind the component renders."""
    import re as _re

    _profile, out, comps, built = rendered
    by_dir = {c.name: c for c in comps}
    for obj in built:
        value = obj["metadata"]["labels"][names.LABEL_INSTALL_COMPONENT]
        base, _, overlay = value.partition(".")
        assert base in by_dir and (not overlay or overlay in by_dir[base].overlays), value
        sel = ((obj.get("spec") or {}).get("selector") or {})
        assert names.LABEL_INSTALL_COMPONENT not in (sel.get("matchLabels") or sel), obj["metadata"]["name"]
    text = (out / "README.md").read_text()
    for c in comps:
        cmd = install.prune_command(c)
        assert cmd in text
        assert f"-l {names.LABEL_INSTALL_COMPONENT}={c.name} " in cmd
        allowed = set(_re.findall(r"--prune-allowlist=(\S+)", cmd))
        kinds = {f"{o['apiVersion'].rpartition('/')[0] or 'core'}/{o['apiVersion'].rpartition('/')[2]}/{o['kind']}"
                 for o in c.objects}
        assert allowed == kinds, (c.name, allowed ^ kinds)


def test_a_profile_whose_pools_all_use_the_startup_taint_renders_no_readiness_component(tmp_path: Path) -> None:
    text = (ROOT / "examples" / "profiles" / "gke-a3-ultra.yaml").read_text().replace(
        "    nodeSelector: {cloud.google.com/gke-nodepool: a3u-pool-1}",
        "    nodeSelector: {cloud.google.com/gke-nodepool: a3u-pool-1}\n"
        "    readinessTaintPrefix: startup-taint.cluster-autoscaler.kubernetes.io/")
    from fabricguard.profile import loads_profile

    comps = install.components(loads_profile(text), text, install.Options(
        image=IMAGE, agent_image=AGENT_IMAGE, canary_image=CANARY_IMAGE, apiserver_cidrs=("172.16.0.0/28",)))
    assert install.READINESS not in [c.name for c in comps]
    agent = next(c for c in comps if c.name == install.AGENT)
    assert agent.remove == [install.Step("delete", install.AGENT)]
    ds = next(o for o in agent.objects if o["kind"] == "DaemonSet")
    assert "--manage-taints" in ds["spec"]["template"]["spec"]["containers"][0]["args"]


def test_the_kubectl_plugins_viewer_role_comes_from_its_permission_table(rendered) -> None:
    """50-controller carries ClusterRole and Role fabricguard-viewer: the plugin's table (PLUGIN_GRANTS) and nothing
    more, read verbs only, not aggregated to view, labelled for prune with its component; the README binds it."""
    from fabricguard.controller.viewer import PLUGIN_GRANTS, VIEWER, bind_commands
    from fabricguard.rbac import rbac_rules

    _profile, out, _comps, built = rendered
    objs = [d for d in yaml.safe_load_all((out / install.CONTROLLER / "manifests.yaml").read_text()) if d]
    mine = {(d["kind"], d["metadata"].get("namespace")): d for d in objs if d["metadata"]["name"] == VIEWER}
    assert set(mine) == {("ClusterRole", None), ("Role", "fabricguard-system")}
    assert mine["ClusterRole", None]["rules"] == rbac_rules(PLUGIN_GRANTS, "cluster")
    assert mine["Role", "fabricguard-system"]["rules"] == rbac_rules(PLUGIN_GRANTS, "namespace") == [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]
    for role in mine.values():
        assert {v for r in role["rules"] for v in r["verbs"]} <= {"get", "list"}
        assert not any("*" in r["apiGroups"] + r["resources"] + r["verbs"] for r in role["rules"])
        labels = role["metadata"]["labels"]
        assert labels[names.LABEL_INSTALL_COMPONENT] == install.CONTROLLER
        assert not any(k.startswith("rbac.authorization.k8s.io/aggregate-to") for k in labels)
    assert not [d for d in objs if d["kind"] in ("ClusterRoleBinding", "RoleBinding")
                and d["roleRef"]["name"] == VIEWER]  # who may read is the cluster's decision
    text = (out / "README.md").read_text()
    assert all(cmd in text for cmd in bind_commands("fabricguard-system"))
    if built:
        assert sum(1 for d in built if d["metadata"]["name"] == VIEWER) == 2
