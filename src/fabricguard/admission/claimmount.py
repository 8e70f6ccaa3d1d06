"""Tenant isolation on the shared Lustre claim: a pod may mount it only at its job's directory.

The claim's root is the file system's root wherever the driver cannot root a volume at a directory (GKE Managed
Lustre), and a namespace's own directory elsewhere (``storage/layout.py``). Either way a pod that mounts the claim
without ``subPath``, or with a ``subPath`` of its choosing, reaches more than its job's directory: on a
root-level claim every other namespace's job directories and logs, which the controller reads as evidence (a
tenant could forge another tenant's verdict). So every mount of the claim, in every container, must be exactly
the ``subPathExpr`` the webhook injects (``$(FG_NAMESPACE)/$(FG_JOB)``, or ``$(FG_JOB)`` below a namespace's own
root), and where it names ``$(FG_NAMESPACE)`` the container must take that variable from the pod's own namespace
(``fieldRef: metadata.namespace``), not a value a tenant writes (``victim-team``) or a ConfigMap's. The kubelet
refuses an expanded ``subPath`` that is absolute or holds ``..``, but it follows links inside the volume (only
the result must stay in it): an ``FG_JOB`` of a tenant's choosing (``llm-7b/escape``, ``escape`` a link it left in
its own job directory to ``../../victim-team``) would reach another namespace's directory on a root claim. So
``FG_JOB`` must be one of the pod's labels (``fieldRef: metadata.labels[...]``: a label's value has no ``/`` and is
never ``.`` or ``..``), or a LeaderWorkerSet's ``$(FG_WORKLOAD)/$(FG_GROUP)`` with both parts labels defined before
it (the kubelet expands a value with what is defined so far, ``envFrom`` first). Ephemeral containers (``kubectl
debug``) may not set ``subPath`` at all: they may not mount the claim.

The same rule twice, from one description (:class:`Rule`): :func:`problems` (Python, the webhook's validation of
a workload's pod templates: each refusal a :class:`ClaimMountRefused` saying what to change) and :func:`policy`
(CEL, a ValidatingAdmissionPolicy on every Pod of the training namespaces, CREATE and the ``ephemeralcontainers``
subresource: pods the webhook never sees, and after every mutating webhook). Not relaxed in observe mode: it is a
boundary between tenants, not a fabric judgment, and fabricguard's own injected form passes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fabricguard import names
from fabricguard.profile.model import PlatformProfile
from fabricguard.storage import jobdir, layout

NAME = "fabricguard-lustre-claim"


class ClaimMountRefused(Exception):
    """A pod (template) mounts the Lustre claim other than at its job's directory; the message says what to change."""


@dataclass(frozen=True)
class Rule:
    """What admission holds the claim's mounts to in one install: the claim; the job directory's ``subPathExpr``
    in the namespaces rooted at their own directory (``rooted``) and everywhere else; and the namespace
    directory's, which only fabricguard's job-dir init container mounts ("" : the claim's root)."""

    claim: str
    mount_path: str
    rooted: tuple[str, ...]
    rooted_expr: str
    root_expr: str
    rooted_ns_expr: str
    root_ns_expr: str
    # The job-dir init container's image as the install renders it (None: none is injected, or not known here):
    # the policy opens the namespace's directory only to that image running ``fabricguard storage job-dir``.
    init_image: str | None = None

    def expr(self, namespace: str) -> str:
        return self.rooted_expr if namespace in self.rooted else self.root_expr

    def ns_expr(self, namespace: str) -> str:
        return self.rooted_ns_expr if namespace in self.rooted else self.root_ns_expr


def rule_of(profile: PlatformProfile, job_dir_image: str | None = None) -> Rule | None:
    """The rule of ``profile``; None without a Lustre claim. ``job_dir_image``: the job-dir init container's image
    where the profile names none (the install's agent image, as the webhook's ``--job-dir-image``)."""
    lustre = profile.spec.storage.lustre
    if lustre is None:
        return None
    image = (lustre.jobDirectory.image or job_dir_image) if lustre.jobDirectory.enabled else None
    rooted = tuple(n for n in layout.lustre_namespaces(profile) if layout.namespace_dir(profile, n) is not None)
    root, at_root = layout.subpath_expr(lustre.subPath), layout.job_dir_mount(profile, "")
    first = rooted[0] if rooted else ""
    return Rule(lustre.claimName, lustre.mountPath, rooted, layout.job_dir_expr(profile, first), root,
                layout.job_dir_mount(profile, first).mount_expr, at_root.mount_expr, image)


def _containers(spec: dict[str, Any], key: str) -> list[dict[str, Any]]:
    items = spec.get(key)
    return [c for c in items if isinstance(c, dict)] if isinstance(items, list) else []


def _claim_volumes(spec: dict[str, Any], claim: str) -> set[str]:
    out: set[str] = set()
    for v in spec.get("volumes") or ():
        pvc = v.get("persistentVolumeClaim") if isinstance(v, dict) else None
        if isinstance(pvc, dict) and pvc.get("claimName") == claim and isinstance(v.get("name"), str):
            out.add(v["name"])
    return out


def _namespace_from_pod(container: dict[str, Any], inherited: list[Any]) -> bool:
    """Every ``FG_NAMESPACE`` entry of the container is the pod's namespace, and there is one (an explicit
    entry wins over ``envFrom``; without one, the kubelet would leave ``$(FG_NAMESPACE)`` as it is)."""
    env = [e for e in [*inherited, *(container.get("env") or ())]
           if isinstance(e, dict) and e.get("name") == layout.ENV_NS]
    return bool(env) and all(
        ((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath") == "metadata.namespace" for e in env)


LWS_JOB = f"$({layout.ENV_WORKLOAD})/$({layout.ENV_GROUP})"


def _label_ref(e: Any) -> bool:
    path = ((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath") if isinstance(e, dict) else None
    return isinstance(path, str) and path.startswith("metadata.labels[")


def _job_from_labels(container: dict[str, Any], inherited: list[Any]) -> bool:
    """``FG_JOB`` is defined in the container, and every entry of it is a label's value, or the LeaderWorkerSet
    form whose two parts are labels only, each defined before the first ``FG_JOB`` (module docstring)."""
    env = [e for e in [*inherited, *(container.get("env") or ())] if isinstance(e, dict)]
    names_ = [e.get("name") for e in env]
    if layout.ENV_JOB not in names_:
        return False
    first = names_.index(layout.ENV_JOB)

    def parts_are_labels() -> bool:
        return all(part in names_[:first] and all(_label_ref(e) for e in env if e.get("name") == part)
                   for part in (layout.ENV_WORKLOAD, layout.ENV_GROUP))

    return all(_label_ref(e) or (e.get("value") == LWS_JOB and parts_are_labels())
               for e in env if e.get("name") == layout.ENV_JOB)


def problems(rule: Rule, spec: dict[str, Any], namespace: str, where: str,
             inherited_env: list[Any] | None = None) -> list[ClaimMountRefused]:
    """Every mount of the claim in pod ``spec`` (in ``namespace``) that is not its job's directory.
    ``inherited_env``: env the containers get from elsewhere (a TrainJob's ``spec.trainer.env``)."""
    vols = _claim_volumes(spec, rule.claim)
    if not vols:
        return []
    want, ns_want = rule.expr(namespace), rule.ns_expr(namespace)
    inherited = list(inherited_env or ())
    out: list[ClaimMountRefused] = []
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for c in _containers(spec, key):
            mounts = [m for m in c.get("volumeMounts") or () if isinstance(m, dict) and m.get("name") in vols]
            if not mounts:
                continue
            label = f"{key[:-1]} {c.get('name')!r} of {where}"
            # fabricguard's job-dir init container alone mounts the namespace's directory (storage/jobdir.py).
            allowed = {want, ns_want} if key == "initContainers" and c.get("name") == jobdir.INIT_CONTAINER else {want}
            used = ""
            for m in mounts:
                at = m.get("mountPath")
                expr = m.get("subPathExpr") or ""
                used += expr
                if key == "ephemeralContainers":
                    out.append(ClaimMountRefused(
                        f"ephemeral {label} mounts the Lustre claim {rule.claim} at {at}: an ephemeral container "
                        "cannot use subPathExpr, so it would see the claim's root; remove the mount and read the "
                        f"job's files from {rule.mount_path} in one of the pod's own containers"))
                elif m.get("subPath") or expr not in allowed:
                    how = (f"subPath {m['subPath']!r}" if m.get("subPath") else
                           f"subPathExpr {expr!r}" if expr else "no subPath")
                    out.append(ClaimMountRefused(
                        f"{label} mounts the Lustre claim {rule.claim} at {at} with {how}: it may only be mounted "
                        f"at the job's directory, subPathExpr {want} (what fabricguard injects at "
                        f"{rule.mount_path}); remove this mount, or write under {rule.mount_path}"))
            if key != "ephemeralContainers" and f"$({layout.ENV_NS})" in used and not _namespace_from_pod(c, inherited):
                out.append(ClaimMountRefused(
                    f"{label} mounts the Lustre claim {rule.claim} but its env {layout.ENV_NS} is not the pod's "
                    f"namespace: remove your {layout.ENV_NS} entries, fabricguard sets it from fieldRef "
                    "metadata.namespace"))
            if key != "ephemeralContainers" and f"$({layout.ENV_JOB})" in used and not _job_from_labels(c, inherited):
                out.append(ClaimMountRefused(
                    f"{label} mounts the Lustre claim {rule.claim} but its env {layout.ENV_JOB} is not one of the "
                    f"pod's labels (a value, a ConfigMap's or envFrom's could name a link out of the job's "
                    f"directory): remove your {layout.ENV_JOB} entries, fabricguard sets it from the job's label"))
    return out


# ---------------------------------------------------------------------------------------------- the policy


def _list(items: tuple[str, ...]) -> str:
    return "[" + ", ".join(f"'{x}'" for x in items) + "]"


def _ours(rule: Rule) -> str:
    """CEL: container ``c`` is fabricguard's job-dir init container as the install renders it."""
    if rule.init_image is None:
        return "false"
    image = rule.init_image.replace("\\", "\\\\").replace("'", "\\'")
    return (f"c.image == '{image}' && has(c.command) && c.command == ['fabricguard'] && has(c.args) && "
            "size(c.args) >= 2 && c.args[0] == 'storage' && c.args[1] == 'job-dir'")


def _cel_label(e: str) -> str:
    return (f"(has({e}.valueFrom) && has({e}.valueFrom.fieldRef) && "
            f"{e}.valueFrom.fieldRef.fieldPath.startsWith('metadata.labels['))")


def policy_expressions(rule: Rule) -> dict[str, str]:
    """The CEL of the policy by name (variables first, then validations): what the tests evaluate."""
    mounts_claim = "c.volumeMounts.exists(m, m.name in variables.claimVolumes)"
    return {
        "claimVolumes": ("has(object.spec.volumes) ? object.spec.volumes.filter(v, has(v.persistentVolumeClaim) && "
                         f"v.persistentVolumeClaim.claimName == '{rule.claim}').map(v, v.name) : []"),
        "jobDirExpr": (f"request.namespace in {_list(rule.rooted)} ? '{rule.rooted_expr}' : '{rule.root_expr}'"),
        "namespaceDirExpr": (f"request.namespace in {_list(rule.rooted)} ? '{rule.rooted_ns_expr}' : "
                             f"'{rule.root_ns_expr}'"),
        "mounters": ("((has(object.spec.containers) ? object.spec.containers : []) + "
                     "(has(object.spec.initContainers) ? object.spec.initContainers : []))"
                     f".filter(c, has(c.volumeMounts) && {mounts_claim})"),
        # The job's directory in every container; the namespace's in fabricguard's job-dir init container only: by
        # name, and the install's image running `fabricguard storage job-dir` (a tenant's own of that name, as root,
        # could leave a link there that the kubelet follows for a pod without ours); nobody's without an image.
        "jobDirOnly": ("variables.mounters.all(c, c.volumeMounts.all(m, !(m.name in variables.claimVolumes) || "
                       "((!has(m.subPath) || m.subPath == '') && "
                       "((has(m.subPathExpr) ? m.subPathExpr : '') == variables.jobDirExpr || "
                       f"(c.name == '{jobdir.INIT_CONTAINER}' && has(object.spec.initContainers) && "
                       "object.spec.initContainers.exists(i, i.name == c.name) && "
                       f"{_ours(rule)} && "
                       "(has(m.subPathExpr) ? m.subPathExpr : '') == variables.namespaceDirExpr)))))"),
        # The namespace's directory is a prefix of the job's: one names $(FG_NAMESPACE) only if the other does.
        "namespaceFromPod": (f"!variables.jobDirExpr.contains('$({layout.ENV_NS})') || "
                             "variables.mounters.all(c, "
                             f"has(c.env) && c.env.exists(e, e.name == '{layout.ENV_NS}') && "
                             f"c.env.all(e, e.name != '{layout.ENV_NS}' || (has(e.valueFrom) && "
                             "has(e.valueFrom.fieldRef) && e.valueFrom.fieldRef.fieldPath == 'metadata.namespace')))"),
        # FG_JOB: a label, or the LeaderWorkerSet form of two labels defined before it (module docstring).
        # FG_JOB: a label, or the LeaderWorkerSet form of two labels defined before it (module docstring). The
        # parts' positions are looked at once per container, not once per entry.
        "jobFromLabels": ("variables.mounters.all(c, "
                          f"has(c.env) && c.env.exists(e, e.name == '{layout.ENV_JOB}') && "
                          f"c.env.all(e, e.name != '{layout.ENV_JOB}' || {_cel_label('e')} || "
                          f"(has(e.value) && e.value == '{LWS_JOB}')) && "
                          f"(c.env.all(e, e.name != '{layout.ENV_JOB}' || {_cel_label('e')}) || "
                          f"['{layout.ENV_WORKLOAD}', '{layout.ENV_GROUP}'].all(n, "
                          "c.env.map(w, w.name).indexOf(n) >= 0 && "
                          f"c.env.map(w, w.name).indexOf(n) < c.env.map(w, w.name).indexOf('{layout.ENV_JOB}') && "
                          f"c.env.all(w, w.name != n || {_cel_label('w')}))))"),
        "noEphemeralMount": ("!has(object.spec.ephemeralContainers) || object.spec.ephemeralContainers.all(c, "
                             f"!has(c.volumeMounts) || !{mounts_claim})"),
    }


VARIABLES = ("claimVolumes", "jobDirExpr", "namespaceDirExpr", "mounters")


def validations(rule: Rule) -> tuple[tuple[str, str], ...]:
    return (
        ("jobDirOnly", f"the Lustre claim {rule.claim} may only be mounted at the job's directory: every volumeMount "
                       f"of it needs the subPathExpr fabricguard injects ({rule.root_expr}, or {rule.rooted_expr} "
                       "in a namespace rooted at its own directory) and no subPath; remove other mounts of the claim"),
        ("namespaceFromPod", f"a container that mounts the Lustre claim {rule.claim} must take {layout.ENV_NS} from "
                             f"fieldRef metadata.namespace (fabricguard sets it); remove your {layout.ENV_NS} entries"),
        ("jobFromLabels", f"a container that mounts the Lustre claim {rule.claim} must take {layout.ENV_JOB} from "
                          "one of the pod's labels (fieldRef metadata.labels, as fabricguard sets it), not a value, "
                          f"a ConfigMap or envFrom; remove your {layout.ENV_JOB} entries"),
        ("noEphemeralMount", f"an ephemeral container may not mount the Lustre claim {rule.claim} (it cannot use "
                             "subPathExpr); read the job's files in one of the pod's own containers"),
    )


def policy(profile: PlatformProfile, install_namespace: str, job_dir_image: str | None = None) -> list[dict[str, Any]]:
    """The ValidatingAdmissionPolicy and its bindings: the training namespaces of Lustre pools by name (where the
    install puts the claim, opted in or not) and every opted-in namespace (``fabricguard.io/enabled=true``) but
    the install's own, whose controller and agents mount the root on purpose. [] without a Lustre claim.
    ``job_dir_image``: the job-dir init container's image the webhook injects where the profile names none."""
    rule = rule_of(profile, job_dir_image)
    if rule is None:
        return []
    expr = policy_expressions(rule)
    labels = {names.LABEL_APP_PART_OF: "fabricguard", names.LABEL_APP_COMPONENT: "lustre-claim"}
    skip = {"key": names.LABEL_NAMESPACE_NAME, "operator": "NotIn", "values": [install_namespace]}
    team = [n for n in layout.lustre_namespaces(profile) if n != install_namespace]
    selectors = [{"matchLabels": {names.LABEL_ENABLED: "true"}, "matchExpressions": [skip]}]
    if team:
        selectors.append({"matchExpressions": [{"key": names.LABEL_NAMESPACE_NAME, "operator": "In",
                                                "values": team}]})
    out: list[dict[str, Any]] = [
        {"apiVersion": names.ADMISSIONREGISTRATION_API, "kind": "ValidatingAdmissionPolicy",
         "metadata": {"name": NAME, "labels": labels},
         "spec": {
             "failurePolicy": "Fail",
             # CREATE of a pod, and kubectl debug's ephemeral containers (an UPDATE of this subresource).
             "matchConstraints": {"resourceRules": [
                 {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]},
                 {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
                  "resources": ["pods/ephemeralcontainers"]}]},
             "matchConditions": [{"name": "mounts-the-claim", "expression": f"size({expr['claimVolumes']}) > 0"}],
             "variables": [{"name": n, "expression": expr[n]} for n in VARIABLES],
             "validations": [{"expression": expr[n], "message": msg, "reason": "Forbidden"}
                             for n, msg in validations(rule)],
         }},
    ]
    for i, sel in enumerate(selectors):
        out.append({"apiVersion": names.ADMISSIONREGISTRATION_API, "kind": "ValidatingAdmissionPolicyBinding",
                    "metadata": {"name": NAME if i == 0 else f"{NAME}-training", "labels": labels},
                    "spec": {"policyName": NAME, "validationActions": ["Deny"],
                             "matchResources": {"namespaceSelector": sel}}})
    return out
