"""Test support for the node agent: the recorded H200 node as a tree, and an API server that behaves like
Kubernetes where the agent depends on it.

``ApiServer`` is kmock's Kubernetes emulator (real HTTP) taught four things the real API server does and the
emulator leaves to its users: strategic-merge patches (``status.conditions`` merge by ``type``), JSON
patches (RFC 6902, with ``test``), ``resourceVersion`` (bumped on every write, a precondition when a patch
carries it), the subresource rules of the Node strategies (``nodes/status`` keeps spec but stores metadata
changes, as the real one does), and ValidatingAdmissionPolicies evaluated with their own CEL (cel-python) against the caller's
user info, which a bearer token maps to (as a bound service-account token carries the node name).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import aiohttp.web
import attrs
import celpy
import jsonpatch
from kmock._internal.k8s import KubernetesError

from kube_support import Conflict, Emulator, Rbac, attributes
from kube_support import Forbidden as Denied
from kube_support import kubeconfig as shared_kubeconfig

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
HEALTHY = HERE / "fixtures" / "healthy-a3-ultra"
H200_RECORD = REPO / "tests" / "fixtures" / "h200-host"
# The same recording as the team keeps it outside the repository (checked too where it exists).
SHARED_H200_RECORD = Path("/work/shared/fixtures/h200-host")
PROFILES = REPO / "examples" / "profiles"
GKE = PROFILES / "gke-a3-ultra.yaml"
NODE_NAME = "gke-a3u-pool-1-7f3c9a2e-0001"
AGENT_USER = "system:serviceaccount:fabricguard-system:fabricguard-agent"
NODES = "v1/nodes"
IMAGE_REF = "ghcr.io/acme/fabricguard:0.1.0@sha256:" + "ab" * 32


def healthy_node() -> dict[str, Any]:
    return json.loads((HEALTHY / "node.json").read_text())


def h200_tree(dst: Path, record: Path = H200_RECORD) -> Path:
    """The recorded H200 VM (tests/fixtures/h200-host) as a root the agent reads.

    sysfs.txt is ``ls -l`` of /sys/class/infiniband and /sys/class/net followed by each netdev's operstate;
    proc-modules.txt is its /proc/modules. Its mount table was not recorded: the agent pod there has no
    Lustre volume, so its own mount table holds the container's overlay root only.
    """
    sections: dict[str, list[str]] = {}
    states: list[str] = []
    current: str | None = None
    for line in (record / "sysfs.txt").read_text().splitlines():
        if line.startswith("/") and line.endswith(":"):
            current = line[:-1]
            sections[current] = []
            continue
        parts = line.split()
        if current and len(parts) >= 9 and line[0] in "dlc-":
            if parts[8] not in (".", ".."):
                sections[current].append(parts[8])
            continue
        if current == "/sys/class/net" and line.strip() in ("up", "down", "unknown", "dormant", "lowerlayerdown"):
            states.append(line.strip())
        else:
            current = None if line.startswith("/") else current
    root = dst / "h200"
    (root / "sys/class/infiniband").mkdir(parents=True)
    for dev in sections.get("/sys/class/infiniband", []):
        (root / "sys/class/infiniband" / dev).mkdir()
    for nd, st in zip(sections.get("/sys/class/net", []), states, strict=False):
        (root / "sys/class/net" / nd).mkdir(parents=True)
        (root / "sys/class/net" / nd / "operstate").write_text(st + "\n")
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/modules").write_text((record / "proc-modules.txt").read_text())
    (root / "proc/self/mountinfo").write_text(
        "2210 2101 0:512 / / rw,relatime - overlay overlay rw,lowerdir=/var/lib/containerd/l1,upperdir=/u,workdir=/w\n"
    )
    return root


# ---------------------------------------------------------------------------------------------- policies


_ENV = celpy.Environment()


def _split(s: Any, sep: Any) -> Any:
    return celpy.celtypes.ListType([celpy.celtypes.StringType(x) for x in str(s).split(str(sep))])


# Kubernetes compiles CEL with the cel-go strings extension; cel-python has the standard library only, so the
# one extension function these rules use (``split``) is supplied here with the extension's meaning.
K8S_FUNCTIONS = {"split": _split}


def cel(expr: str, activation: dict[str, Any]) -> Any:
    return _ENV.program(_ENV.compile(expr), functions=K8S_FUNCTIONS).evaluate(activation)


def evaluate_policy(policy: dict[str, Any], user: dict[str, Any], subresource: str,
                    old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """None when ``policy`` admits the update, else the denial message (as the API server would say it)."""
    spec = policy["spec"]
    resource = "nodes" + (f"/{subresource}" if subresource else "")
    if not any(resource in r["resources"] and "UPDATE" in r["operations"]
               for r in spec["matchConstraints"]["resourceRules"]):
        return None
    request = {"userInfo": user, "subResource": subresource, "operation": "UPDATE", "name": new["metadata"]["name"],
               "resource": {"group": "", "version": "v1", "resource": "nodes"}}
    act: dict[str, Any] = {"request": celpy.json_to_cel(request), "object": celpy.json_to_cel(new),
                           "oldObject": celpy.json_to_cel(old)}
    for mc in spec.get("matchConditions", []):
        if not cel(mc["expression"], act):
            return None
    variables: dict[Any, Any] = {}
    for v in spec.get("variables", []):
        act["variables"] = celpy.celtypes.MapType(variables)
        variables[celpy.celtypes.StringType(v["name"])] = cel(v["expression"], act)
    act["variables"] = celpy.celtypes.MapType(variables)
    for val in spec["validations"]:
        result = cel(val["expression"], act)
        if result is not True and not (isinstance(result, celpy.celtypes.BoolType) and bool(result)):
            if "messageExpression" in val:
                return str(cel(val["messageExpression"], act))
            return str(val.get("message", "denied"))
    return None


# ------------------------------------------------------------------------------------------- API server

# Metadata the API server owns: a patch cannot change it (resourceVersion is bumped after admission).
SERVER_META = ("name", "uid", "creationTimestamp", "resourceVersion", "generation")
MERGE_KEYS = {("status", "conditions"): "type", ("status", "addresses"): "type"}


def strategic_merge(old: dict[str, Any], patch: dict[str, Any], path: tuple[str, ...] = ()) -> dict[str, Any]:
    """Strategic merge for the fields the agent writes: maps merge, lists with a merge key merge by it,
    other lists are replaced, ``null`` deletes."""
    out = copy.deepcopy(old)
    for k, v in patch.items():
        p = (*path, k)
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = strategic_merge(out[k], v, p)
        elif isinstance(v, list) and p in MERGE_KEYS and isinstance(out.get(k), list):
            key = MERGE_KEYS[p]
            merged = out[k]
            for item in v:
                i = next((j for j, x in enumerate(merged) if x.get(key) == item.get(key)), None)
                if i is None:
                    merged.append(copy.deepcopy(item))
                else:
                    merged[i] = strategic_merge(merged[i], item, (*p, "*"))
        else:
            out[k] = copy.deepcopy(v)
    return out


@attrs.frozen
class Invalid(KubernetesError):
    status: int = 422
    reason: str = "Invalid"


def agent_rbac(*, manage_taints: bool = False, profile: Path = GKE) -> Rbac:
    """What the rendered agent manifests (``render agent``: the agent's and the sweep's ClusterRoles) grant."""
    from fabricguard.agent.render import agent_manifests
    from fabricguard.profile import load_profile

    return Rbac.from_manifests(agent_manifests(load_profile(profile), profile.read_text(), IMAGE_REF,
                                               manage_taints=manage_taints))


@attrs.define(kw_only=True)
class ApiServer(Emulator):
    """The shared test API server (rendered RBAC enforced, see ``kube_support.Emulator``) with the Node patch
    semantics, resourceVersions and admission policies."""

    policies: list[dict[str, Any]] = attrs.field(factory=list)
    patches: list[tuple[str, str, Any]] = attrs.field(factory=list)
    requests_seen: list[Any] = attrs.field(factory=list)
    # Node name -> the error every write to it answers (a fault proxy: 404 for a node deleted after the list,
    # 403 for one another policy guards, 500 for an API server in trouble).
    faults: dict[str, KubernetesError] = attrs.field(factory=dict)

    def put_node(self, node: dict[str, Any]) -> None:
        stored = {k: v for k, v in copy.deepcopy(node).items() if k not in ("kind", "apiVersion")}
        self.rv += 1
        stored["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[NODES, None, node["metadata"]["name"]] = stored

    def node(self, name: str) -> dict[str, Any]:
        return copy.deepcopy(self.objects[NODES, None, name].raw)

    async def _serve_k8s(self, request: Any) -> Any:
        a = attributes(str(request.method.value), request.url.path, dict(request.params))
        if request.resource is not None and a is not None and a.resource == "nodes" and a.verb == "patch":
            self.requests_seen.append(request)
            new = self._patch(request)
            self.objects[NODES, None, request.name] = new
            return aiohttp.web.json_response({"apiVersion": "v1", "kind": "Node", **new})
        if (not self.versions and a is not None and a.verb in ("create", "patch", "update")
                and isinstance(request.data, dict)):
            # Other kinds (the agents' taint-slot Leases) as the API server keeps them: a write moves the
            # resourceVersion, and a merge patch that carries a stale one is a 409 (kube_support.Emulator).
            if a.verb != "create":
                self._precondition(request)
            self.rv += 1
            request.data.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        return await super()._serve_k8s(request)

    def _patch(self, request: Any) -> dict[str, Any]:
        name, sub = request.name, request.subresource or ""
        if name in self.faults:
            raise self.faults[name]
        old = self.node(name)
        ctype = (request.headers.get("Content-Type") or "").split(";")[0]
        self.patches.append((sub, ctype, request.data))
        if ctype == "application/strategic-merge-patch+json":
            body = copy.deepcopy(request.data)
            want_rv = (body.get("metadata") or {}).pop("resourceVersion", None)
            if want_rv is not None and want_rv != old["metadata"]["resourceVersion"]:
                raise Conflict(message=f"Operation cannot be fulfilled on nodes \"{name}\": the object has been "
                                       "modified; please apply your changes to the latest version and try again")
            new = strategic_merge(old, body)
        elif ctype == "application/json-patch+json":
            try:
                new = jsonpatch.apply_patch(old, request.data)
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as e:
                raise Invalid(message=f"the server rejected our request due to an error in our request: {e}") from e
        else:
            raise Invalid(message=f"unsupported patch type {ctype!r} in this test server")
        # As the API server's Node strategies do: a write to nodes/status resets spec to the stored one but keeps
        # what it changed in metadata (labels, annotations, ...); a write to the Node never changes status.
        # Identity and server-set metadata stay the server's either way.
        new = {**new, "spec": old.get("spec", {})} if sub == "status" else {**new, "status": old["status"]}
        new["metadata"] = {**new.get("metadata", {}),
                           **{k: v for k, v in old["metadata"].items() if k in SERVER_META}}
        user = self.user_of(request)
        # A policy denies only through a binding whose validationActions include Deny.
        bound = {o["spec"]["policyName"] for o in self.policies
                 if o["kind"] == "ValidatingAdmissionPolicyBinding" and "Deny" in o["spec"]["validationActions"]}
        for policy in self.policies:
            if policy["kind"] != "ValidatingAdmissionPolicy" or policy["metadata"]["name"] not in bound:
                continue
            msg = evaluate_policy(policy, user, sub, old, new)
            if msg is not None:
                raise Denied(message=f"nodes \"{name}\" is forbidden: ValidatingAdmissionPolicy "
                                     f"'{policy['metadata']['name']}' denied request: {msg}")
        self.rv += 1
        new["metadata"]["resourceVersion"] = str(self.rv)
        return new


def kubeconfig(tmp_path: Path, url: str, token: str) -> str:
    return shared_kubeconfig(tmp_path, url, token, name=f"kubeconfig-{token}")
