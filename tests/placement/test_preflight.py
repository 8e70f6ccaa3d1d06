"""``fabricguard preflight`` against kmock's Kubernetes emulator (real HTTP): a cluster installed from
``render install`` passes; each way a real cluster holds all training is one failed row, and exit 2."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from kmock import KubernetesEmulator, Server
from kmock._internal import parsing
from typer.testing import CliRunner

from fabricguard.admission.decide import Admission
from fabricguard.cli import app
from fabricguard.placement import install
from fabricguard.placement.kueue import configuration as kueue_configuration
from fabricguard.profile import load_profile
from kube_support import ROOT, kubeconfig

GKE = ROOT / "examples" / "profiles" / "gke-a3-ultra.yaml"
DIGEST = "@sha256:" + "ab" * 32
OPTS = install.Options(image=f"r.example.com/fg:0.1.0{DIGEST}", agent_image=f"r.example.com/fga:0.1.0{DIGEST}",
                       canary_image=f"r.example.com/fgc:0.1.0{DIGEST}")
RESOURCE = {
    "ResourceQuota": "v1/resourcequotas", "PersistentVolume": "v1/persistentvolumes",
    "PersistentVolumeClaim": "v1/persistentvolumeclaims", "LocalQueue": "kueue.x-k8s.io/v1beta2/localqueues",
    "DaemonSet": "apps/v1/daemonsets", "ConfigMap": "v1/configmaps",
    "DeviceClass": "resource.k8s.io/v1/deviceclasses", "Node": "v1/nodes",
    "Workload": "kueue.x-k8s.io/v1beta2/workloads",
}
SERVED = ["kueue.x-k8s.io/v1beta2/clusterqueues", "jobset.x-k8s.io/v1alpha2/jobsets",
          "trainer.kubeflow.org/v1alpha1/trainjobs", "cert-manager.io/v1/certificates",
          "readiness.node.x-k8s.io/v1alpha1/nodereadinessrules", "monitoring.googleapis.com/v1/podmonitorings",
          "v1/namespaces", *RESOURCE.values()]


@pytest.fixture(autouse=True)
def namespaces_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """kmock reads ``/api/v1/namespaces[/<name>]`` as a namespace prefix without a resource (and fails on the
    bare list); the API server serves Namespaces there. Teach the emulator that one path."""
    original = parsing.parse_path

    def parse_path(path: str) -> parsing.ParsedPath:
        parts = path.strip("/").split("/")
        if parts[:3] == ["api", "v1", "namespaces"] and len(parts) <= 4:
            return parsing.ParsedPath("", "v1", "namespaces", None, parts[3] if len(parts) == 4 else None, None)
        return original(path)

    monkeypatch.setattr(parsing, "parse_path", parse_path)


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {
        "kubernetes.io/metadata.name": name, **labels}}}


def device_plugin(namespace_: str, name: str) -> dict[str, Any]:
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": namespace_},
          "spec": {"selector": {"matchLabels": {"app": name}}, "template": {
              "metadata": {"labels": {"app": name}},
              "spec": {"tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
                       "containers": [{"name": "c", "image": "registry.example.com/x:1"}]}}}}
    return ds


def kueue_configmap(cfg: dict[str, Any]) -> dict[str, Any]:
    """Kueue's manager ConfigMap as its Helm chart and manifests ship it (key controller_manager_config.yaml)."""
    import yaml

    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
            "data": {"controller_manager_config.yaml": yaml.safe_dump(cfg, sort_keys=False)}}


NODE = ROOT / "tests" / "agent" / "fixtures" / "healthy-a3-ultra" / "node.json"


def gke_nodes(count: int = 4) -> list[dict[str, Any]]:
    """The pool's nodes: the recorded A3 Ultra Node (its allocatable as GKE stores it), ``count`` times."""
    out = []
    for i in range(count):
        node = json.loads(NODE.read_text())
        node["metadata"]["name"] = f"gke-a3u-pool-1-7f3c9a2e-{i:04d}"
        node["metadata"]["labels"]["kubernetes.io/hostname"] = node["metadata"]["name"]
        out.append({"apiVersion": "v1", "kind": "Node", **node})
    return out


def installed() -> list[dict[str, Any]]:
    """What ``render install`` of the GKE profile puts in a cluster, plus the teams' namespaces and claims."""
    profile = load_profile(GKE)
    comps = install.components(profile, GKE.read_text(), OPTS)
    objs = [x for c in comps for x in c.objects]
    objs += [x for c in comps for sub in c.overlay_objects.values() for x in sub]  # the teams' claims
    for x in objs:
        if x["kind"] == "PersistentVolumeClaim":
            x["status"] = {"phase": "Bound"}
    objs.append(kueue_configmap(kueue_configuration(profile)))
    privileged = {"pod-security.kubernetes.io/enforce": "privileged", "fabricguard.io/enabled": "true"}
    objs += [namespace("ml-search", **privileged), namespace("ml-ranking", **privileged)]
    objs += gke_nodes()
    # The fabric DaemonSets, as their charts ship them, created after the webhook: it added the tolerations.
    admission = Admission(profile)
    for d in profile.fabric_daemonsets():
        raw = device_plugin(d.namespace, d.name)
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u", "kind": {"group": "apps", "version": "v1", "kind": "DaemonSet"},
            "resource": {"group": "apps", "version": "v1", "resource": "daemonsets"}, "namespace": d.namespace,
            "operation": "CREATE", "object": raw}})
        import jsonpatch

        from fabricguard.admission import review as rv

        patch = rv.decode_patch(admission.handle("mutate", body).body)
        objs.append(jsonpatch.apply_patch(raw, patch))
    return objs


def seed(k8s: KubernetesEmulator, objs: list[dict[str, Any]]) -> None:
    for resource in SERVED:
        k8s.resources[resource] = {}
    for x in objs:
        meta = x["metadata"]
        if x["kind"] == "Namespace":
            k8s.objects["v1/namespaces", None, meta["name"]] = x
        elif x["kind"] in RESOURCE:
            k8s.objects[RESOURCE[x["kind"]], meta.get("namespace"), meta["name"]] = x


PREFLIGHT_SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "schemas" /
                               "PreflightReport.schema.json").read_text())


async def preflight(k8s: KubernetesEmulator, url: str, tmp_path: Path) -> tuple[int, dict[str, Any]]:
    cfg = kubeconfig(tmp_path, url)
    r = await asyncio.to_thread(CliRunner().invoke, app, ["preflight", "-p", str(GKE), "--kubeconfig", cfg,
                                                          "--format", "json"])
    if not r.stdout.startswith("{"):
        return r.exit_code, {"output": r.output}
    doc = json.loads(r.stdout)
    # Every preflight JSON against its published schema (docs/json.md).
    errors = list(jsonschema.Draft202012Validator(PREFLIGHT_SCHEMA).iter_errors(doc))
    assert not errors, [f"{list(e.path)}: {e.message[:200]}" for e in errors[:5]]
    return r.exit_code, doc


def failed(report: dict[str, Any]) -> dict[str, str]:
    return {f"{c['area']} {c['target']}": c["detail"] for c in report["checks"] if c["status"] == "fail"}


@pytest.fixture()
async def cluster():
    async with KubernetesEmulator() as k8s, Server(k8s) as server:
        k8s["get /version/"] << {"major": "1", "minor": "33", "gitVersion": "v1.33.5-gke.1"}
        yield k8s, str(server.url).rstrip("/")


async def test_an_installed_cluster_passes(cluster, tmp_path: Path) -> None:
    k8s, url = cluster
    seed(k8s, installed())
    code, report = await preflight(k8s, url, tmp_path)
    assert failed(report) == {} and code == 0, report
    areas = {c["area"] for c in report["checks"]}
    assert areas == {"Kubernetes", "API", "DaemonSet", "Lustre", "Pod Security", "LocalQueue", "GKE",
                     "Kueue config", "Allocatable", "Observe"}
    assert {c["target"] for c in report["checks"] if c["area"] == "LocalQueue"} == {"ml-search/h200",
                                                                                  "ml-ranking/h200"}
    r = await asyncio.to_thread(CliRunner().invoke, app, ["preflight", "-p", str(GKE), "--kubeconfig",
                                                          kubeconfig(tmp_path, url, name="kc2")])
    assert r.exit_code == 0 and "preflight: profile prod-gcp" in r.stdout
    assert f"{len(report['checks'])} checks: 0 failed, 0 warnings" in r.stdout


async def test_each_way_to_hold_all_training_is_a_failed_row(cluster, tmp_path: Path) -> None:
    k8s, url = cluster
    objs = installed()
    broken = []
    for x in objs:
        kind, name = x["kind"], x["metadata"]["name"]
        if kind == "ResourceQuota":
            continue  # GKE: no quota for the critical classes
        if kind == "LocalQueue" and x["metadata"]["namespace"] == "ml-ranking":
            continue  # an opted-in namespace without its LocalQueue
        if kind == "DaemonSet" and name == "lustre-csi-node":
            x = device_plugin("kube-system", name)  # created before the webhook: no readiness tolerations
        if kind == "Namespace" and name == "ml-search":
            x["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = "baseline"
        if kind == "Namespace" and name == "ml-ranking":
            broken.append(namespace("ml-adhoc", **{"fabricguard.io/enabled": "true",
                                                    "pod-security.kubernetes.io/enforce": "restricted"}))
        if kind == "PersistentVolumeClaim" and x["metadata"]["namespace"] == "ml-ranking":
            x = {**x, "spec": {**x["spec"], "storageClassName": "standard-rwx", "volumeName": None},
                 "status": {"phase": "Pending"}}
        broken.append(x)
    seed(k8s, broken)
    code, report = await preflight(k8s, url, tmp_path)
    assert code == 2
    assert set(failed(report)) == {
        "GKE fabricguard-system critical-priority quota", "LocalQueue ml-ranking/h200",
        "DaemonSet kube-system/lustre-csi-node (csi-node)", "Pod Security ml-search",
        "Lustre ml-ranking/training-lustre", "Pod Security ml-adhoc", "LocalQueue ml-adhoc/h200"}, report
    assert "IPC_LOCK" in failed(report)["Pod Security ml-search"]


async def test_preflight_needs_only_its_rendered_role(tmp_path: Path) -> None:
    """A person bound only to the ClusterRole fabricguard-preflight (rendered from PREFLIGHT_GRANTS) runs
    preflight to a pass: the emulator refuses, with a 403, every call the role leaves out."""
    from fabricguard.placement.preflight import preflight_role
    from kube_support import Emulator, Rbac

    role = preflight_role()
    async with Emulator(rbac=Rbac().bind("alice", [role])) as k8s, Server(k8s) as server:
        k8s.tokens = {"t": {"username": "alice"}}
        k8s["get /version/"] << {"major": "1", "minor": "33", "gitVersion": "v1.33.5-gke.1"}
        seed(k8s, installed())
        code, report = await preflight(k8s, str(server.url).rstrip("/"), tmp_path)
        assert k8s.denied == [] and failed(report) == {} and code == 0, (k8s.denied, report)
        # Without one of its rules, preflight does not pass: the role is enforced.
        k8s.rbac = Rbac().bind("alice", [{**role, "rules": [r for r in role["rules"]
                                                              if "localqueues" not in r["resources"]]}])
        code, _report = await preflight(k8s, str(server.url).rstrip("/"), tmp_path)
        assert code != 0 and any("localqueues" in d for d in k8s.denied)


async def test_a_call_outside_the_preflight_table_is_refused_before_it_is_sent() -> None:
    from fabricguard.kube import Kube, Undeclared
    from fabricguard.placement.preflight import preflight_permissions

    kube = Kube(None, permissions=preflight_permissions("fabricguard-system"))
    with pytest.raises(Undeclared, match="preflight's permission table"):
        await kube.list("v1", "secrets")
    with pytest.raises(Undeclared):
        await kube.get("v1", "nodes", "n1")


def test_install_docs_list_every_read_preflight_makes() -> None:
    from fabricguard.placement.preflight import PREFLIGHT_GRANTS

    text = (ROOT / "docs" / "install.md").read_text()
    section = text[text.index("### Who may run preflight"):]
    for g in PREFLIGHT_GRANTS:
        assert f"`{g.rbac_resource}`" in section, g


async def test_missing_apis_and_an_old_control_plane_fail(tmp_path: Path) -> None:
    async with KubernetesEmulator() as k8s, Server(k8s) as server:
        k8s["get /version/"] << {"major": "1", "minor": "29", "gitVersion": "v1.29.9"}
        seed(k8s, [])
        for resource in ("kueue.x-k8s.io/v1beta2/clusterqueues", "cert-manager.io/v1/certificates"):
            del k8s.resources[resource]
        code, report = await preflight(k8s, str(server.url).rstrip("/"), tmp_path)
    assert code == 2
    names = set(failed(report))
    assert {"Kubernetes version", "API Kueue kueue.x-k8s.io/v1beta2", "API cert-manager cert-manager.io/v1"} <= names


def test_an_unreadable_kubeconfig_is_input_unusable(tmp_path: Path) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("not: [valid")
    r = CliRunner().invoke(app, ["preflight", "-p", str(GKE), "--kubeconfig", str(bad)])
    assert r.exit_code == 3 and "kubeconfig" in r.output and "Traceback" not in r.output


def test_an_unreachable_api_server_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = kubeconfig(tmp_path, f"http://127.0.0.1:{port}")
    r = CliRunner().invoke(app, ["preflight", "-p", str(GKE), "--kubeconfig", cfg, "--timeout", "20"])
    assert r.exit_code == 3 and "cannot reach the cluster" in r.output and "Traceback" not in r.output


async def test_a_kueue_configuration_that_refuses_canaries_fails_naming_the_field(cluster, tmp_path: Path) -> None:
    """manageJobsWithoutQueueName: true with no namespace selector: Kueue suspends every canary (no queue label)."""
    k8s, url = cluster
    objs = [x for x in installed() if x["metadata"]["name"] != "kueue-manager-config"]
    profile = load_profile(GKE)
    cfg = {**kueue_configuration(profile), "manageJobsWithoutQueueName": True}
    seed(k8s, [*objs, kueue_configmap(cfg)])
    code, report = await preflight(k8s, url, tmp_path)
    assert code == 2
    bad = failed(report)
    assert list(bad) == ["Kueue config kueue-system/kueue-manager-config manageJobsWithoutQueueName"], bad
    cfg["managedJobsNamespaceSelector"] = {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "fabricguard-system"]}]}
    seed(k8s, [*objs, kueue_configmap(cfg)])
    code, report = await preflight(k8s, url, tmp_path)
    assert failed(report) == {} and code == 0, report


def test_each_kueue_field_that_makes_workloads_inadmissible_is_named() -> None:
    from fabricguard.placement.kueue import configuration_problems

    efa = load_profile(ROOT / "examples" / "profiles" / "aws-p5-efa.yaml")  # fabricResources: exclude
    good = kueue_configuration(efa)
    assert configuration_problems(efa, good, "fabricguard-system") == []
    assert [f for f, _ in configuration_problems(efa, {}, "fabricguard-system")] == [
        "resources.excludeResourcePrefixes"]
    dra = load_profile(ROOT / "examples" / "profiles" / "gke-a4-dranet.yaml")  # a DRA claim pool
    assert configuration_problems(dra, kueue_configuration(dra), "fabricguard-system") == []
    assert "resources.deviceClassMappings" in [f for f, _ in configuration_problems(dra, {}, "fabricguard-system")]


async def test_dra_prerequisites_and_a_never_ready_plugin_fail(tmp_path: Path) -> None:
    from fabricguard.placement.preflight import check

    dra = load_profile(ROOT / "examples" / "profiles" / "gke-a4-dranet.yaml")
    (pool,) = [p for p in dra.spec.pools if p.fabric.dra is not None][:1]
    assert pool.fabric.dra is not None
    for minor, served, classes in (("33", True, True), ("34", False, False), ("34", True, False),
                                   ("34", True, True)):
        async with KubernetesEmulator() as k8s, Server(k8s) as server:
            k8s["get /version/"] << {"major": "1", "minor": minor, "gitVersion": f"v1.{minor}.1"}
            seed(k8s, [])
            if not served:
                del k8s.resources["resource.k8s.io/v1/deviceclasses"]
            elif classes:
                k8s.objects["resource.k8s.io/v1/deviceclasses", None, pool.fabric.dra.deviceClassName] = {
                    "metadata": {"name": pool.fabric.dra.deviceClassName}, "spec": {}}
            from fabricguard.kube import Kube

            kube = await Kube.connect(kubeconfig(tmp_path, str(server.url).rstrip("/"), name=f"k{minor}{served}"))
            try:
                rows = [r for r in await check(kube, dra) if r.area == "DRA"]
            finally:
                await kube.close()
        bad = {r.target: r.detail for r in rows if r.status == "fail"}
        if minor == "33":
            assert "Kubernetes version" in bad
        elif not served:
            assert list(bad) == ["resource.k8s.io/v1"]
        elif not classes:
            assert list(bad) == [f"DeviceClass {pool.fabric.dra.deviceClassName}"]
            assert "fabric.dra.deviceClassName" in next(iter(bad.values()))
        else:
            assert bad == {}


async def test_a_device_plugin_that_never_had_a_ready_pod_fails(cluster, tmp_path: Path) -> None:
    k8s, url = cluster
    objs = installed()
    plugin = load_profile(GKE).fabric_daemonsets()[0]
    for x in objs:
        if x["kind"] == "DaemonSet" and x["metadata"]["name"] == plugin.name:
            x["status"] = {"desiredNumberScheduled": 4, "currentNumberScheduled": 4, "numberReady": 0}
    seed(k8s, objs)
    code, report = await preflight(k8s, url, tmp_path)
    assert code == 2 and any("no pod ready of 4" in d for d in failed(report).values()), report


async def test_a_mistyped_resource_name_fails_naming_the_field_before_any_node_is_tainted(
        cluster, tmp_path: Path) -> None:
    """``rdma7`` for ``rdma-7``: every node's agent would fail at once. Preflight names the field and the name the
    nodes do offer; a few nodes lacking a name is a warning within the blast radius, a failure beyond it."""
    from fabricguard.placement.preflight import allocatable_rows

    k8s, url = cluster
    text = GKE.read_text().replace("networking.gke.io.networks/rdma-7:", "networking.gke.io.networks/rdma7:")
    assert text != GKE.read_text()
    (tmp_path / "typo.yaml").write_text(text)
    seed(k8s, installed())
    r = await asyncio.to_thread(CliRunner().invoke, app, ["preflight", "-p", str(tmp_path / "typo.yaml"),
                                                          "--kubeconfig", kubeconfig(tmp_path, url), "--format",
                                                          "json"])
    assert r.exit_code == 2, r.output
    bad = failed(json.loads(r.stdout))
    assert list(bad) == ["Allocatable pool h200-rdma networking.gke.io.networks/rdma7"], bad
    detail = bad["Allocatable pool h200-rdma networking.gke.io.networks/rdma7"]
    assert "spec.pools[0].fabric.resources['networking.gke.io.networks/rdma7']" in detail
    assert "the nodes offer networking.gke.io.networks/rdma-7" in detail

    profile = load_profile(GKE)
    nodes = gke_nodes(20)
    for n in nodes[:2]:  # within max(1, 10%) of 20
        del n["status"]["allocatable"]["networking.gke.io.networks/rdma-3"]
    rows = {r.target: r for r in allocatable_rows(profile, nodes)}
    row = rows["pool h200-rdma networking.gke.io.networks/rdma-3"]
    assert row.status == "warn" and "2 of 20" in row.detail, row
    del nodes[2]["status"]["allocatable"]["networking.gke.io.networks/rdma-3"]  # 3 > 2: past the budget
    row = {r.target: r for r in allocatable_rows(profile, nodes)}["pool h200-rdma networking.gke.io.networks/rdma-3"]
    assert row.status == "fail" and "blast radius" in row.detail, row
    assert rows["pool h200-rdma nvidia.com/gpu"].status == "pass"
    # No node yet (a pool at zero): cannot be checked, said so, not passed.
    (empty,) = [r for r in allocatable_rows(profile, []) if r.target == "pool h200-rdma"]
    assert empty.status == "warn" and "zero nodes" in empty.detail


def test_gpus_behind_a_device_class_extended_resource_name_pass_without_allocatable() -> None:
    """GPU Operator's DRA mode with KEP-5004: nvidia.com/gpu is never in allocatable; a DeviceClass backs it."""
    from fabricguard.placement.preflight import allocatable_rows

    profile = load_profile(GKE)
    nodes = gke_nodes(2)
    for n in nodes:
        del n["status"]["allocatable"]["nvidia.com/gpu"]
    rows = {r.target: r for r in allocatable_rows(profile, nodes)}
    assert rows["pool h200-rdma nvidia.com/gpu"].status == "fail"
    rows = {r.target: r for r in allocatable_rows(profile, nodes, {"nvidia.com/gpu": "gpu.nvidia.com"})}
    assert rows["pool h200-rdma nvidia.com/gpu"].status == "pass"
    assert "DeviceClass gpu.nvidia.com" in rows["pool h200-rdma nvidia.com/gpu"].detail


async def test_before_the_install_what_it_creates_is_said_so_not_failed(cluster, tmp_path: Path) -> None:
    """The person runs preflight before `render install` is applied: the Lustre claims and the LocalQueues the
    install creates are rows that say so (warn, naming the component); once installed, their absence fails."""
    k8s, url = cluster
    own = {"fabricguard-system"}
    pre = [x for x in installed() if x["kind"] not in ("PersistentVolumeClaim", "PersistentVolume", "LocalQueue")
           and not (x["kind"] == "Namespace" and x["metadata"]["name"] in own)]
    seed(k8s, pre)
    code, report = await preflight(k8s, url, tmp_path)
    rows = {f"{c['area']} {c['target']}": c for c in report["checks"]}
    assert failed(report) == {}, failed(report)
    assert code == 1
    for target in ("Lustre fabricguard-system/training-lustre", "Lustre ml-search/training-lustre",
                   "LocalQueue ml-search/h200", "LocalQueue ml-ranking/h200"):
        assert rows[target]["status"] == "warn" and "created by the install" in rows[target]["detail"], rows[target]
    # Installed (its namespace exists), the same absences fail.
    seed(k8s, [*pre, namespace("fabricguard-system")])
    code, report = await preflight(k8s, url, tmp_path)
    assert code == 2 and {"Lustre fabricguard-system/training-lustre", "LocalQueue ml-search/h200"} <= set(
        failed(report))


async def test_what_enforce_would_have_held_and_tainted_in_the_last_day(cluster, tmp_path: Path) -> None:
    """An install in observe mode for a day: preflight reads the Workloads' check entries and the nodes' FabricReady
    (not the one-hour Events) and says, per observing pool, what enforce would have held and tainted."""
    from datetime import UTC, datetime, timedelta

    from fabricguard import times

    k8s, url = cluster
    now = datetime.now(UTC)
    objs = installed()
    nodes = [x for x in objs if x["kind"] == "Node"]
    ago = lambda h: times.format_time(now - timedelta(hours=h))  # noqa: E731
    nodes[0]["status"]["conditions"].append({"type": "FabricReady", "status": "False", "reason": "ChecksFailed",
                                             "message": "1 check(s) failed: rdma.ports", "lastTransitionTime": ago(3),
                                             "lastHeartbeatTime": ago(0)})
    nodes[1]["status"]["conditions"].append({"type": "FabricReady", "status": "True", "reason": "AllChecksPassed",
                                             "message": "", "lastTransitionTime": ago(30), "lastHeartbeatTime": ago(0)})
    wl = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
          "metadata": {"name": "jobset-llama-8a1f2", "namespace": "ml-search"},
          "spec": {"queueName": "h200"},
          "status": {"admission": {"clusterQueue": "h200", "podSetAssignments": [
              {"name": "workers", "flavors": {"nvidia.com/gpu": "h200-rdma"}}]},
              "admissionChecks": [{"name": "fabric-validated", "state": "Ready", "lastTransitionTime": ago(5),
                                   "message": "fabricguard observe mode: enforce would hold: held: pool h200-rdma "
                                              "canary failed"}]}}
    old = {**wl, "metadata": {"name": "jobset-old-1", "namespace": "ml-search"},
           "status": {**wl["status"], "admissionChecks": [{**wl["status"]["admissionChecks"][0],
                                                           "lastTransitionTime": ago(49)}]}}
    seed(k8s, [*objs, wl, old])
    code, report = await preflight(k8s, url, tmp_path)
    row = next(c for c in report["checks"] if c["area"] == "Observe")
    assert code == 1 and row["status"] == "warn", report
    assert row["detail"].startswith("enforce would have held 1 workload(s) and tainted 1 node(s) of pool h200-rdma "
                                    "in the last 24 h"), row
    assert "ml-search/jobset-llama-8a1f2" in row["detail"] and nodes[0]["metadata"]["name"] in row["detail"]
    assert "jobset-old-1" not in row["detail"]


async def test_a_training_claim_still_at_the_file_system_root_says_how_to_upgrade(cluster, tmp_path: Path) -> None:
    """FSx roots each training namespace's volume at its directory (tenant isolation); a claim an older install
    made at the file system's root fails, naming the two commands that re-create it (the data stays)."""
    from fabricguard.kube import Kube
    from fabricguard.placement import preflight as pf

    k8s, url = cluster
    fsx = load_profile(ROOT / "examples" / "profiles" / "aws-p5-efa.yaml")
    current = [*install.lustre_claim(fsx, "fabricguard-system", root=True), *install.lustre_claim(fsx, "ml-training")]
    before = install.lustre_claim(fsx, "ml-training", root=True)  # what an install before 0.2.0 made
    for x in [*current, *before]:
        if x["kind"] == "PersistentVolumeClaim":
            x["status"] = {"phase": "Bound"}
    seed(k8s, [namespace("fabricguard-system"), namespace("ml-training"), *current])
    kube = await Kube.connect(kubeconfig(tmp_path, url), None,
                              permissions=pf.preflight_permissions("fabricguard-system"))
    try:
        rows = await pf._storage(kube, fsx, "fabricguard-system")
        assert [(r.target, r.status) for r in rows] == [("fabricguard-system/fsx-lustre", "pass"),
                                                        ("ml-training/fsx-lustre", "pass")], rows
        seed(k8s, before)
        rows = await pf._storage(kube, fsx, "fabricguard-system")
    finally:
        await kube.close()
    [bad] = [r for r in rows if r.status == "fail"]
    assert bad.target == "ml-training/fsx-lustre" and "the file system's root" in bad.detail
    assert "mountname=abcdef01/ml-training" in bad.detail
    assert "kubectl -n ml-training delete pvc fsx-lustre && kubectl delete pv fabricguard-fsx-lustre-ml-training" in \
        bad.fix
