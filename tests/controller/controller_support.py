"""Helpers for the controller tests: the incident cluster in kmock's emulator, and the cluster's other actors.

kmock emulates the API server only: no scheduler, no Job or JobSet controller, no Kueue. What those would do
is written here as small, named steps (``schedule_fails``, ``pods_run``, ``jobset_finishes``, ``ranks_wrote``),
so each test says which part of the world moved between two controller passes. The controller itself runs
unmodified through the CLI (``fabricguard controller --once --now``) over real HTTP.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import hashlib
import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from json_schema_check import assert_matches
from kube_support import RESOURCE, gen
from kube_support import kubeconfig as shared_kubeconfig

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "nccl"
NS = "fabricguard-system"
CANARY_IMAGE = "ghcr.io/acme/fabricguard-probe@sha256:" + "cd" * 32
CANARY_LABEL = "fabricguard.io/canary-pool"
ROCE_LOGS = sorted((FIXTURES / "synthetic" / "roce-2x2-kubectl").iterdir())
SOCKET_LOGS = sorted((FIXTURES / "synthetic" / "socket-fallback-2x4").iterdir())


NOW: datetime = gen.NOW
POOL = "gh200-roce"

# The incident's profile with the Lustre claim the canary needs and an explicit canary block.
PROFILE = gen.INCIDENT_PROFILE.format(name="gh200-prod", env="production").replace(
    "spec:\n", "spec:\n  storage:\n    lustre: {claimName: training-lustre, mountPath: /mnt/lustre}\n", 1
) + "    canary: {interval: 10m, pendingTimeout: 3m, runTimeout: 15m}\n"

JOBSETS = "jobset.x-k8s.io/v1alpha2/jobsets"
FVS = "fabricguard.io/v1alpha1/fabricvalidations"
WORKLOADS = "kueue.x-k8s.io/v1beta2/workloads"
CHECKS = "kueue.x-k8s.io/v1beta2/admissionchecks"
LEASES = "coordination.k8s.io/v1/leases"


def ts(t: datetime) -> str:
    return gen.ts(t)


def kueue_validate(obj: dict[str, Any], name: str) -> None:
    """Validate against Kueue v0.19.2's v1beta2 CRD schemas (tests/data/schemas/kueue-v0.19.2, one copy for every
    test). ``workload-admissionchecks``: only ``status.admissionChecks``, all that the controller's apply sends."""
    from crd_schema import crd_errors, crd_subschema_errors

    if name == "workload-admissionchecks":
        errors = crd_subschema_errors("kueue.x-k8s.io/v1beta2", "Workload", ("status", "admissionChecks"),
                                      obj["status"]["admissionChecks"])
    else:
        errors = crd_errors(obj)
    assert errors == [], errors


def kubeconfig(tmp_path: Path, url: str) -> str:
    return shared_kubeconfig(tmp_path, url, "controller")


def admission_check() -> dict[str, Any]:
    return {
        "metadata": {"name": "fabric-validated", "uid": "ac-1", "generation": 1,
                     "creationTimestamp": ts(NOW - timedelta(days=3))},
        "spec": {"controllerName": "fabricguard.io/fabric-validated"},
    }


def workload(name: str, flavor: str = POOL, *, other_check: bool = True) -> dict[str, Any]:
    """A training Workload as Kueue stores it once quota is reserved on ``flavor``: our check is Pending."""
    checks = [{"name": "fabric-validated", "state": "Pending", "lastTransitionTime": ts(NOW - timedelta(minutes=5)),
               "message": ""}]
    if other_check:
        checks.append({"name": "capacity-provisioning", "state": "Ready",
                       "lastTransitionTime": ts(NOW - timedelta(minutes=4)), "message": "ProvisioningRequest ready"})
    return {
        "metadata": {"name": name, "namespace": "ml-training", "uid": f"wl-{name}",
                     "creationTimestamp": ts(NOW - timedelta(minutes=6)),
                     "labels": {"kueue.x-k8s.io/job-uid": "js-uid"}},
        "spec": {"queueName": "gh200", "podSets": [{"name": "workers", "count": 2}]},
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                 "message": "Quota reserved in ClusterQueue gh200", "lastTransitionTime": ts(NOW - timedelta(minutes=5))},
                {"type": "Admitted", "status": "False", "reason": "NoChecks",
                 "message": "The workload has not all checks ready", "lastTransitionTime": ts(NOW - timedelta(minutes=5))},
            ],
            "admission": {"clusterQueue": "gh200", "podSetAssignments": [
                {"name": "workers", "count": 2, "flavors": {"nvidia.com/gpu": flavor}}]},
            "admissionChecks": checks,
        },
    }


# List-map fields (``x-kubernetes-list-type: map``) the controller applies, with their keys.
LIST_MAP_KEYS = {"admissionChecks": "name", "conditions": "type"}


def merge_apply(current: Any, patch: Any) -> Any:
    """What the API server does with a server-side apply patch of list-map fields: merge entries by key."""
    if isinstance(current, dict) and isinstance(patch, dict):
        out = dict(patch)
        for k, v in patch.items():
            key = LIST_MAP_KEYS.get(k)
            if key and isinstance(v, list) and isinstance(current.get(k), list):
                mine = {e.get(key) for e in v if isinstance(e, dict)}
                out[k] = [e for e in current[k] if not (isinstance(e, dict) and e.get(key) in mine)] + v
            elif k in current:
                out[k] = merge_apply(current[k], v)
        return out
    return patch


CONTROLLER_USER = "system:serviceaccount:fabricguard-system:fabricguard-controller"


def controller_rbac(profile_text: str = PROFILE, namespace: str = NS) -> Any:
    """What the rendered controller manifests (``render controller``) let its ServiceAccount do (a new Rbac each
    time, from manifests rendered once per profile and namespace)."""
    from kube_support import Rbac

    return Rbac.from_manifests(copy.deepcopy(_controller_manifests(profile_text, namespace)))


@functools.cache
def _controller_manifests(profile_text: str, namespace: str) -> list[dict[str, Any]]:
    # Rendering them builds the CRDs' JSON schemas from the models: a few percent of every emulated pass test.
    from fabricguard.controller.manifests import manifests
    from fabricguard.profile import loads_profile

    rbac_kinds = ("ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding")
    return [o for o in manifests(loads_profile(profile_text), profile_text, CANARY_IMAGE, namespace)
            if o.get("kind") in rbac_kinds]


def apply_aware_emulator(fault: Any = None, *, rbac: bool = True) -> Any:
    """The shared test API server (``kube_support.Emulator``: the rendered controller RBAC enforced on every
    request of the token ``controller``, selectors, resourceVersions), plus the API server's merge of server-side
    apply patches on list-map fields.

    kmock merges dicts and replaces lists (its docs say to subclass for special fields). Without this, a test
    could not tell a controller that writes only its own ``admissionChecks`` entry from one that clobbers
    the others'; the requests themselves are asserted separately.

    ``fault(request)``, when given, is asked first about every request: None serves it; an int answers that HTTP
    status with a Status body and changes nothing (kmock itself would apply a write whatever a reaction answers);
    an awaitable is awaited instead of serving it (the test kills the client meanwhile: the write never lands);
    ``("after", awaitable)`` serves the write and then awaits, so the write lands and its answer never arrives.
    """
    import aiohttp.web
    from kmock import action

    from kube_support import Emulator

    class ApplyAwareEmulator(Emulator):
        async def _serve_k8s(self, request: Any) -> Any:
            # After RBAC (a real server authorizes first), before the object changes: a faulty server or proxy.
            verdict = fault(request) if fault is not None else None
            if isinstance(verdict, int):
                return aiohttp.web.json_response({"apiVersion": "v1", "kind": "Status", "metadata": {}, "code": verdict,
                                                  "status": "Failure", "reason": "InternalError",
                                                  "message": "injected fault"}, status=verdict)
            if verdict is not None and not isinstance(verdict, tuple):
                await verdict
                return aiohttp.web.json_response({}, status=503)
            response = await self._handle_apply_aware(request)
            if isinstance(verdict, tuple):
                await verdict[1]
            return response

        async def _handle_apply_aware(self, request: Any) -> Any:
            ctype = request.headers.get("Content-Type", "")
            key = (request.resource, request.namespace, request.name)
            before = None
            if (request.resource is not None and request.action == action.UPDATE and "apply-patch" in ctype
                    and key in self.objects and not self.objects[key].deleted):
                before = json.loads(json.dumps(self.objects[key].raw))
            response = await super()._serve_k8s(request)
            if before is not None and isinstance(request.data, dict):
                # kmock stored a naive merge (lists replaced); store the API server's merge instead.
                self.objects[key].patch(merge_apply(before, request.data))
            return response

    return ApplyAwareEmulator(rbac=controller_rbac() if rbac else None, versions=True,
                              tokens={"controller": {"username": CONTROLLER_USER},
                                      "admin": {"username": "kubernetes-admin", "groups": ["system:masters"]}})


def admin_kubeconfig(kubeconfig_path: str) -> str:
    """The same cluster as the operator sees it (system:masters), beside ``kubeconfig_path``."""
    p = Path(kubeconfig_path)
    out = p.with_name(p.name + "-admin")
    out.write_text(p.read_text().replace('"token": "controller"', '"token": "admin"'))
    return str(out)


def load_incident(k8s: Any, only: tuple[str, ...] | None = None) -> None:
    """The incident's objects (``only``: just those lists, e.g. ``("nodes",)``), our AdmissionCheck and a Workload."""
    for key, lst in gen.incident("production").items():
        if only is not None and key not in only:
            continue
        for obj in lst["items"]:
            m = obj["metadata"]
            stored = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
            k8s.objects[RESOURCE[obj["kind"]], m.get("namespace"), m["name"]] = stored
    for res in (JOBSETS, FVS, WORKLOADS, CHECKS, LEASES, "batch/v1/jobs"):
        k8s.resources[res].verbs = {"list", "watch", "get", "create", "patch", "delete"}
    k8s.objects[CHECKS, None, "fabric-validated"] = admission_check()
    k8s.objects[WORKLOADS, "ml-training", "jobset-llama-ft-3b1c2"] = workload("jobset-llama-ft-3b1c2")


def plugin_fixed(k8s: Any) -> None:
    """The incident's fix, as the cluster stores it: the plugin's arm64 image deployed, its pods running, the
    nodes advertising the RDMA resource, the training job requesting it, the crash events aged out."""
    for key in [k for k in k8s.objects if k[0] == "v1/events"]:
        del k8s.objects[key]
    for key, lst in gen.incident("production", fixed=True).items():
        if key in ("nodes", "pods", "daemonsets"):
            for obj in lst["items"]:
                m = obj["metadata"]
                k8s.objects[RESOURCE[obj["kind"]], m.get("namespace"), m["name"]] = {
                    k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}


def _matches(res: Any, resource: str) -> bool:
    parts = resource.split("/")
    group = "" if len(parts) == 2 else parts[0]
    return getattr(res, "plural", None) == parts[-1] and (getattr(res, "group", "") or "") == group


def live(k8s: Any, resource: str) -> list[dict[str, Any]]:
    out = []
    for key in list(k8s.objects):
        res, _ns, _name = key
        if _matches(res, resource):
            obj = k8s.objects[key]
            if not obj.deleted:
                out.append(json.loads(json.dumps(obj.raw)))
    return out


def canaries(k8s: Any) -> list[dict[str, Any]]:
    return [js for js in live(k8s, JOBSETS) if CANARY_LABEL in (js["metadata"].get("labels") or {})]


def gate_check(k8s: Any, name: str | None = None) -> dict[str, Any]:
    """The fabric-validated admission check on a Workload as stored: the only Workload's, or the named one's."""
    (wl,) = [w for w in live(k8s, WORKLOADS) if name is None or w["metadata"]["name"] == name]
    return next(c for c in wl["status"]["admissionChecks"] if c["name"] == "fabric-validated")


async def run_once(kubeconfig_path: str, profile_path: Path, now: datetime, lustre: Path,
                   *extra: str) -> tuple[int, dict[str, Any]]:
    """``fabricguard controller --once --now`` in a thread (it runs its own event loop)."""
    from typer.testing import CliRunner

    from fabricguard.cli import app

    args = ["controller", "--profile", str(profile_path), "--once", "--now", ts(now), "--kubeconfig", kubeconfig_path,
            "--lustre-root", str(lustre), "--canary-image", CANARY_IMAGE, "--format", "json", *extra]
    r = await asyncio.to_thread(CliRunner().invoke, app, args)
    try:
        doc = json.loads(r.stdout)
    except ValueError as e:
        raise AssertionError(f"exit {r.exit_code}: {r.output}") from e
    assert_matches("ControllerPass", doc, r.exit_code)  # every pass a test runs, against the published schema
    return r.exit_code, doc


# --------------------------------------------------------------------------------- the other actors


def pods_of(js: dict[str, Any], nodes: int = 2) -> list[dict[str, Any]]:
    name = js["metadata"]["name"]
    tpl = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    out = []
    for i in range(nodes):
        pod_name = f"{name}-workers-0-{i}-{hashlib.sha1(f'{name}{i}'.encode()).hexdigest()[:5]}"
        out.append({
            "metadata": {"name": pod_name, "namespace": NS, "uid": f"uid-{pod_name}",
                         "creationTimestamp": js["metadata"]["creationTimestamp"],
                         "labels": {**tpl["metadata"].get("labels", {}), "jobset.sigs.k8s.io/jobset-name": name,
                                    "batch.kubernetes.io/job-completion-index": str(i)}},
            "spec": json.loads(json.dumps(tpl["spec"])),
            "status": {"phase": "Pending"},
        })
    return out


def jobset_created(k8s: Any, js: dict[str, Any], at: datetime) -> dict[str, Any]:
    """What the API server adds on create: a creation time and a uid. Returns the stored JobSet."""
    name = js["metadata"]["name"]
    k8s.objects[JOBSETS, NS, name].patch({"metadata": {"creationTimestamp": ts(at), "uid": f"uid-{name}"}})
    return json.loads(json.dumps(k8s.objects[JOBSETS, NS, name].raw))


def schedule_fails(k8s: Any, js: dict[str, Any], message: str, at: datetime) -> None:
    """The Job controller made the pods; the scheduler cannot place them and says why (FailedScheduling)."""
    for p in pods_of(js):
        p["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                      "message": message, "lastTransitionTime": ts(at)}]
        k8s.objects["v1/pods", NS, p["metadata"]["name"]] = p
        ev_name = f"{p['metadata']['name']}.{hashlib.sha1(message.encode()).hexdigest()[:10]}"
        k8s.objects["v1/events", NS, ev_name] = {
            "metadata": {"name": ev_name, "namespace": NS, "creationTimestamp": ts(at)},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": p["metadata"]["name"], "namespace": NS,
                               "uid": p["metadata"]["uid"]},
            "reason": "FailedScheduling", "message": message, "type": "Warning",
            "source": {"component": "default-scheduler"}, "reportingComponent": "default-scheduler",
            "firstTimestamp": ts(at), "lastTimestamp": ts(at), "count": 1,
        }


def fabric_ready(node: dict[str, Any], status: str, reason: str, message: str, at: datetime = NOW) -> dict[str, Any]:
    """A copy of ``node`` with the FabricReady condition its agent writes (as the agent's status patch stores it)."""
    node = json.loads(json.dumps(node))
    conds = [c for c in node.setdefault("status", {}).get("conditions", []) if c.get("type") != "FabricReady"]
    conds.append({"type": "FabricReady", "status": status, "reason": reason, "message": message,
                  "lastHeartbeatTime": ts(at), "lastTransitionTime": ts(at)})
    node["status"]["conditions"] = conds
    return node


def agents_report(k8s: Any, status: str, reason: str, message: str | None = None, at: datetime = NOW) -> None:
    """Every GPU node's agent writes its FabricReady condition (``message``: the reason when not given)."""
    for key, stored in list(k8s.objects.items()):
        if key[0] == "v1/nodes" and key[2].startswith("prd-gh200-"):
            k8s.objects[key] = fabric_ready(getattr(stored, "raw", stored), status, reason,
                                            reason if message is None else message, at)


CANARY_NODES = ["prd-gh200-02", "prd-gh200-03"]  # where the incident's canary pods run


async def canary_started(k8s: Any, kc: str, profile_path: Path, lustre: Path, at: datetime = NOW,
                         nodes: list[str] = CANARY_NODES) -> dict[str, Any]:
    """A pass at ``at`` creates the pool's canary; the JobSet controller makes it and its pods run on ``nodes``.
    Returns the stored JobSet."""
    await run_once(kc, profile_path, at, lustre)
    (js,) = canaries(k8s)
    js = jobset_created(k8s, js, at)
    pods_run(k8s, js, nodes)
    return js


async def canary_passed(k8s: Any, kc: str, profile_path: Path, lustre: Path, at: datetime = NOW,
                        busbw: float = 40.0) -> datetime:
    """A canary started at ``at`` runs on RoCE at ``busbw`` and finishes two minutes later; returns the time of
    the pass that judges it (three minutes after ``at``)."""
    js = await canary_started(k8s, kc, profile_path, lustre, at)
    ranks_wrote(lustre, js, ROCE_LOGS, busbw=busbw)
    jobset_finishes(k8s, js, at + timedelta(minutes=2))
    return at + timedelta(minutes=3)


def pods_run(k8s: Any, js: dict[str, Any], nodes: list[str], phase: str = "Running") -> None:
    for p, node in zip(pods_of(js), nodes, strict=True):
        p["spec"]["nodeName"] = node
        p["status"] = {"phase": phase}
        k8s.objects["v1/pods", NS, p["metadata"]["name"]] = p


def jobset_finishes(k8s: Any, js: dict[str, Any], at: datetime, *, failed: bool = False) -> None:
    ctype = "Failed" if failed else "Completed"
    k8s.objects[JOBSETS, NS, js["metadata"]["name"]].patch({"status": {"conditions": [
        {"type": ctype, "status": "True", "reason": "AllJobsCompleted" if not failed else "FailedJobs",
         "message": "jobset completed successfully" if not failed else "jobset failed", "lastTransitionTime": ts(at)}]}})


def ranks_wrote(lustre: Path, js: dict[str, Any], nccl_logs: list[Path], *, busbw: float, backend: str = "nccl",
                transport: str = "roce", failed: bool = False, error: str | None = None,
                mount_fstype: str = "lustre", rails: list[dict[str, Any]] | None = None) -> Path:
    """What the canary's pods leave in their job directory on Lustre: per-rank NCCL logs and probe JSON
    (``rails``: a pair test's ``probe collective --rails`` figures)."""
    name = js["metadata"]["name"]
    job = lustre / NS / name
    logs = job / ".fabricguard" / "nccl"
    out = job / ".fabricguard" / "canary"
    logs.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    for i, f in enumerate(nccl_logs):
        shutil.copy(f, logs / f"nccl.rank{i}.gpu-node-00{i}.{4000 + i}.log")
    source = "10.0.0.5@o2ib:/lustrefs" if mount_fstype == "lustre" else "overlay"
    for i in range(2):
        (logs / f"mountinfo-node{i}").write_text(
            f"3021 2890 0:412 /{NS}/{name} /mnt/lustre rw,relatime shared:1201 - {mount_fstype} {source} rw\n")
    rows = [] if failed else [
        {"collective": "all_reduce", "size": s, "count": s // 4, "type": "float", "redop": "sum",
         "time_us": s / (busbw * 1e3), "algbw_gbps": busbw / 2 * (s / (1 << 28)) ** 0.1,
         "busbw_gbps": busbw * (s / (1 << 28)) ** 0.1, "wrong": 0}
        for s in (1 << 20, 1 << 24, 1 << 28)]
    for r in range(2):
        (out / f"collective.rank{r}.json").write_text(json.dumps({
            "backend": backend, "world_size": 2, "rows": rows, "failed": failed, "error": error,
            "log_dir": "/mnt/lustre/.fabricguard/nccl", "env": {}, "transport": transport, "transport_why": "",
            "nccl": None, "hosts": ["gpu-node-000", "gpu-node-001"], "seconds": 12.0, "judgement": None,
            "rails": rails or []}))
        (out / f"storage.node{r}.json").write_text(json.dumps({
            "path": "/mnt/lustre/.fabricguard/canary-storage", "engine": "fio", "status": "pass",
            "checks": [{"name": "storage.fstype", "status": "pass", "detail": "on lustre", "data": {}}],
            "metrics": {}, "workdir": "", "left_behind": []}))
    return job


def rail_figures(nodes: list[str], busbw: float, slow: dict[str, int] | None = None, rails: int = 4,
                 slow_bw: float = 11.0) -> list[dict[str, Any]]:
    """``probe collective --rails`` as a pair's rank 0 writes it: each rail alone, its NIC named per node;
    ``slow``: node -> the rail that is slow on it (a port trained down, a rail down routed through a neighbour)."""
    slow = slow or {}
    return [{"rail": k, "bytes": 1 << 28, "time_us": 1.0,
             "busbw_gbps": slow_bw if any(r == k for r in slow.values()) else busbw,
             "members": [{"rank": i * rails + k, "node": n, "gpu_pci": f"0000:{0x18 + k:02x}:00.0",
                          "nic": f"mlx5_{k}"} for i, n in enumerate(nodes)]}
            for k in range(rails)]


async def until(cond: Any, seconds: float = 20.0) -> None:
    """Wait for ``cond()`` (checked every 50 ms); fail the test after ``seconds`` (generous: CI machines are loaded)."""
    import asyncio

    for _ in range(int(seconds / 0.05)):
        if cond():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {seconds:g} s waiting")


class WriteRecorder:
    """Stands in for the API connection to watch the order and overlap of writes (the semantics of each write
    are tested against the emulator in the other controller tests); ``refuse`` names the objects whose write is
    answered 403."""

    def __init__(self, delay_s: float = 0.01, refuse: frozenset[str] = frozenset()) -> None:
        self.in_flight = self.most = 0
        self.order: list[str] = []
        self.delay_s = delay_s
        self.refuse = refuse

    async def _write(self, what: str, name: str) -> dict[str, Any]:
        from fabricguard.kube_errors import Forbidden

        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        await asyncio.sleep(self.delay_s)
        self.in_flight -= 1
        if name in self.refuse:
            raise Forbidden(403, f"{what} {name!r} is forbidden")
        self.order.append(f"{what} {name}")
        return {}

    async def apply(self, _v: str, _p: str, name: str, _body: Any, **_k: Any) -> dict[str, Any]:
        return await self._write("status", name)

    async def patch(self, _v: str, _p: str, name: str, _body: Any, **_k: Any) -> dict[str, Any]:
        return await self._write("annotate", name)

    async def create(self, _v: str, _p: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._write("event", body["involvedObject"]["name"])
