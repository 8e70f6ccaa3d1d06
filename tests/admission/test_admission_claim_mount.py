"""Tenant isolation on the shared Lustre claim (review of session 25): a pod mounts the claim only at its job's
directory.

- What the webhook injects (every kind, stored by the API server, reinvoked) passes the ValidatingAdmissionPolicy
  (CEL evaluated with cel-python on the stored Pod, with ``request.namespace``) and the webhook's own validation,
  in a namespace whose claim is the file system's root (GKE: ``$(FG_NAMESPACE)/$(FG_JOB)``) and in one rooted at
  its own directory (FSx: ``$(FG_JOB)``).
- Each way out of the job's directory is refused by both, with a message that says what to change: the claim's
  root, a ``subPath`` into another namespace, a ``subPathExpr`` of one's own, ``FG_NAMESPACE`` written or read
  from a ConfigMap, the claim under another volume name, an init container that mounts the root, and an ephemeral
  container (``kubectl debug``, the ``ephemeralcontainers`` subresource).
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import celpy
import jsonpatch
import pytest
from admission_support import KINDS, load_review, pod_specs, with_object
from apiserver_defaults import stored_form

from fabricguard.admission import claimmount, mutate
from fabricguard.admission import review as rv
from fabricguard.admission.decide import Admission
from fabricguard.admission.mutate import LUSTRE_VOLUME
from fabricguard.profile import PlatformProfile, load_profile
from fabricguard.storage import jobdir, layout

ROOT = Path(__file__).parents[2]
GKE = ROOT / "examples/profiles/gke-a3-ultra.yaml"  # the claim is the root: admission alone keeps tenants apart
FSX = ROOT / "examples/profiles/aws-p5-efa.yaml"  # ml-training's claim is rooted at ml-training/
IMAGE = "ghcr.io/acme/fabricguard-agent:0.2.0@sha256:" + "a" * 64
ENV = celpy.Environment()


def _index_of(items: Any, item: Any) -> Any:
    return celpy.celtypes.IntType(list(items).index(item) if item in items else -1)


# The API server compiles CEL with Kubernetes' lists library; cel-python has the standard library only, so the one
# function of it the policy uses (``indexOf``: the first position of an item, -1 when absent) is supplied here.
K8S_FUNCTIONS = {"indexOf": _index_of}


@functools.cache
def program(expr: str) -> Any:
    """A compiled CEL program, once per expression (compiling is most of an evaluation's cost)."""
    return ENV.program(ENV.compile(expr), functions=K8S_FUNCTIONS)

CASES = [(GKE, "ml-search", "$(FG_NAMESPACE)/$(FG_JOB)"), (FSX, "ml-training", "$(FG_JOB)"),
         (FSX, "ml-team", "$(FG_NAMESPACE)/$(FG_JOB)")]


def vap_refusals(pol: dict[str, Any], pod: dict[str, Any], namespace: str) -> list[str]:
    """The policy's failed validations for ``pod`` in ``namespace`` ([] when admitted or not matched)."""
    act: dict[str, Any] = {"object": celpy.json_to_cel(pod), "request": celpy.json_to_cel({"namespace": namespace})}
    for cond in pol["spec"]["matchConditions"]:
        if not bool(program(cond["expression"]).evaluate(act)):
            return []
    variables: dict[Any, Any] = {}
    for v in pol["spec"]["variables"]:
        act["variables"] = celpy.celtypes.MapType(variables)
        variables[celpy.celtypes.StringType(v["name"])] = program(v["expression"]).evaluate(act)
    act["variables"] = celpy.celtypes.MapType(variables)
    return [val["message"] for val in pol["spec"]["validations"]
            if not bool(program(val["expression"]).evaluate(act))]


def _policy(profile: PlatformProfile) -> dict[str, Any]:
    objs = claimmount.policy(profile, "fabricguard-system", job_dir_image=IMAGE)  # as render install does
    return next(o for o in objs if o["kind"] == "ValidatingAdmissionPolicy")


def _review(kind: str, namespace: str) -> dict[str, Any]:
    review = load_review(kind)
    review["request"]["namespace"] = namespace
    review["request"]["object"].setdefault("metadata", {})["namespace"] = namespace
    return review


def _mutated(adm: Admission, review: dict[str, Any]) -> dict[str, Any]:
    d = adm.handle("mutate", json.dumps(review))
    assert d.body["response"]["allowed"], d.body
    patch = rv.decode_patch(d.body)
    return jsonpatch.apply_patch(review["request"]["object"], patch) if patch else review["request"]["object"]


def _bare_pod(path: Path, namespace: str) -> tuple[PlatformProfile, Admission, dict[str, Any], dict[str, Any],
                                                  dict[str, Any]]:
    """(profile, webhook, policy, review, the webhook's bare group pod as stored) in ``namespace``."""
    profile = load_profile(path)
    adm = Admission(profile, job_dir_image=IMAGE)
    review = _review("pod-bare-group", namespace)
    return profile, adm, _policy(profile), review, stored_form(_mutated(adm, review))


def _denied(adm: Admission, review: dict[str, Any], obj: dict[str, Any]) -> str:
    d = adm.handle("review", json.dumps(with_object(review, obj)))
    assert d.body["response"]["allowed"] is False, "admitted"
    return str(d.body["response"]["status"]["message"])


@pytest.mark.parametrize(("path", "namespace", "expr"), CASES, ids=["gke-root", "fsx-rooted", "fsx-other-ns"])
@pytest.mark.parametrize("kind", [k for k in KINDS if k != "trainjob"])
def test_what_the_webhook_injects_passes_stored_and_reinvoked(path: Path, namespace: str, expr: str,
                                                              kind: str) -> None:
    profile = load_profile(path)
    assert layout.job_dir_expr(profile, namespace) == expr
    adm = Admission(profile, job_dir_image=IMAGE)
    pol = _policy(profile)
    review = _review(kind, namespace)
    obj = _mutated(adm, review)
    stored = stored_form(obj)
    again = _mutated(adm, with_object(review, stored))
    for form in (obj, stored, again):
        assert adm.handle("review", json.dumps(with_object(review, form))).body["response"]["allowed"]
        specs = [s for s in pod_specs(form) if LUSTRE_VOLUME in json.dumps(s)]
        assert specs, kind
        for spec in specs:
            mounts = [m for c in spec["containers"] for m in c.get("volumeMounts", []) if m["name"] == LUSTRE_VOLUME]
            assert mounts and {m["subPathExpr"] for m in mounts} == {expr}
            # The job-dir init container mounts the namespace's directory and walks $(FG_JOB) below it.
            [init] = [c for c in spec["initContainers"] if c["name"] == jobdir.INIT_CONTAINER]
            assert init["volumeMounts"][0].get("subPathExpr", "") == expr.removesuffix("$(FG_JOB)").rstrip("/")
            assert init["args"][init["args"].index("--path") + 1] == "$(FG_JOB)"
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": namespace},
                   "spec": spec}
            assert vap_refusals(pol, stored_form(pod), namespace) == []


def _attacks(claim: str, victim: str) -> dict[str, Any]:
    def extra(mount: dict[str, Any], env: list[dict[str, Any]] | None = None, init: bool = False,
              volume: str = LUSTRE_VOLUME) -> Any:
        def change(spec: dict[str, Any]) -> None:
            if volume != LUSTRE_VOLUME:
                spec["volumes"].append({"name": volume, "persistentVolumeClaim": {"claimName": claim}})
            c = {"name": "peek", "image": "busybox", "volumeMounts": [{"name": volume, "mountPath": "/x", **mount}]}
            if env is not None:
                c["env"] = env
            spec.setdefault("initContainers" if init else "containers", []).append(c)
        return change

    def in_gpu(change_env: Any) -> Any:
        def change(spec: dict[str, Any]) -> None:
            change_env(spec["containers"][0]["env"])
        return change

    def root_init(spec: dict[str, Any]) -> None:
        ours = next(c for c in spec["initContainers"] if c["name"] == jobdir.INIT_CONTAINER)
        ours["volumeMounts"][0]["subPathExpr"] = victim
        ours["args"] += ["--path", "stolen"]

    def namespace_dir_in_a_container(spec: dict[str, Any]) -> None:
        ours = next(c for c in spec["initContainers"] if c["name"] == jobdir.INIT_CONTAINER)
        spec["containers"][0]["volumeMounts"].append({**ours["volumeMounts"][0], "mountPath": "/all-jobs"})

    ns_env = [{"name": "FG_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}]
    return {
        "the claim's root": extra({}),
        "subPath into another namespace": extra({"subPath": f"{victim}/llm-7b"}),
        "a subPathExpr of its own": extra({"subPathExpr": f"{victim}/$(FG_JOB)"}, ns_env),
        "the root under another volume name": extra({}, volume="mine"),
        "the root in an init container": extra({}, init=True),
        "FG_NAMESPACE written": in_gpu(lambda env: env.append({"name": "FG_NAMESPACE", "value": victim})),
        "FG_NAMESPACE from a ConfigMap": in_gpu(lambda env: env.__setitem__(
            next(i for i, e in enumerate(env) if e["name"] == "FG_NAMESPACE"),
            {"name": "FG_NAMESPACE", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "ns"}}})),
        "the job-dir init container at another namespace": root_init,
        "the namespace's directory in a long-running container": namespace_dir_in_a_container,
    }


@pytest.mark.parametrize(("path", "namespace", "expr"), CASES[:2], ids=["gke-root", "fsx-rooted"])
def test_every_way_out_of_the_job_directory_is_refused_saying_what_to_change(path: Path, namespace: str,
                                                                              expr: str) -> None:
    profile, adm, pol, review, pod = _bare_pod(path, namespace)
    claim = profile.spec.storage.lustre.claimName
    for what, change in _attacks(claim, "ml-ranking").items():
        if what.startswith("FG_NAMESPACE") and "$(FG_NAMESPACE)" not in expr:
            continue  # below a namespace's own root the variable names nothing the pod could reach
        bad = copy.deepcopy(pod)
        change(bad["spec"])
        if what == "FG_NAMESPACE written":
            # Kept past the mutation's own conflict check on purpose: the validation must still refuse it.
            bad["metadata"].setdefault("annotations", {})["fabricguard.io/allow-override"] = "FG_NAMESPACE"
        assert vap_refusals(pol, bad, namespace), what
        if what == "the job-dir init container at another namespace":
            # The webhook does not refuse its own init container: it puts back the one the pod needs.
            fixed = _mutated(adm, with_object(review, bad))
            assert jobdir.INIT_CONTAINER in json.dumps(fixed) and vap_refusals(pol, fixed, namespace) == []
            continue
        message = _denied(adm, review, bad)
        # The webhook's claim check, or for a ConfigMap's FG_NAMESPACE its conflict with the injected one.
        assert f"Lustre claim {claim}" in message or (what.startswith("FG_NAMESPACE") and
                                                      "env FG_NAMESPACE" in message), (what, message)
        assert "remove" in message.lower(), (what, message)
    # kubectl debug: an ephemeral container cannot use subPathExpr, so it may not mount the claim at all.
    debug = copy.deepcopy(pod)
    debug["spec"]["ephemeralContainers"] = [{"name": "debugger", "image": "busybox", "volumeMounts": [
        {"name": LUSTRE_VOLUME, "mountPath": "/x"}]}]
    assert any("ephemeral" in m for m in vap_refusals(pol, debug, namespace))
    rules = [r["resources"] for r in pol["spec"]["matchConstraints"]["resourceRules"]]
    assert ["pods/ephemeralcontainers"] in rules


def test_a_pod_without_the_claim_is_not_matched_and_bindings_skip_the_install_namespace() -> None:
    profile = load_profile(GKE)
    objs = claimmount.policy(profile, "fabricguard-system")
    pol = objs[0]
    assert vap_refusals(pol, {"spec": {"containers": [{"name": "a", "image": "x"}]}}, "ml-search") == []
    selectors = [b["spec"]["matchResources"]["namespaceSelector"] for b in objs[1:]]
    assert all(b["spec"]["validationActions"] == ["Deny"] for b in objs[1:])  # observe does not relax it
    assert selectors == [
        {"matchLabels": {"fabricguard.io/enabled": "true"}, "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["fabricguard-system"]}]},
        {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                               "values": ["ml-search", "ml-ranking"]}]}]


def test_the_layout_splits_the_subpath_at_the_namespace() -> None:
    assert layout.split_subpath("{namespace}/{job}") == ("{namespace}", "{job}")
    assert layout.split_subpath("teams/{namespace}/runs/{job}") == ("teams/{namespace}", "runs/{job}")
    assert layout.split_subpath("{job}/{namespace}") is None
    assert layout.split_subpath("{namespace}") is None
    fsx = load_profile(FSX)
    assert layout.namespace_dir(fsx, "ml-training") == "ml-training"
    assert layout.namespace_dir(fsx, "elsewhere") is None  # not a Lustre pool's namespace: the root, admission
    assert layout.namespace_dir(load_profile(GKE), "ml-search") is None  # the driver mounts whole instances


def test_fg_job_comes_from_the_pods_labels_only() -> None:
    """The kubelet follows a link inside the volume when it mounts a subPath: an ``FG_JOB`` a tenant writes
    (``llm-7b/escape``, where ``escape`` is a link it left in its own job directory to ``../../ml-ranking``)
    would reach another namespace's directory on a root claim. A label's value has no ``/`` (and cannot be
    ``.``/``..``), so ``FG_JOB`` must be a label's (or a LeaderWorkerSet's two labels, defined before it). The
    root claim (GKE), where the link would lead out of the namespace; the rule is the same below a rooted one."""
    path, namespace, _expr = CASES[0]
    profile, adm, pol, review, pod = _bare_pod(path, namespace)
    claim = profile.spec.storage.lustre.claimName

    def fg_job(value: dict[str, Any]) -> Any:
        def change(env: list[dict[str, Any]]) -> None:
            env[next(i for i, e in enumerate(env) if e["name"] == "FG_JOB")] = {"name": "FG_JOB", **value}
        return change

    def only_env_from(env: list[dict[str, Any]]) -> None:
        env[:] = [e for e in env if e["name"] != "FG_JOB"]

    def lws_after(env: list[dict[str, Any]]) -> None:
        # FG_WORKLOAD defined after FG_JOB: the kubelet expands $(FG_WORKLOAD) with envFrom's value then.
        i = next(i for i, e in enumerate(env) if e["name"] == "FG_JOB")
        env[i] = {"name": "FG_JOB", "value": "$(FG_WORKLOAD)/$(FG_GROUP)"}
        env += [{"name": "FG_WORKLOAD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                {"name": "FG_GROUP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['g']"}}}]

    attacks = {
        "written": fg_job({"value": "llm-7b/escape"}),
        "from a ConfigMap": fg_job({"valueFrom": {"configMapKeyRef": {"name": "cm", "key": "job"}}}),
        "from an annotation": fg_job({"valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['j']"}}}),
        "only from envFrom": only_env_from,
        "a LeaderWorkerSet form of written parts": fg_job({"value": "$(FG_WORKLOAD)/$(FG_GROUP)"}),
        "a LeaderWorkerSet form before its parts": lws_after,
    }
    for what, change in attacks.items():
        bad = copy.deepcopy(pod)
        gpu = bad["spec"]["containers"][0]
        change(gpu["env"])
        gpu["envFrom"] = [{"configMapRef": {"name": "mine"}}]
        bad["metadata"].setdefault("annotations", {})["fabricguard.io/allow-override"] = "FG_JOB"
        assert any("FG_JOB" in m for m in vap_refusals(pol, bad, namespace)), what
        assert "FG_JOB" in _denied(adm, review, bad), what  # the webhook: this check, or FG_JOB unreadable
        [refused] = claimmount.problems(claimmount.rule_of(profile), bad["spec"], namespace, "the pod")
        assert f"Lustre claim {claim}" in str(refused) and "remove your FG_JOB" in str(refused), what
    # What a LeaderWorkerSet's pods get (its name and group index, labels both, before FG_JOB) passes.
    lws = copy.deepcopy(pod)
    env = lws["spec"]["containers"][0]["env"]
    at = next(i for i, e in enumerate(env) if e["name"] == "FG_JOB")
    env[at:at + 1] = mutate.job_env("leaderworkerset.sigs.k8s.io/name",
                                    "leaderworkerset.sigs.k8s.io/group-index")[1:]
    lws["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "mine"}}]
    assert vap_refusals(pol, lws, namespace) == []
    assert claimmount.problems(claimmount.rule_of(profile), lws["spec"], namespace, "the pod") == []


def test_observe_mode_relaxes_the_fabric_never_the_boundary_between_tenants() -> None:
    profile = load_profile(GKE)
    adm = Admission(profile, mode="observe", job_dir_image=IMAGE)
    review = _review("pod-bare-group", "ml-search")
    pod = stored_form(_mutated(adm, review))
    peek = copy.deepcopy(pod)
    _attacks(profile.spec.storage.lustre.claimName, "ml-ranking")["the claim's root"](peek["spec"])
    message = _denied(adm, review, peek)
    assert "Lustre claim training-lustre" in message and "observe" not in message
    # A fabric refusal in the same mode stays a warning.
    sockets = copy.deepcopy(pod)
    sockets["spec"]["containers"][0]["env"].append({"name": "NCCL_IB_DISABLE", "value": "1"})
    d = adm.handle("review", json.dumps(with_object(review, sockets)))
    assert d.body["response"]["allowed"] and "enforce would deny" in " ".join(d.body["response"]["warnings"])


def test_a_pod_of_a_workload_admitted_before_the_upgrade_is_refused_in_a_rooted_namespace() -> None:
    """Its template still mounts $(FG_NAMESPACE)/$(FG_JOB), which under a claim rooted at ml-training/ would be
    ml-training/ml-training/<job>: the pod is refused naming the mount it needs (resubmit the workload)."""
    profile = load_profile(FSX)
    before = _mutated(Admission(profile, job_dir_image=IMAGE), _review("pod-owned", "ml-team"))  # the root form
    review = _review("pod-owned", "ml-training")
    message = _denied(Admission(profile, job_dir_image=IMAGE), review, stored_form(before))
    assert "subPathExpr '$(FG_NAMESPACE)/$(FG_JOB)'" in message and "subPathExpr $(FG_JOB)" in message, message
    assert vap_refusals(_policy(profile), stored_form(before), "ml-training")


@pytest.mark.parametrize(("path", "namespace", "expr"), CASES[:2], ids=["gke-root", "fsx-rooted"])
def test_only_fabricguards_own_job_dir_init_container_mounts_the_namespaces_directory(path: Path, namespace: str,
                                                                                       expr: str) -> None:
    """The namespace's directory is open to an init container named ``fabricguard-job-dir``; a tenant's own of that
    name (its image, its command, as root) could leave a link there in place of another job's directory, which the
    kubelet follows on a root claim for a pod without fabricguard's init container. The policy holds that exception
    to the install's image running ``fabricguard storage job-dir``; the webhook puts its own back on a GPU pod."""
    profile, adm, pol, review, pod = _bare_pod(path, namespace)
    assert vap_refusals(pol, pod, namespace) == []
    for change in ({"image": "busybox"}, {"command": ["sh", "-c", "ln -s ../ml-ranking /fabricguard-namespace/j2"]},
                   {"args": ["sh"]}):
        bad = copy.deepcopy(pod)
        ours = next(c for c in bad["spec"]["initContainers"] if c["name"] == jobdir.INIT_CONTAINER)
        ours.update(change)
        assert any("job's directory" in m for m in vap_refusals(pol, bad, namespace)), change
        fixed = stored_form(_mutated(adm, with_object(review, bad)))
        assert vap_refusals(pol, fixed, namespace) == [], change
    # Without the job-dir init container in the install (no image), nobody mounts the namespace's directory.
    unpinned = next(o for o in claimmount.policy(profile, "fabricguard-system") if o["kind"] ==
                    "ValidatingAdmissionPolicy")
    assert vap_refusals(unpinned, pod, namespace)
