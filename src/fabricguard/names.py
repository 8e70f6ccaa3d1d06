"""Every name fabricguard shares with a cluster, spelled once: API groups and versions, labels, annotations,
condition types and reasons it reads or writes, taint keys, field managers.

The package root's vocabulary: every part (admission, doctor, agent, controller, placement, renderers and tests)
imports its keys from here, so a key renamed here is renamed everywhere and two parts cannot disagree on one.
Pure constants: no logic and no imports from fabricguard.
"""

from __future__ import annotations

# ------------------------------------------------------------------------------------------------ fabricguard's
GROUP = "fabricguard.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"  # the profile's apiVersion, and FabricValidation's
FV_API = API_VERSION
FV_KIND = "FabricValidation"
FV_PLURAL = "fabricvalidations"

# Labels and annotations on workloads and pods (read by admission, doctor, controller; the pool label also on
# the agent's DaemonSet and the Kueue ResourceFlavors).
LABEL_POOL = "fabricguard.io/pool"
LABEL_JOB = "fabricguard.io/job"
LABEL_MANAGED = "fabricguard.io/managed"
ANN_FABRIC = "fabricguard.io/fabric"
ANN_ALLOW_OVERRIDE = "fabricguard.io/allow-override"
ANN_GROUP_SIZE = "fabricguard.io/group-size"
# The namespace label that opts a namespace in to the webhook, and the pod-template checksum of its profile.
LABEL_ENABLED = "fabricguard.io/enabled"
# A DaemonSet labelled "false" keeps its own tolerations (admission/daemonsets.py adds the readiness ones otherwise).
LABEL_READINESS_TOLERATIONS = "fabricguard.io/readiness-tolerations"
ANN_PROFILE_CHECKSUM = "fabricguard.io/profile-sha256"
# Admission's field manager (the managedFields entry of what it injects).
ADMISSION_MANAGER = "fabricguard.io/admission"
# The agent's DaemonSet: which pool a privileged pod is for.
ANN_PRIVILEGED_FOR = "fabricguard.io/privileged-for"
# The doctor's reference ConfigMap.
LABEL_REFERENCE = "fabricguard.io/reference"
ANN_REFERENCE_ENVIRONMENT = "fabricguard.io/reference-environment"
ANN_REFERENCE_PUBLISHED = "fabricguard.io/reference-published"
# The pool transition's state ConfigMap.
LABEL_TRANSITION = "fabricguard.io/transition"
# The controller's: canary jobs, verdicts and live transport on workloads.
LABEL_CANARY_POOL = "fabricguard.io/canary-pool"
ANN_VERDICT = "fabricguard.io/verdict"
ANN_VERDICT_DETAIL = "fabricguard.io/verdict-detail"
ANN_TRANSPORT = "fabricguard.io/transport"
ANN_TRANSPORT_DETAIL = "fabricguard.io/transport-detail"
# Node proof (controller/proof.py): pair tests, the per-node evidence, the quarantine taint and condition.
LABEL_PROOF_POOL = "fabricguard.io/proof-pool"
LABEL_PROOF_PURPOSE = "fabricguard.io/proof-purpose"
ANN_LAST_PROVEN = "fabricguard.io/last-proven"
TAINT_QUARANTINED = "fabricguard.io/fabric-quarantined"
FABRIC_PROVEN = "FabricProven"
# Observe mode: the start of the check entry's message on a Workload enforce would have held (controller/gate.py);
# the doctor and preflight read it back to say what enforce would have held in the last day.
OBSERVE_HOLD_PREFIX = "fabricguard observe mode: enforce would hold: "
# The Kueue AdmissionCheck the controller answers.
CHECK_CONTROLLER = "fabricguard.io/fabric-validated"
CHECK_NAME = "fabric-validated"
# The FabricValidation's condition types (controller/rootcause.py).
FV_VALIDATED = "Validated"
FV_ROOT_CAUSE = "RootCause"
FV_STORAGE_READY = "StorageReady"  # the pool's storage canary (controller/storage_proof.py)
CONTROLLER_FIELD_MANAGER = "fabricguard-controller"
CONTROLLER_COMPONENT = "fabricguard-controller"
CONTROLLER_LEASE = "fabricguard-controller"
AGENT_NAME = "fabricguard-agent"
ADMISSION_NAME = "fabricguard-admission"
MANAGED_BY_VALUE = "fabricguard"

# ------------------------------------------------------------------------------- node readiness (agent, doctor)
# The node condition the agent writes and the doctor, controller and transition read.
FABRIC_READY = "FabricReady"
# Beside it, the node's RDMA ports and counters (agent/links.py); the controller quotes it when a job hangs.
FABRIC_LINKS = "FabricLinks"
# NodeReadinessRule taint keys must start with readiness.k8s.io/; the agent's --manage-taints uses the same keys.
READINESS_TAINT_PREFIX = "readiness.k8s.io/"
FABRIC_TAINT_PREFIX = "readiness.k8s.io/fabric-"
TAINT_UNVERIFIED = "readiness.k8s.io/fabric-unverified"
TAINT_DEGRADED = "readiness.k8s.io/fabric-degraded"
TAINT_KEYS = (TAINT_UNVERIFIED, TAINT_DEGRADED)
# Managed cluster autoscalers (GKE, AKS) build a zero-node pool's template node from the pool's registration taints
# and ignore only this prefix; NRC accepts only readiness.k8s.io/ (NRC #279). A pool that scales from zero registers
# with the startup key instead and the agent (--manage-taints) removes it (profile pools[].readinessTaintPrefix).
STARTUP_TAINT_PREFIX = "startup-taint.cluster-autoscaler.kubernetes.io/"
TAINT_STARTUP_UNVERIFIED = STARTUP_TAINT_PREFIX + "fabric-unverified"
BOOTSTRAP_TAINT_KEYS = (TAINT_UNVERIFIED, TAINT_STARTUP_UNVERIFIED)
NRR_API = "readiness.node.x-k8s.io/v1alpha1"

# ------------------------------------------------------------------------------------------ Kubernetes' own
CORE_API = "v1"
BATCH_API = "batch/v1"
APPS_API = "apps/v1"
LEASE_API = "coordination.k8s.io/v1"
ADMISSIONREVIEW_API = "admission.k8s.io/v1"
ADMISSIONREGISTRATION_API = "admissionregistration.k8s.io/v1"
RBAC_GROUP = "rbac.authorization.k8s.io"
RBAC_API = f"{RBAC_GROUP}/v1"
CRD_API = "apiextensions.k8s.io/v1"

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_OS = "kubernetes.io/os"
LABEL_ARCH = "kubernetes.io/arch"
LABEL_ARCH_BETA = "beta.kubernetes.io/arch"
LABEL_NAMESPACE_NAME = "kubernetes.io/metadata.name"
LABEL_APP_NAME = "app.kubernetes.io/name"
LABEL_APP_COMPONENT = "app.kubernetes.io/component"
LABEL_APP_PART_OF = "app.kubernetes.io/part-of"
LABEL_APP_VERSION = "app.kubernetes.io/version"  # the release that rendered an object (fabricguard.__version__)
# Which install component (its directory, e.g. 20-admission) rendered an object: `kubectl apply --prune -l` on it
# removes what a newer render of that component no longer has (placement/install.py prune_command).
LABEL_INSTALL_COMPONENT = "fabricguard.io/install-component"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_JOB_NAME = "batch.kubernetes.io/job-name"
ANN_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
ANN_RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"

# The labels of every object the controller's manifests install (and of the AdmissionCheck it answers).
CONTROLLER_LABELS = {LABEL_APP_NAME: CONTROLLER_COMPONENT, LABEL_APP_PART_OF: "fabricguard",
                     LABEL_APP_COMPONENT: "controller"}

# Condition types fabricguard reads on Kubernetes' objects.
NODE_READY = "Ready"
POD_READY = "Ready"
POD_SCHEDULED = "PodScheduled"

# ------------------------------------------------------------------------------------------------- Kueue
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_API = f"{KUEUE_GROUP}/v1beta2"
KUEUE_CONFIG_API = "config.kueue.x-k8s.io/v1beta2"
KUEUE_QUEUE_NAME = "kueue.x-k8s.io/queue-name"
KUEUE_JOB_UID = "kueue.x-k8s.io/job-uid"  # on a Workload: the uid of the job it was made for
KUEUE_PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"
KUEUE_POD_GROUP = "kueue.x-k8s.io/pod-group-name"
KUEUE_GROUP_COUNT = "kueue.x-k8s.io/pod-group-total-count"
TAS_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
TAS_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
TAS_UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
TAS_SLICE = "kueue.x-k8s.io/podset-slice-required-topology"
TAS_SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
TAS_SLICE_LAYERS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
TAS_KEYS = (TAS_REQUIRED, TAS_PREFERRED, TAS_UNCONSTRAINED)
# Condition types of Kueue's objects the controller reads and writes.
AC_ACTIVE = "Active"
WL_QUOTA_RESERVED = "QuotaReserved"
WL_ADMITTED = "Admitted"
WL_FINISHED = "Finished"

# ----------------------------------------------------------------------------------- JobSet, Trainer, LWS
JOBSET_GROUP = "jobset.x-k8s.io"
JOBSET_API = f"{JOBSET_GROUP}/v1alpha2"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
JOBSET_REPLICAS = "jobset.sigs.k8s.io/replicatedjob-replicas"
TRAINER_GROUP = "trainer.kubeflow.org"
TRAINJOB_API = f"{TRAINER_GROUP}/v1alpha1"
TRAINJOB_NAME = "trainer.kubeflow.org/trainjob-name"
PYTORCHJOB_NAME = "training.kubeflow.org/job-name"  # Kubeflow Training Operator v1 and mpi-operator v2 pods
LWS_GROUP = "leaderworkerset.x-k8s.io"
LWS_API = f"{LWS_GROUP}/v1"
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
KUBEFLOW_GROUP = "kubeflow.org"
PYTORCHJOB_API = f"{KUBEFLOW_GROUP}/v1"
MPIJOB_API = f"{KUBEFLOW_GROUP}/v2beta1"
RAY_GROUP = "ray.io"
RAY_API = f"{RAY_GROUP}/v1"
RAY_CLUSTER = "ray.io/cluster"  # KubeRay sets it on every pod of a RayCluster (a RayJob's too): the cluster's name

# ------------------------------------------------------------------------------------------ networks
NAD_API = "k8s.cni.cncf.io/v1"
NAD_RESOURCE = "k8s.v1.cni.cncf.io/resourceName"
MULTUS_NETWORKS = "k8s.v1.cni.cncf.io/networks"
GKE_NETWORK_API = "networking.gke.io/v1"
GKE_DEFAULT_IF = "networking.gke.io/default-interface"
GKE_INTERFACES = "networking.gke.io/interfaces"

GPU_RESOURCE = "nvidia.com/gpu"
# Dynamic Resource Allocation (DeviceClasses, ResourceSlices, ResourceClaims).
DRA_GROUP = "resource.k8s.io"
DRA_API = f"{DRA_GROUP}/v1"

# The environment variable the webhook sets to "<namespace>.<job>" in every container that mounts the profile's
# Lustre, and that the nodes' Lustre client names in jobid_var so each request is tagged with its job (server
# job_stats). Lustre takes at most 20 characters here (JOBSTATS_JOBID_VAR_MAX_LEN) and keeps 31 of the value.
LUSTRE_JOBID_ENV = "FG_LUSTRE_JOBID"
