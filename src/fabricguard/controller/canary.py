"""The canary JobSet: two pods on two nodes of a pool that ask for its fabric exactly as a training job would.

The pod template is a bare GPU worker that the admission webhook's own patch builder then fills in (fabric
resources, interface annotations, forced ``NCCL_NET``, ``NCCL_DEBUG=INFO`` with one ``NCCL_DEBUG_FILE`` per
rank on Lustre, ``/dev/shm``, the Lustre mount, nodeSelector and tolerations): a canary that asked for its
fabric differently from real jobs would prove nothing about them. What the webhook does not know is added
here: one pod per node (anti-affinity on the JobSet's own label), DNS hostnames for rank 0's address,
``maxRestarts: 0``, a TTL, the owner reference to the pool's FabricValidation and the PriorityClass. The
Kueue queue label that the webhook adds for the pool is replaced by the canary's own queue (or removed), so
the canary is never held by the admission check whose verdict it produces.

Each pod runs the collective probe under torchrun (one process per GPU) and the storage probe on the pool's
Lustre path; the probe results go to ``<job dir>/.fabricguard/canary/`` and the ranks' NCCL logs and each
node's mountinfo to the injected log directory, where the controller judges them with ``verify-job``'s rules.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonpatch

from fabricguard import names
from fabricguard import objects as o
from fabricguard.admission import workloads as wl
from fabricguard.admission.claims import RETEST_SUFFIX
from fabricguard.admission.mutate import KUEUE_QUEUE, mutate_workload
from fabricguard.profile.model import Canary, PlatformProfile, Pool

REPLICATED_JOB = "workers"
CONTAINER = "canary"
MASTER_PORT = 29500
TTL_SECONDS = 3600
RESULT_SUBDIR = ".fabricguard/canary"
STORAGE_SUBDIR = ".fabricguard/canary-storage"

# The pod's shell script. Every input is an environment variable of the container, so the same command runs
# unchanged in a pod and, in the tests, as two processes in two network namespaces. JOB_COMPLETION_INDEX is
# set by the Job controller (Indexed completion mode).
SCRIPT = """\
set -u
i="${JOB_COMPLETION_INDEX:-0}"
mkdir -p "$FG_CANARY_OUT" "$FG_CANARY_LOGS" "$FG_CANARY_STORAGE/node$i"
cat /proc/self/mountinfo > "$FG_CANARY_LOGS/mountinfo-node$i" 2>/dev/null || true
rc=0
torchrun --nnodes="$FG_CANARY_NODES" --nproc-per-node="$FG_CANARY_GPUS" --node-rank="$i" \\
  --master-addr="$FG_CANARY_MASTER" --master-port="$FG_CANARY_PORT" --no-python /bin/sh -c \\
  'exec fabricguard probe collective --format json -o "$FG_CANARY_LOGS" -c "$FG_CANARY_COLLECTIVES" \\
     -b "$FG_CANARY_MINBYTES" -e "$FG_CANARY_MAXBYTES" -f "$FG_CANARY_STEPFACTOR" ${FG_CANARY_RAILS:+--rails} \\
     > "$FG_CANARY_OUT/collective.rank$RANK.json" 2> "$FG_CANARY_OUT/collective.rank$RANK.stderr"' || rc=$?
fabricguard probe storage --path "$FG_CANARY_STORAGE/node$i" --ranks 1 --size "$FG_CANARY_STORAGE_SIZE" \\
  --small-files 200 --expect-fstype "$FG_CANARY_FSTYPE" --format json > "$FG_CANARY_OUT/storage.node$i.json" \\
  2> "$FG_CANARY_OUT/storage.node$i.stderr" || rc=$((rc ? rc : $?))
exit "$rc"
"""


@dataclass(frozen=True)
class CanarySpec:
    """Where a canary of ``pool`` lives: its JobSet name and its directory on Lustre (relative to the claim)."""

    pool: str
    name: str
    namespace: str
    job_dir: str  # relative to the Lustre claim's root: the webhook's subPath with {namespace} and {job}

    @property
    def result_dir(self) -> str:
        return posixpath.join(self.job_dir, RESULT_SUBDIR)


def _stem(pool: Pool) -> str:
    return re.sub(r"-+$", "", pool.name[:30])


def canary_name(pool: Pool, now: datetime) -> str:
    """``fgc-<pool>-<unix seconds>``: unique per start, short enough for the pods' DNS hostnames (63)."""
    return f"fgc-{_stem(pool)}-{int(now.timestamp())}"


def started_at(pool: Pool, name: str) -> datetime | None:
    """The start time a canary's name carries (``canary_name``'s seconds), or None for another name."""
    m = re.fullmatch(rf"fgc-{re.escape(_stem(pool))}-(\d{{1,12}})", name)
    return datetime.fromtimestamp(int(m.group(1)), UTC) if m else None


MAX_RUN_DIRS_LISTED = 100_000  # entries of the canaries' parent directory read per pass, at most


def runs_on_lustre(profile: PlatformProfile, pool: Pool, namespace: str, lustre_root: Path) -> list[str]:
    """Names of ``pool``'s canary runs that left a job directory on Lustre, newest first.

    What a finished canary leaves there outlives its JobSet, so a run whose result was never recorded can be
    judged again from it. Only the directory that holds the job directories is listed (names only, bounded)."""
    lustre = profile.spec.storage.lustre
    if lustre is None:
        return []
    parts = lustre.subPath.replace("{namespace}", namespace).strip("/").split("/")
    at = next((i for i, part in enumerate(parts) if "{job}" in part), None)
    if at is None:
        return []  # every job shares one directory: there are no per-run directories to find
    before, _, after = parts[at].partition("{job}")
    rx = re.compile(re.escape(before) + rf"(fgc-{re.escape(_stem(pool))}-\d{{1,12}})" + re.escape(after))
    parent = lustre_root.joinpath(*parts[:at])
    found: list[tuple[datetime, str]] = []
    try:
        with os.scandir(parent) as it:
            for n, entry in enumerate(it):
                if n >= MAX_RUN_DIRS_LISTED:
                    break
                m = rx.fullmatch(entry.name)
                when = started_at(pool, m.group(1)) if m else None
                if m and when is not None and job_dir(profile, namespace, m.group(1)).split("/")[at] == entry.name:
                    found.append((when, m.group(1)))
    except OSError:
        return []
    return [name for _when, name in sorted(found, reverse=True)]


def job_dir(profile: PlatformProfile, namespace: str, job: str) -> str:
    """The job's directory relative to the Lustre claim root, as the webhook's subPathExpr resolves it."""
    lustre = profile.spec.storage.lustre
    if lustre is None:
        raise ValueError("the profile has no spec.storage.lustre")
    return lustre.subPath.replace("{namespace}", namespace).replace("{job}", job)


def log_dir_in_pod(profile: PlatformProfile) -> str:
    lustre = profile.spec.storage.lustre
    assert lustre is not None
    return posixpath.join(lustre.mountPath, lustre.logDir.strip("/"))


def log_dir(profile: PlatformProfile, namespace: str, job: str) -> str:
    """The per-job NCCL log directory relative to the claim root (where ``NCCL_DEBUG_FILE`` writes)."""
    lustre = profile.spec.storage.lustre
    assert lustre is not None
    return posixpath.join(job_dir(profile, namespace, job), lustre.logDir.strip("/"))


def spec_for(profile: PlatformProfile, pool: Pool, namespace: str, now: datetime) -> CanarySpec:
    name = canary_name(pool, now)
    return CanarySpec(pool.name, name, namespace, job_dir(profile, namespace, name))


def _bare_jobset(pool: Pool, canary: Canary, spec: CanarySpec, image: str) -> dict[str, Any]:
    container = {
        "name": CONTAINER,
        "image": image,
        "command": ["/bin/sh", "-c", SCRIPT],
        "resources": {
            "requests": {pool.gpuResource: str(canary.gpusPerPod)},
            "limits": {pool.gpuResource: str(canary.gpusPerPod)},
        },
    }
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "priorityClassName": canary.priorityClassName,
        "activeDeadlineSeconds": canary.run_timeout_s,
        "containers": [container],
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {names.JOBSET_NAME: spec.name}},
                        "topologyKey": names.LABEL_HOSTNAME,
                    }
                ]
            }
        },
    }
    return {
        "apiVersion": names.JOBSET_API,
        "kind": "JobSet",
        "metadata": {
            "name": spec.name,
            "namespace": spec.namespace,
            "labels": {names.LABEL_CANARY_POOL: pool.name, names.LABEL_APP_COMPONENT: "canary"},
        },
        "spec": {
            "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
            "failurePolicy": {"maxRestarts": 0},
            "ttlSecondsAfterFinished": TTL_SECONDS,
            "replicatedJobs": [
                {
                    "name": REPLICATED_JOB,
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "parallelism": canary.nodes,
                            "completions": canary.nodes,
                            "completionMode": "Indexed",
                            "backoffLimit": 0,
                            "template": {"metadata": {"labels": {names.LABEL_CANARY_POOL: pool.name}},
                                         "spec": pod_spec},
                        }
                    },
                }
            ],
        },
    }


def _canary_env(profile: PlatformProfile, pool: Pool, canary: Canary, spec: CanarySpec) -> list[dict[str, str]]:
    lustre = profile.spec.storage.lustre
    assert lustre is not None
    mount = lustre.mountPath
    return [
        {"name": "FG_CANARY_NODES", "value": str(canary.nodes)},
        {"name": "FG_CANARY_GPUS", "value": str(canary.gpusPerPod)},
        # Rank 0's stable DNS name: <jobset>-<replicatedJob>-<job index>-<pod index>.<subdomain = jobset>.
        {"name": "FG_CANARY_MASTER", "value": f"{spec.name}-{REPLICATED_JOB}-0-0.{spec.name}"},
        {"name": "FG_CANARY_PORT", "value": str(MASTER_PORT)},
        {"name": "FG_CANARY_LOGS", "value": log_dir_in_pod(profile)},
        {"name": "FG_CANARY_OUT", "value": posixpath.join(mount, RESULT_SUBDIR)},
        {"name": "FG_CANARY_STORAGE", "value": posixpath.join(mount, STORAGE_SUBDIR)},
        {"name": "FG_CANARY_STORAGE_SIZE", "value": canary.storageSize},
        {"name": "FG_CANARY_FSTYPE", "value": "lustre"},
        {"name": "FG_CANARY_COLLECTIVES", "value": ",".join(canary.collectives)},
        {"name": "FG_CANARY_MINBYTES", "value": canary.sizes.minBytes},
        {"name": "FG_CANARY_MAXBYTES", "value": canary.sizes.maxBytes},
        {"name": "FG_CANARY_STEPFACTOR", "value": f"{canary.sizes.stepFactor:g}"},
    ]


def render_canary(
    profile: PlatformProfile,
    pool: Pool,
    spec: CanarySpec,
    *,
    image: str,
    owner: dict[str, Any] | None,
    canary: Canary | None = None,
    avoid: list[str] | None = None,
) -> dict[str, Any]:
    """The canary JobSet for ``pool``; ``owner`` is the pool's FabricValidation as the API server returned it.
    ``canary``: settings in place of the pool's own (a pair test's GPUs, priority and queue)."""
    canary = canary or profile.canary(pool)
    if canary is None:
        raise ValueError(f"pool {pool.name} has no canary")
    if not (canary.image or image):
        raise ValueError(f"pool {pool.name}: no canary image (canary.image or --canary-image)")
    bare = _bare_jobset(pool, canary, spec, canary.image or image)
    w = wl.locate(bare, "JobSet", spec.namespace)
    mutation = mutate_workload(w, profile, pool)
    if not mutation.allowed:  # a bare template has nothing to conflict with; a profile bug if it does
        raise ValueError(f"the admission patch builder refused the canary of pool {pool.name}: {mutation.message}")
    js: dict[str, Any] = jsonpatch.apply_patch(bare, mutation.patch)
    labels = js["metadata"]["labels"]
    if canary.queue:
        labels[KUEUE_QUEUE] = canary.queue
    else:
        labels.pop(KUEUE_QUEUE, None)
    pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    container = pod["spec"]["containers"][0]
    container["env"] = [*container.get("env", []), *_canary_env(profile, pool, canary, spec)]
    if owner is not None:
        js["metadata"]["ownerReferences"] = [o.owner_ref(owner, names.FV_API, names.FV_KIND)]
    if avoid:
        pod["spec"].setdefault("affinity", {})["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": names.LABEL_HOSTNAME, "operator": "NotIn", "values": sorted(avoid)[:100]}]}]}}
    return js


# ------------------------------------------------------------------------------------------ pair tests

PAIR_PREFIX = "fgp"


def pair_name(pool: Pool, now: datetime, index: int) -> str:
    """``fgp-<pool>-<unix seconds>-<index>``: unique per start; its pods' hostnames stay within 63."""
    return f"{PAIR_PREFIX}-{re.sub(r'-+$', '', pool.name[:24])}-{int(now.timestamp())}-{index}"


def pair_started_at(name: str) -> datetime | None:
    m = re.fullmatch(rf"{PAIR_PREFIX}-[a-z0-9-]+-(\d{{1,12}})-\d{{1,4}}", name)
    return datetime.fromtimestamp(int(m.group(1)), UTC) if m else None


def render_pair(profile: PlatformProfile, pool: Pool, spec: CanarySpec, nodes: tuple[str, str], *, image: str,
                owner: dict[str, Any] | None, purpose: str, tolerate: list[str]) -> dict[str, Any]:
    """A pair test: the pool's canary pinned to two named nodes, with the proof's GPUs (default the whole node,
    so every rail is in the test), its scavenger PriorityClass (and Kueue WorkloadPriorityClass) and queue.

    The JobSet carries ``fabricguard.io/proof-pool`` instead of the canary's pool label, so the pool canary's
    pass never adopts or deletes it. ``tolerate``: taint keys of the tested node (the readiness taint of a new
    node, fabricguard's quarantine taint for a re-test) -- its partner is known-good and carries neither."""
    canary = profile.canary(pool)
    proof = pool.proof
    if canary is None or proof is None:
        raise ValueError(f"pool {pool.name} has no canary or no proof")
    pair = canary.model_copy(update={
        "nodes": 2, "gpusPerPod": proof.gpusPerPod or pool.gpusPerNode,
        "priorityClassName": proof.priorityClassName, "queue": proof.queue})
    js = render_canary(profile, pool, spec, image=image, owner=owner, canary=pair)
    labels = js["metadata"]["labels"]
    labels.pop(names.LABEL_CANARY_POOL, None)
    labels[names.LABEL_PROOF_POOL] = pool.name
    labels[names.LABEL_PROOF_PURPOSE] = purpose
    if proof.queue:
        labels[names.KUEUE_PRIORITY_CLASS] = proof.priorityClassName  # the WorkloadPriorityClass of that name
    pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    pod["metadata"].setdefault("labels", {})[names.LABEL_PROOF_POOL] = pool.name
    affinity = pod["spec"].setdefault("affinity", {})
    affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": names.LABEL_HOSTNAME, "operator": "In", "values": sorted(nodes)}]}]}}
    tolerations = pod["spec"].setdefault("tolerations", [])
    for key in tolerate:
        tolerations.append({"key": key, "operator": "Exists", "effect": "NoSchedule"})
    if names.TAINT_QUARANTINED in tolerate and pool.claim_template_name:
        # Its bad NIC may carry fabricguard's DeviceTaintRule: claim through the template that tolerates it.
        for rc in pod["spec"].get("resourceClaims") or ():
            if rc.get("resourceClaimTemplateName") == pool.claim_template_name:
                rc["resourceClaimTemplateName"] = pool.claim_template_name + RETEST_SUFFIX
    env = pod["spec"]["containers"][0]["env"]
    env.append({"name": "FG_PROOF_NODES", "value": ",".join(nodes)})
    # Then each rail alone, its NIC named per node (probe collective --rails): bisection names the bad rail.
    env.append({"name": "FG_CANARY_RAILS", "value": "1"})
    env.append({"name": "FG_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}})
    return js
