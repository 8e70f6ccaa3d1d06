"""The platform profile: one declarative description of pools, fabrics, storage, queues and baselines.

Every part of fabricguard reads this model: admission injects from it, readiness checks against it, the
doctor audits against it and job verdicts compare with its baselines. Field names follow Kubernetes
conventions (camelCase) because platform engineers write it next to their manifests.
"""

from __future__ import annotations

import math
import re
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fabricguard import breaker, dnsnames, fabrics, names, quantity
from fabricguard.fabrics import FabricSpec
from fabricguard.fabrics import FabricType as FabricType  # re-exported: profile.FabricType
from fabricguard.fabrics import Transport as Transport  # re-exported: profile.Transport
from fabricguard.imageref import reference_problem
from fabricguard.objects import labels_of, selector_matches
from fabricguard.profile.cluster import FabricDaemonSet, LustreVolume, PodAdditions
from fabricguard.socket_ifname import IfnameList
from fabricguard.times import duration_seconds as duration_seconds

API_VERSION = names.API_VERSION
KIND = "PlatformProfile"

HOSTNAME_LABEL = names.LABEL_HOSTNAME

_QUANTITY = quantity.GRAMMAR  # the one Kubernetes quantity grammar (fabricguard.quantity)
_BYTES = re.compile(r"^[0-9]+[KMG]?$")
_RESOURCE_NAME = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


class _Strict(BaseModel):
    # Unknown keys are rejected: a typo such as `gpuPerNode` must not silently become a default.
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=False)


class Environment(StrEnum):
    staging = "staging"
    production = "production"
    dev = "dev"


class Architecture(StrEnum):
    amd64 = "amd64"
    arm64 = "arm64"


# What NCCL_NET must be so that NCCL fails at init instead of falling back to sockets, and the transports a job
# on each fabric may legitimately report: both read from the fabric's module (fabricguard/fabrics/).
DEFAULT_NCCL_NET: dict[FabricType, str | None] = {FabricType(t): s.nccl_net for t, s in fabrics.SPECS.items()}
EXPECTED_TRANSPORTS: dict[FabricType, frozenset[Transport]] = {
    FabricType(t): s.transports for t, s in fabrics.SPECS.items()
}


class Toleration(_Strict):
    """A Kubernetes toleration, field for field."""

    key: str | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    tolerationSeconds: int | None = None

    @model_validator(mode="after")
    def _exists_has_no_value(self) -> Toleration:
        if self.operator == "Exists" and self.value:
            raise ValueError("a toleration with operator Exists must not set a value")
        return self

    def to_k8s(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class DevicePlugin(_Strict):
    """The DaemonSet that advertises the fabric's extended resources on each node."""

    namespace: str = "kube-system"
    daemonSet: str


DRA_API = names.DRA_API
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
DRANET_DRIVER = "dra.net"
_ATTRIBUTE = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_]*[A-Za-z0-9])?$")


class Dra(_Strict):
    """The pool's fabric offered through Dynamic Resource Allocation (``resource.k8s.io/v1``), not a device plugin.

    Two forms: a claim (the webhook adds ``spec.resourceClaims`` naming the ResourceClaimTemplate the controller
    keeps in each opted-in namespace), or KEP-5004 (``extendedResourceName``: the DeviceClass backs an extended
    resource, pods keep ``resources.requests`` and the scheduler makes the claim).
    """

    deviceClassName: str = Field(description="The DeviceClass of the fabric's devices (mrdma.google.com, ...).")
    driver: str = Field(default=DRANET_DRIVER, description="The DRA driver whose ResourceSlices list the devices.")
    count: int | None = Field(default=None, ge=1, description="Devices per pod (or per node, see countPer).")
    countPer: Literal["pod", "node"] = Field(
        default="pod",
        description="pod: every GPU pod claims count devices; node: count is the node's share and a GPU pod "
        "takes the whole node (all gpusPerNode GPUs).",
    )
    allocationMode: Literal["ExactCount", "All"] = "ExactCount"
    alignWithGpus: str | None = Field(
        default=None,
        description="The GPUs' DeviceClass (gpu.nvidia.com): GPUs and NICs are claimed together, constrained to "
        f"one PCIe root ({PCIE_ROOT}).",
    )
    extendedResourceName: str | None = Field(
        default=None,
        description="KEP-5004: the DeviceClass's spec.extendedResourceName; pods request this resource as before.",
    )
    driverDaemonSet: DevicePlugin | None = Field(default=None, description="The DRA driver's DaemonSet.")
    claimTemplateName: str | None = Field(
        default=None, description="The ResourceClaimTemplate name (default fabricguard-<pool>-fabric)."
    )
    deviceAttributes: dict[str, str | bool | int] = Field(
        default_factory=dict,
        description="Attributes every expected device carries in the driver's ResourceSlice (default for "
        "dra.net: dra.net/rdma=true).",
    )

    @field_validator("deviceClassName", "driver", "alignWithGpus", "claimTemplateName")
    @classmethod
    def _subdomain(cls, v: str | None) -> str | None:
        if v is not None and not dnsnames.is_subdomain(v):
            raise ValueError(f"{v!r} is not a DNS subdomain (lowercase letters, digits, '-' and '.')")
        return v

    @field_validator("extendedResourceName")
    @classmethod
    def _extended(cls, v: str | None) -> str | None:
        if v is not None and (not _RESOURCE_NAME.match(v) or "/" not in v):
            raise ValueError(f"{v!r} is not an extended resource name such as 'vpc.amazonaws.com/efa'")
        return v

    @field_validator("deviceAttributes")
    @classmethod
    def _attributes(cls, v: dict[str, Any]) -> dict[str, Any]:
        for k in v:
            if not _ATTRIBUTE.match(k):
                raise ValueError(f"{k!r} is not a device attribute name such as 'dra.net/rdma'")
        return v

    @model_validator(mode="after")
    def _forms(self) -> Dra:
        if self.extendedResourceName is not None:
            if self.alignWithGpus:
                raise ValueError("alignWithGpus needs one claim holding GPUs and NICs; with extendedResourceName "
                                 "the scheduler makes its own claim, which cannot be aligned")
            if self.allocationMode != "ExactCount":
                raise ValueError("extendedResourceName allocates an exact count (the request); use ExactCount")
            if self.count is not None:
                raise ValueError("with extendedResourceName the count is fabric.resources[<name>]; drop dra.count")
            return self
        if self.allocationMode == "ExactCount" and self.count is None:
            raise ValueError("allocationMode ExactCount needs count (devices per pod or per node)")
        if self.allocationMode == "All" and self.count is not None:
            raise ValueError("allocationMode All takes every matching device; drop count")
        if self.alignWithGpus and self.countPer != "node":
            raise ValueError("alignWithGpus claims a node's GPUs and NICs together; set countPer: node")
        return self

    @property
    def extended(self) -> bool:
        """KEP-5004: pods request an extended resource the DeviceClass backs; no claim is injected."""
        return self.extendedResourceName is not None

    @property
    def expected_attributes(self) -> dict[str, str | bool | int]:
        if self.deviceAttributes:
            return dict(self.deviceAttributes)
        return {f"{DRANET_DRIVER}/rdma": True} if self.driver == DRANET_DRIVER else {}


class Fabric(_Strict):
    type: FabricType
    ncclNet: str | None = Field(
        default=None,
        description="NCCL_NET that makes NCCL fail instead of falling back; defaults per fabric type.",
    )
    resources: dict[str, Annotated[int, Field(ge=1)]] = Field(default_factory=dict)
    networks: list[str] = Field(default_factory=list)
    hcas: list[str] = Field(default_factory=list)
    socketIfname: str | None = None
    devicePlugin: DevicePlugin | None = None
    topologyLabel: str | None = None
    networkMapping: dict[str, str] = Field(default_factory=dict)
    dra: Dra | None = Field(default=None, description="The fabric is offered through DRA (resource.k8s.io/v1).")
    ibGidIndex: int | None = Field(default=None, ge=0, description="NCCL_IB_GID_INDEX for RoCE, when fixed.")
    netPlugin: str | None = Field(default=None, description="Library the NCCL net plugin ships in.")
    env: dict[str, str] = Field(default_factory=dict, description="Further NCCL/libfabric variables.")

    @field_validator("resources")
    @classmethod
    def _resource_names(cls, v: dict[str, int]) -> dict[str, int]:
        for name in v:
            if not _RESOURCE_NAME.match(name) or "/" not in name:
                raise ValueError(
                    f"{name!r} is not an extended resource name; use a domain-prefixed name such as "
                    "'rdma/ib' or 'vpc.amazonaws.com/efa'"
                )
        return v

    @field_validator("networks")
    @classmethod
    def _network_names(cls, v: list[str]) -> list[str]:
        for n in v:
            parts = n.split("/")
            if len(parts) > 2 or not all(dnsnames.is_label(p) for p in parts):
                raise ValueError(f"{n!r} is not a network name; use 'name' or 'namespace/name'")
        return v

    @field_validator("env")
    @classmethod
    def _env_forbids_fallback(cls, v: dict[str, str]) -> dict[str, str]:
        if v.get("NCCL_IB_DISABLE") == "1":
            raise ValueError("env NCCL_IB_DISABLE=1 forces the socket fallback this profile exists to prevent")
        if "NCCL_NET" in v:
            raise ValueError("set the network with fabric.ncclNet, not env NCCL_NET")
        if v.get("NCCL_IGNORE_NET_MISMATCH", "0") != "0":
            raise ValueError(
                "env NCCL_IGNORE_NET_MISMATCH other than 0 lets ranks that see fewer NICs run slow instead of failing"
            )
        return v

    @model_validator(mode="after")
    def _socket_ifname_avoids_excluded(self) -> Fabric:
        s = self.socketIfname
        if not s:
            return self
        ifs = IfnameList.parse(s)
        for ex in self.spec.socket_ifname_exclude:
            iface = f"{ex}0"
            if not ifs.exclude and not ifs.excludes(iface):
                what = "EKS Pod Identity's link-local" if self.type == "efa" else f"fabric {self.type}'s excluded"
                raise ValueError(
                    f"socketIfname {s!r} matches {what} {iface}; name the node "
                    f"interfaces (for example eth0) or exclude it (^lo,docker,{ex})"
                )
        return self

    @model_validator(mode="after")
    def _consistent(self) -> Fabric:
        if not self.spec.has_fabric and (self.resources or self.networks or self.hcas or self.ncclNet):
            raise ValueError("fabric type 'none' cannot carry resources, networks, hcas or ncclNet")
        if self.networkMapping and not self.topologyLabel:
            raise ValueError("networkMapping needs topologyLabel (the node label whose values it maps)")
        d = self.dra
        if d is not None:
            if not self.spec.has_fabric:
                raise ValueError("fabric type 'none' cannot be offered through dra")
            if self.devicePlugin is not None:
                raise ValueError("set fabric.devicePlugin or fabric.dra, not both: a node may not offer one fabric "
                                 "from a device plugin and a DRA driver (name the driver in dra.driverDaemonSet)")
            if d.extended:
                if set(self.resources) != {d.extendedResourceName}:
                    raise ValueError(f"dra.extendedResourceName {d.extendedResourceName!r} must be the one key of "
                                     "fabric.resources (its count is what each pod requests)")
            elif self.resources:
                raise ValueError("a fabric claimed through DRA is not an extended resource: drop fabric.resources "
                                 "(or set dra.extendedResourceName for the KEP-5004 form)")
        return self

    @property
    def offered_by(self) -> Literal["device-plugin", "dra-claim", "dra-extended-resource", "none"]:
        """How nodes offer this fabric to pods."""
        if not self.has_fabric:
            return "none"
        if self.dra is None:
            return "device-plugin"
        return "dra-extended-resource" if self.dra.extended else "dra-claim"

    @property
    def fabric_daemonset(self) -> DevicePlugin | None:
        """The DaemonSet that offers the fabric on each node: the device plugin, or the DRA driver."""
        if self.devicePlugin is not None:
            return self.devicePlugin
        return self.dra.driverDaemonSet if self.dra is not None else None

    @property
    def dra_count(self) -> int | None:
        """Devices one pod (or node) is allocated: dra.count, or the KEP-5004 request; None for All."""
        d = self.dra
        if d is None:
            return None
        if d.extended and d.extendedResourceName:
            return self.resources.get(d.extendedResourceName)
        return d.count

    @property
    def spec(self) -> FabricSpec:
        """Everything that follows from the fabric's type (fabricguard/fabrics/<type>.py)."""
        return fabrics.spec_of(self.type)

    @property
    def effective_nccl_net(self) -> str | None:
        return self.ncclNet if self.ncclNet is not None else self.spec.nccl_net

    @property
    def expected_transports(self) -> frozenset[Transport]:
        return self.spec.transports

    @property
    def has_fabric(self) -> bool:
        return self.spec.has_fabric

    @property
    def network_annotation_style(self) -> Literal["gke", "multus", "none"]:
        if not self.networks or self.dra is not None:
            return "none"  # DRANET moves the NICs into the pod itself: no multi-network annotation
        return self.spec.network_annotation


class Baseline(_Strict):
    allReduceBusBwGBps: float | None = Field(default=None, gt=0)
    floorFraction: float = Field(default=0.8, gt=0, le=1)
    stepTimeSeconds: float | None = Field(default=None, gt=0, description="Median step time on the fabric.")
    stepTolerance: float = Field(
        default=1.2, ge=1, description="A median step time above stepTimeSeconds x this is degraded."
    )
    totalTimeSeconds: float | None = Field(default=None, gt=0)
    storageWriteMBps: float | None = Field(
        default=None, gt=0, description="Expected checkpoint write rate of the storage probe (all ranks, fsync in)."
    )
    storageReadMBps: float | None = Field(default=None, gt=0, description="Expected read-back rate, all ranks.")
    ioShareLimit: float = Field(default=0.25, gt=0, lt=1, description="A job spending more than this share of its "
                                "time in I/O phases slower than the storage floor is storage-bound (verify-job).")
    lustreRpcLatencyMs: float | None = Field(
        default=None,
        gt=0,
        description="Mean Lustre client RPC latency (req_waittime) the pool's nodes see when healthy; the "
        "Lustre-latency alert fires when a node stays above it.",
    )
    crossBlockFactor: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="Fraction of allReduceBusBwGBps a gang keeps when it spans topology blocks (measured, e.g. by a "
        "canary placed across two blocks); the placement simulation uses it.",
    )

    @property
    def busbw_floor_gbps(self) -> float | None:
        if self.allReduceBusBwGBps is None:
            return None
        return self.allReduceBusBwGBps * self.floorFraction


CanaryCollective = Literal["all_reduce", "all_gather", "reduce_scatter"]


def _default_collectives() -> list[CanaryCollective]:
    return ["all_reduce"]


class CanarySizes(_Strict):
    """Message sizes of the canary's collective probe (nccl-tests' -b, -e, -f)."""

    minBytes: str = "1M"
    maxBytes: str = "256M"
    stepFactor: float = Field(default=2.0, gt=1)

    @field_validator("minBytes", "maxBytes")
    @classmethod
    def _size(cls, v: str) -> str:
        if not _BYTES.match(v):
            raise ValueError(f"{v!r} is not a size; write it like 1M, 256M or 1G")
        return v


class Canary(_Strict):
    """A small two-node job that asks for the pool's fabric on a schedule, so a broken fabric is found first."""

    enabled: bool = True
    interval: str = Field(default="10m", description="Time between canary starts.")
    pendingTimeout: str = Field(default="5m", description="Pending longer than this is unschedulable.")
    runTimeout: str = Field(default="15m", description="activeDeadlineSeconds of each canary pod.")
    nodes: int = Field(default=2, ge=2, description="Pods, one per node.")
    gpusPerPod: int = Field(default=1, ge=1, description="GPUs (and torchrun processes) per canary pod.")
    collectives: list[CanaryCollective] = Field(default_factory=_default_collectives, min_length=1)
    sizes: CanarySizes = Field(default_factory=CanarySizes)
    storageSize: str = Field(default="1G", description="Checkpoint bytes per node for the storage probe.")
    priorityClassName: str = "fabricguard-canary"
    queue: str | None = Field(
        default=None, description="LocalQueue without the fabric check; none: the canary bypasses Kueue."
    )
    flavors: list[str] = Field(
        default_factory=list, description="Kueue ResourceFlavors this canary gates (default: the pool's name)."
    )
    image: str | None = Field(default=None, description="Canary image (default: the controller's own image).")

    @field_validator("interval", "pendingTimeout", "runTimeout")
    @classmethod
    def _duration(cls, v: str) -> str:
        if duration_seconds(v) <= 0:
            raise ValueError(f"{v!r} must be longer than zero")
        return v

    @field_validator("storageSize")
    @classmethod
    def _storage(cls, v: str) -> str:
        if not _BYTES.match(v):
            raise ValueError(f"{v!r} is not a size; write it like 256M or 1G")
        return v

    @field_validator("queue", "priorityClassName")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        if v is not None and not dnsnames.is_label(v):
            raise ValueError(f"{v!r} is not a valid name (lowercase letters, digits and '-')")
        return v

    @model_validator(mode="after")
    def _timeouts(self) -> Canary:
        if duration_seconds(self.pendingTimeout) >= duration_seconds(self.interval):
            raise ValueError("pendingTimeout must be shorter than interval, or a stuck canary hides the next one")
        return self

    @property
    def interval_s(self) -> int:
        return duration_seconds(self.interval)

    @property
    def pending_timeout_s(self) -> int:
        return duration_seconds(self.pendingTimeout)

    @property
    def run_timeout_s(self) -> int:
        return duration_seconds(self.runTimeout)


_BUDGET = re.compile(r"^(?P<n>[0-9]+(\.[0-9]+)?)(?P<unit>%|h)$")


class Quarantine(_Strict):
    """How many of a pool's nodes proof may take out of service at once, and the breaker behind that budget."""

    maxNodes: int | None = Field(default=None, ge=0, description="At most this many nodes quarantined at once.")
    maxPercent: float = Field(default=10.0, ge=0, le=100,
                              description="At most this share of the pool's nodes quarantined at once (the "
                              "smaller of this and maxNodes applies; never below the largest admitted gang).")
    breakerPercent: float = Field(default=20.0, gt=0, le=100,
                                  description="Nodes newly failing pair tests (suspects and convictions) within "
                                  "breakerWindow above this share of the pool open the breaker (EKS repair stops "
                                  "above 20% unhealthy): nothing more is quarantined, an alert fires, a person "
                                  "resets it.")
    breakerWindow: str = Field(default="1h", description="The breaker's sliding window.")
    retestAfter: str = Field(default="1h", description="A quarantined node is re-tested this long after its "
                             "conviction; a pass with a known-good node releases it.")

    @field_validator("breakerWindow", "retestAfter")
    @classmethod
    def _duration(cls, v: str) -> str:
        if duration_seconds(v) <= 0:
            raise ValueError(f"{v!r} must be longer than zero")
        return v


class Proof(_Strict):
    """Every node of the pool proven by a pair test within ``every`` (controller/proof.py)."""

    every: str = Field(default="24h", description="Each node's fabric data path is proven by a pair test this "
                       "often.")
    pairs: Literal["topology", "random"] = Field(
        default="topology", description="topology: alternate intra-block and cross-block partners by the pool's "
        "coarsest topology label; random: any idle partner.")
    budget: str = Field(default="0.5%", description="GPU-hours per pool per UTC day the pair tests may spend: "
                        "a share of the pool's GPU-hours (0.5%) or an amount (40h).")
    pairDuration: str = Field(default="10m", description="GPU time a pair test is charged before it finishes "
                              "(its real run time once it has).")
    gpusPerPod: int | None = Field(default=None, ge=1, description="GPUs per pair pod (default: gpusPerNode, so "
                                   "every GPU's NIC, every rail, is in the test).")
    maxConcurrent: int = Field(default=8, ge=1, description="Pair tests of the pool running at once, at most.")
    priorityClassName: str = Field(default="fabricguard-scavenger", description="A PriorityClass below every "
                                   "workload's, preemptionPolicy Never: pair tests never take work's place.")
    queue: str | None = Field(default=None, description="LocalQueue the pair tests go through (Kueue, at the "
                              "scavenger WorkloadPriorityClass); none: they bypass Kueue.")
    lifecycle: bool = Field(default=True, description="A new node is proven before its readiness taint lifts: "
                            "the bootstrap NodeReadinessRule also requires FabricProven=True.")
    lifecycleTimeout: str = Field(default="2h", description="A new node not proven this long after it joined "
                                  "gets FabricProven=False (ProofTimedOut), a Warning Event and an alert.")
    reproveOnLabels: list[str] = Field(
        default_factory=lambda: ["nvidia.com/cuda.driver-version.full"],
        description="Node labels whose change (driver, firmware, device plugin version) takes a proven node out of "
        "'proven' until a pair test proves it again; the node's kernel (status.nodeInfo.kernelVersion) always "
        "counts. NIC firmware has no standard label: add the one your NFD local feature file writes.")
    quarantine: Quarantine = Field(default_factory=Quarantine)

    @field_validator("every", "pairDuration", "lifecycleTimeout")
    @classmethod
    def _duration(cls, v: str) -> str:
        if duration_seconds(v) <= 0:
            raise ValueError(f"{v!r} must be longer than zero")
        return v

    @field_validator("budget")
    @classmethod
    def _budget(cls, v: str) -> str:
        m = _BUDGET.match(str(v).strip())
        if m is None or float(m.group("n")) <= 0:
            raise ValueError(f"{v!r} is not a budget; write a share of the pool's GPU-hours (0.5%) or GPU-hours "
                             "per day (40h)")
        if m.group("unit") == "%" and float(m.group("n")) > 100:
            raise ValueError(f"{v!r}: a share cannot exceed 100%")
        return v.strip()

    @field_validator("priorityClassName", "queue")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        if v is not None and not dnsnames.is_label(v):
            raise ValueError(f"{v!r} is not a valid name (lowercase letters, digits and '-')")
        return v

    @field_validator("reproveOnLabels")
    @classmethod
    def _labels(cls, v: list[str]) -> list[str]:
        bad = [k for k in v if not _RESOURCE_NAME.match(k)]
        if bad:
            raise ValueError(f"{bad} are not label keys")
        return v

    @property
    def every_s(self) -> int:
        return duration_seconds(self.every)

    @property
    def pair_s(self) -> int:
        return duration_seconds(self.pairDuration)

    @property
    def lifecycle_timeout_s(self) -> int:
        return duration_seconds(self.lifecycleTimeout)

    def budget_gpu_hours(self, nodes: int, gpus_per_node: int) -> float:
        """The pool's daily GPU-hour budget for pair tests."""
        m = _BUDGET.match(self.budget)
        assert m is not None  # validated
        n = float(m.group("n"))
        return n if m.group("unit") == "h" else nodes * gpus_per_node * 24 * n / 100


class QueueTopology(_Strict):
    level: str
    mode: Literal["required", "preferred", "unconstrained"] = "preferred"
    sliceLevel: str | None = None
    sliceSize: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _slices(self) -> QueueTopology:
        if (self.sliceLevel is None) != (self.sliceSize is None):
            raise ValueError("sliceLevel and sliceSize go together (Kueue requires slice-size with slices)")
        return self


class Queue(_Strict):
    name: str
    topology: QueueTopology | None = None
    namespaces: list[str] = Field(
        default_factory=list,
        description="Team namespaces: each gets a LocalQueue of this name; the ClusterQueue admits only them "
        "(empty: every namespace may point a LocalQueue at it).",
    )
    fabricResources: Literal["quota", "exclude"] = Field(
        default="quota",
        description="Give the fabric resources the webhook injects a Kueue quota, or list their prefixes in "
        "Kueue's resources.excludeResourcePrefixes (Kueue's default BlockUndeclared refuses any resource that is "
        "neither covered nor excluded).",
    )
    cohort: str | None = None

    @field_validator("namespaces")
    @classmethod
    def _namespaces(cls, v: list[str]) -> list[str]:
        bad = [n for n in v if not dnsnames.is_label(n)]
        if bad:
            raise ValueError(f"{bad} are not valid namespace names (lowercase DNS labels)")
        if len(set(v)) != len(v):
            raise ValueError("a namespace is listed twice")
        return v

    @field_validator("name")
    @classmethod
    def _dns(cls, v: str) -> str:
        problem = dnsnames.label_problem(v, "LocalQueue name")
        if problem:
            raise ValueError(problem)
        return v


Mode = Literal["observe", "enforce"]
MODES: tuple[Mode, ...] = ("observe", "enforce")


class BlastRadius(_Strict):
    """How much of a pool fabricguard may close for one check before it assumes its own fault (fabricguard/breaker.py).

    Past ``max(minimum, fraction x nodes)`` nodes newly failing one agent check within ``window`` (or fewer
    nodes left ``FabricReady=True`` than the largest admitted gang needs), the controller opens that check's
    breaker for the pool: it stops tainting (the pool's NodeReadinessRules go ``dryRun``, the readiness taints
    of the nodes failing that check are removed) and stops holding workloads for it, raises a critical alert and
    an Event naming the check and the nodes, and waits for a person (``fabricguard breaker reset``).
    """

    fraction: float = Field(default=0.10, ge=0, le=1, description="Share of the pool's nodes (0.1: 10%).")
    minimum: int = Field(default=1, ge=0, description="Nodes always allowed, however small the pool.")
    window: str = Field(default="1h", description="How far back a failure counts as new (90s, 10m, 1h).")
    keepLargestGang: bool = Field(
        default=True, description="Trip as well when fewer ready nodes are left than the largest admitted gang.")

    @field_validator("window")
    @classmethod
    def _window(cls, v: str) -> str:
        if duration_seconds(v) <= 0:
            raise ValueError(f"{v!r} must be longer than 0 seconds")
        return v

    @property
    def window_s(self) -> int:
        return duration_seconds(self.window)


class Pool(_Strict):
    name: str
    nodeSelector: dict[str, str] = Field(min_length=1)
    tolerations: list[Toleration] = Field(default_factory=list)
    gpusPerNode: int = Field(ge=1)
    gpuResource: str = names.GPU_RESOURCE
    architecture: Architecture = Architecture.amd64
    fabric: Fabric
    baseline: Baseline = Field(default_factory=Baseline)
    queue: Queue | None = None
    lustre: bool = Field(default=True, description="Mount spec.storage.lustre in this pool's workloads.")
    shmSize: str | None = Field(
        default=None,
        description="sizeLimit of the memory-backed /dev/shm injected into workloads (a Kubernetes quantity).",
    )
    nodes: int | None = Field(
        default=None, ge=1, description="Nodes in the pool's reservation: sizes its Kueue quota."
    )
    nodeAllocatable: dict[str, str] = Field(
        default_factory=dict,
        description="Per-node allocatable of further resources that workloads request (cpu, memory), quoted "
        "in the pool's Kueue flavor so that BlockUndeclared admits them.",
    )
    topologyLevels: list[str] = Field(
        default_factory=list,
        max_length=16,
        description="Node labels of the pool's Kueue Topology, coarsest first (e.g. block, sub-block, host); "
        "empty: the fabric's topologyLabel, then kubernetes.io/hostname.",
    )

    @field_validator("nodeAllocatable")
    @classmethod
    def _allocatable(cls, v: dict[str, str]) -> dict[str, str]:
        for name, qty in v.items():
            if not _RESOURCE_NAME.match(name):
                raise ValueError(f"{name!r} is not a Kubernetes resource name")
            if not _QUANTITY.match(str(qty)):
                raise ValueError(f"{name}: {qty!r} is not a Kubernetes quantity such as '2000Gi' or '200'")
        return v

    @field_validator("topologyLevels")
    @classmethod
    def _levels(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("a topology level is listed twice")
        if HOSTNAME_LABEL in v[:-1]:
            raise ValueError(f"{HOSTNAME_LABEL} may only be the last (finest) topology level")
        return v

    @model_validator(mode="after")
    def _queue_levels_in_topology(self) -> Pool:
        # The webhook asks Kueue for these levels; a level outside the flavor's Topology is never satisfiable.
        topo = self.queue.topology if self.queue else None
        if topo is None or not self.topologyLevels:
            return self
        for level in (topo.level, topo.sliceLevel):
            if level is not None and level not in self.topologyLevels:
                raise ValueError(f"queue topology level {level!r} is not one of topologyLevels {self.topologyLevels}")
        return self

    def matches(self, node: dict[str, Any] | None) -> bool:
        """This pool's nodeSelector matches the Node's labels (see :meth:`PlatformProfile.pool_of`)."""
        return selector_matches(labels_of(node), self.nodeSelector)

    @property
    def topology_levels(self) -> list[str]:
        """The Kueue Topology levels of this pool, coarsest first; empty when the pool has no topology."""
        if self.topologyLevels:
            return list(self.topologyLevels)
        queue_level = self.queue.topology.level if self.queue and self.queue.topology else None
        coarse = self.fabric.topologyLabel or queue_level
        if coarse is None:
            return []
        return [coarse] if coarse == HOSTNAME_LABEL else [coarse, HOSTNAME_LABEL]
    canary: Canary | None = Field(
        default=None, description="The pool's canary (default: on for fabric pools with Lustre, else off)."
    )
    proof: Proof | None = Field(
        default=None, description="Coverage goal: every node proven by a pair test within proof.every, the bad one "
        "found by bisection and quarantined within a budget (controller/proof.py). Needs the pool's canary."
    )
    onHang: Literal["observe", "stop"] = Field(
        default="observe",
        description="When NCCL's RAS confirms a running managed job hung (counts mismatched and not advancing over "
        "two queries): observe (annotation, Event, metric, alert) or also stop it like onFallback: stop.",
    )
    onFallback: Literal["warn", "stop"] = Field(
        default="warn",
        description="When a running managed job's logs show sockets on this fabric pool: warn (annotation, "
        "Event, metric, alert) or also stop it (a Kueue job's Workload deactivated, another job suspended).",
    )
    podAdditions: PodAdditions | None = Field(
        default=None, description="This pool's pod additions, after spec.podAdditions (profile/cluster.py)."
    )
    mode: Mode | None = Field(
        default=None,
        description="observe: every gate reports what it would do (the webhook warns instead of denying, the "
        "Kueue check reports but never holds, the NodeReadinessRules run dryRun, agent taints are not written); "
        "enforce: they act. Unset: the install's --mode (a new install observes).")
    blastRadius: BlastRadius = Field(default_factory=BlastRadius)
    readinessTaintPrefix: Literal["readiness.k8s.io/", "startup-taint.cluster-autoscaler.kubernetes.io/"] = Field(
        default="readiness.k8s.io/",
        description="Prefix of the bootstrap taint new nodes of this pool register with (<prefix>fabric-unverified). "
        "readiness.k8s.io/: the Node Readiness Controller removes it. startup-taint.cluster-autoscaler.kubernetes.io/:"
        " for a pool a managed autoscaler (GKE, AKS) scales from zero, which ignores only that prefix when it "
        "simulates a new node; NRC refuses it (NRC #279), so the agent removes it (rendered with --manage-taints).")

    def blast_budget(self, keep: int = 0) -> breaker.Budget:
        """The pool's blast-radius budget (``blastRadius``): the one number the controller's breakers enforce and the
        agents' taint slots count (``controller/blast.py``, ``agent/taint_slots.py``). ``keep``: the largest admitted
        gang (counted only with ``keepLargestGang``)."""
        br = self.blastRadius
        return breaker.Budget(br.fraction, br.minimum, br.window_s, keep if br.keepLargestGang else 0)

    @property
    def bootstrap_taint(self) -> str:
        """The key of the taint a new node of this pool registers with until its fabric is proven."""
        return names.TAINT_STARTUP_UNVERIFIED if self.readinessTaintPrefix == names.STARTUP_TAINT_PREFIX \
            else names.TAINT_UNVERIFIED

    @property
    def taint_keys(self) -> tuple[str, str]:
        """(bootstrap, continuous) taint keys of this pool."""
        return self.bootstrap_taint, names.TAINT_DEGRADED

    @property
    def startup_taint(self) -> bool:
        """The bootstrap taint is the autoscaler's startup taint: the agent, not NRC, removes it."""
        return self.bootstrap_taint == names.TAINT_STARTUP_UNVERIFIED

    @field_validator("name")
    @classmethod
    def _dns(cls, v: str) -> str:
        # The pool's name is written as the value of label fabricguard.io/pool on nodes' workloads and as a
        # ResourceFlavor's name: both limits hold (63 characters, an RFC 1123 label).
        problem = dnsnames.label_problem(v, "pool name")
        if problem is None and not dnsnames.is_label_value(v):
            problem = f"{v!r} cannot be a label value"
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("shmSize")
    @classmethod
    def _quantity(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                q = quantity.parse(v)
            except quantity.QuantityError as exc:
                raise ValueError(str(exc)) from None
            if q.amount <= 0:
                raise ValueError(f"{v!r} is not a positive Kubernetes quantity such as '250Gi'")
        return v

    @model_validator(mode="after")
    def _canary_fits(self) -> Pool:
        if self.canary is not None and self.canary.gpusPerPod > self.gpusPerNode:
            raise ValueError(
                f"canary.gpusPerPod {self.canary.gpusPerPod} exceeds gpusPerNode {self.gpusPerNode}"
            )
        if self.proof is not None and self.proof.gpusPerPod is not None and self.proof.gpusPerPod > self.gpusPerNode:
            raise ValueError(f"proof.gpusPerPod {self.proof.gpusPerPod} exceeds gpusPerNode {self.gpusPerNode}")
        d = self.fabric.dra
        if (self.canary is not None and d is not None and d.countPer == "node"
                and self.canary.gpusPerPod != self.gpusPerNode):
            raise ValueError(f"fabric.dra.countPer node: a GPU pod takes the whole node, so canary.gpusPerPod must "
                             f"be gpusPerNode ({self.gpusPerNode})")
        return self

    @property
    def claim_template_name(self) -> str | None:
        """The ResourceClaimTemplate of a pool whose fabric is claimed through DRA (None: no claim to inject)."""
        d = self.fabric.dra
        if d is None or d.extended:
            return None
        return d.claimTemplateName or f"fabricguard-{self.name}-fabric"

    @property
    def fabric_mode(self) -> str:
        """One line: how this pool's nodes offer the fabric and how a pod asks for it."""
        f = self.fabric
        d = f.dra
        mode = f.offered_by
        if mode == "none":
            return "no fabric: pods talk over the pod network"
        if mode == "device-plugin" or d is None:
            plugin = f"{f.devicePlugin.namespace}/{f.devicePlugin.daemonSet}" if f.devicePlugin else "a device plugin"
            res = ", ".join(f"{k}={v}" for k, v in f.resources.items()) or "nothing"
            return f"device plugin: {plugin} advertises {res} in node allocatable; GPU pods request it"
        driver = f"driver {d.driver}" + (f", DaemonSet {d.driverDaemonSet.namespace}/{d.driverDaemonSet.daemonSet}"
                                          if d.driverDaemonSet else "")
        if mode == "dra-extended-resource":
            return (f"DRA, KEP-5004: pods request {d.extendedResourceName}={f.dra_count}, backed by DeviceClass "
                    f"{d.deviceClassName} ({driver}); nodes list it in ResourceSlices, not in allocatable")
        amount = "every matching device" if d.allocationMode == "All" else f"{d.count}"
        per = "per node (GPU pods take whole nodes)" if d.countPer == "node" else "per GPU pod"
        align = (f"; GPUs ({d.alignWithGpus}) in the same claim, aligned on {PCIE_ROOT}" if d.alignWithGpus
                 else "")
        return (f"DRA claim: {amount} device(s) of DeviceClass {d.deviceClassName} {per} ({driver}), through "
                f"ResourceClaimTemplate {self.claim_template_name}{align}")


class LustreClientHealth(_Strict):
    """The Lustre client's own health in ``FabricReady`` (probes/lustre_client.py): health_check, imports
    FULL, no recent eviction, LNet NI and peer health."""

    enabled: bool = Field(default=True, description="Check the client's health on every node that mounts it.")
    evictionWindow: str = Field(default="1h", description="An eviction this recent fails the node's check.")
    minLnetHealth: int = Field(default=1000, ge=0, le=1000, description="LNet NI/peer health below this fails "
                               "(1000, LNet's maximum: any failure LNet recorded).")

    @field_validator("evictionWindow")
    @classmethod
    def _window(cls, v: str) -> str:
        duration_seconds(v)
        return v

    @property
    def eviction_window_seconds(self) -> int:
        return duration_seconds(self.evictionWindow)


class JobDirectory(_Strict):
    """The job's directory made writable by a non-root workload: an init container (``storage/jobdir.py``) that
    creates ``<namespace>/<job>`` and its log directories and gives them to the pod's runAsUser/fsGroup."""

    enabled: bool = Field(default=True, description="Inject the init container into every managed job that "
                          "mounts the job's directory (false: the kubelet creates it as root).")
    image: str | None = Field(default=None, description="Image with the fabricguard CLI for the init container "
                              "(default: the node agent's image, which the install passes to the webhook).")

    @field_validator("image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        problem = reference_problem(v) if v is not None else None
        if problem:
            raise ValueError(problem)
        return v


class Lustre(_Strict):
    claimName: str
    clientHealth: LustreClientHealth = Field(default_factory=LustreClientHealth)
    mountPath: str = "/mnt/lustre"
    subPath: str = "{namespace}/{job}"
    logDir: str = ".fabricguard/nccl"
    jobDirectory: JobDirectory = Field(default_factory=JobDirectory)
    volume: LustreVolume | None = Field(
        default=None, description="The file system behind claimName, for render install's static PV/PVC per namespace."
    )

    @field_validator("mountPath")
    @classmethod
    def _absolute(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError(f"mountPath {v!r} must be an absolute path")
        return v.rstrip("/") or "/"

    @field_validator("subPath")
    @classmethod
    def _placeholders(cls, v: str) -> str:
        unknown = set(re.findall(r"{([^}]*)}", v)) - {"namespace", "job"}
        if unknown:
            raise ValueError(f"subPath may use {{namespace}} and {{job}} only, not {sorted(unknown)}")
        if v.startswith("/") or ".." in v.split("/"):
            raise ValueError("subPath must be relative and must not contain '..'")
        return v


class Storage(_Strict):
    lustre: Lustre | None = None


class Inspector(_Strict):
    """NCCL's Inspector profiler plugin in every managed job, so its collectives' busbw is seen while it runs.

    The plugin (``libnccl-profiler-inspector.so``, built from the NCCL source matching the jobs' NCCL) reaches
    the pod as an OCI image volume (Kubernetes 1.36 GA; the image holds the file), an init container that copies
    it from an image into an emptyDir, or a directory on every node. The webhook sets NCCL_PROFILER_PLUGIN,
    NCCL_INSPECTOR_ENABLE=1 and a dump directory on the job's Lustre directory beside its NCCL logs; a job that
    sets NCCL_PROFILER_PLUGIN itself keeps its own (NCCL loads one profiler plugin)."""

    delivery: Literal["image", "initContainer", "hostPath"]
    image: str | None = Field(default=None, description="Image holding the plugin (delivery image, initContainer).")
    hostPath: str | None = Field(default=None, description="Node directory holding the plugin (delivery hostPath).")
    pluginFile: str = Field(default="libnccl-profiler-inspector.so",
                            description="The plugin's path inside the image or the host directory.")
    mountPath: str = Field(default="/opt/fabricguard/inspector", description="Where the pod sees the plugin.")
    dumpDir: str = Field(default=".fabricguard/inspector",
                         description="Records' directory, relative to the job's Lustre directory (beside logDir).")
    dumpInterval: str = Field(default="60s", description="NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS.")
    minMessageBytes: str = Field(default="1M", description="NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES: smaller is not kept.")
    ringSize: int = Field(default=8, ge=1, le=1024, description="NCCL_INSPECTOR_DUMP_COLL_RING_SIZE (2.30): the "
                          "collectives per communicator one dump writes at most.")
    largeMessageBytes: str = Field(default="64M", description="Collectives at least this large (nccl-tests' S) "
                                   "are judged; smaller ones measure latency.")
    belowFloorFor: str = Field(default="10m", description="A running job below its pool's floor this long is "
                               "annotated, told in an Event and alerted on.")
    pools: list[str] = Field(default_factory=list, description="Pools whose jobs get it (empty: every fabric pool "
                             "with Lustre).")
    enabled: bool = Field(default=True, description="Kill switch: false injects the plugin into no new job and "
                          "follows no job's records (the plugin is young: NVIDIA/nccl #1992, #2304), keeping the rest.")
    suspectRounds: int = Field(default=3, ge=1, le=20, description="Dump rounds a late rank or a slow node must hold "
                               "before the job is annotated and told (fabricguard.io/suspects).")
    hangAfter: str = Field(default="30m", description="A running job whose collectives stop advancing (Inspector "
                           "records) this long is checked for a hang through NCCL's RAS; set it longer than the "
                           "job's longest checkpoint or evaluation.")

    @model_validator(mode="after")
    def _source(self) -> Inspector:
        if self.delivery in ("image", "initContainer"):
            if not self.image:
                raise ValueError(f"delivery {self.delivery} needs image (the image that holds {self.pluginFile})")
            problem = reference_problem(self.image)
            if problem:
                raise ValueError(problem)
        if self.delivery == "hostPath" and not (self.hostPath or "").startswith("/"):
            raise ValueError("delivery hostPath needs hostPath, an absolute directory on every node")
        for name, path in (("mountPath", self.mountPath), ("pluginFile", "/" + self.pluginFile)):
            if not path.startswith("/") or ".." in path.split("/") or path.rstrip("/") != path:
                raise ValueError(f"{name} {path!r} must be an absolute path without '..' or a trailing '/'")
        if self.dumpDir.startswith("/") or ".." in self.dumpDir.split("/") or not self.dumpDir.strip("/"):
            raise ValueError("dumpDir must be relative to the job's Lustre directory and must not contain '..'")
        for f in ("minMessageBytes", "largeMessageBytes"):
            if not _BYTES.match(getattr(self, f)):
                raise ValueError(f"{f} {getattr(self, f)!r} is not a size; write it like 1M or 64M")
        for f in ("dumpInterval", "belowFloorFor", "hangAfter"):
            if duration_seconds(getattr(self, f)) <= 0:
                raise ValueError(f"{f} must be longer than zero")
        return self

    @property
    def interval_us(self) -> int:
        return duration_seconds(self.dumpInterval) * 1_000_000

    @property
    def below_floor_s(self) -> int:
        return duration_seconds(self.belowFloorFor)

    @property
    def hang_after_s(self) -> int:
        return duration_seconds(self.hangAfter)

    @property
    def min_bytes(self) -> int:
        return byte_size(self.minMessageBytes)

    @property
    def large_bytes(self) -> int:
        return byte_size(self.largeMessageBytes)


def byte_size(text: str) -> int:
    """``64M`` -> 67108864 (K, M, G are powers of 1024, as nccl-tests reads them)."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


class Metadata(_Strict):
    name: str
    environment: Environment = Environment.production
    labels: dict[str, str] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _dns(cls, v: str) -> str:
        problem = dnsnames.label_problem(v, "profile name")
        if problem:
            raise ValueError(problem)
        return v


class Spec(_Strict):
    storage: Storage = Field(default_factory=Storage)
    pools: list[Pool] = Field(min_length=1)
    defaultPool: str | None = None
    podAdditions: PodAdditions = Field(
        default_factory=PodAdditions, description="What every injected pod of this cluster needs (profile/cluster.py)."
    )
    fabricDaemonSets: list[FabricDaemonSet] = Field(
        default_factory=list,
        description="DaemonSets besides the device plugins that fabric nodes need before they can be ready.",
    )
    inspector: Inspector | None = Field(
        default=None, description="NCCL Inspector in managed jobs: per-collective busbw while they run."
    )

    @model_validator(mode="after")
    def _pools(self) -> Spec:
        seen: set[str] = set()
        for p in self.pools:
            if p.name in seen:
                raise ValueError(f"pool name {p.name!r} appears twice")
            seen.add(p.name)
        if self.defaultPool is not None and self.defaultPool not in seen:
            raise ValueError(f"defaultPool {self.defaultPool!r} is not a pool; known pools: {sorted(seen)}")
        self._shared_queues_agree()
        self._pools_disjoint()
        if self.inspector is not None:
            if self.storage.lustre is None:
                raise ValueError("inspector needs spec.storage.lustre: its records go to the job's Lustre directory")
            unknown = sorted(set(self.inspector.pools) - seen)
            if unknown:
                raise ValueError(f"inspector.pools names unknown pools {unknown}; known pools: {sorted(seen)}")
        flavors: dict[str, str] = {}
        for p in self.pools:
            if p.canary is not None and p.canary.enabled and (self.storage.lustre is None or not p.lustre):
                raise ValueError(
                    f"pool {p.name!r}: canary.enabled needs the pool's Lustre (spec.storage.lustre and "
                    "lustre: true), where the canary's ranks leave their NCCL logs; set canary.enabled: false"
                )
            for f in p.canary.flavors if p.canary else ():
                if f in flavors:
                    raise ValueError(f"ResourceFlavor {f!r} is gated by two pools' canaries: {flavors[f]}, {p.name}")
                flavors[f] = p.name
        return self

    def _pools_disjoint(self) -> None:
        # A node belongs to at most one pool: two selectors that one node's labels could both satisfy (no key
        # that both name with different values) would make its pool depend on who asks.
        for i, a in enumerate(self.pools):
            for b in self.pools[i + 1:]:
                if selectors_overlap(a.nodeSelector, b.nodeSelector):
                    raise ValueError(
                        f"pools {a.name!r} and {b.name!r} can both match one node (nodeSelector "
                        f"{a.nodeSelector} and {b.nodeSelector}); give them one label key with different values, "
                        "so every node belongs to at most one pool"
                    )

    def _shared_queues_agree(self) -> None:
        # Pools that name one queue become flavors of one ClusterQueue: its settings cannot differ per pool.
        first: dict[str, Pool] = {}
        for p in self.pools:
            if p.queue is None:
                continue
            other = first.setdefault(p.queue.name, p)
            if other is not p and other.queue is not None:
                theirs = other.queue.model_dump(exclude={"topology"})
                mine = p.queue.model_dump(exclude={"topology"})
                if theirs != mine:
                    raise ValueError(
                        f"pools {other.name!r} and {p.name!r} share queue {p.queue.name!r} but set its namespaces, "
                        "fabricResources or cohort differently; one ClusterQueue has one value of each"
                    )


class PlatformProfile(_Strict):
    apiVersion: Literal["fabricguard.io/v1alpha1"]
    kind: Literal["PlatformProfile"]
    metadata: Metadata
    spec: Spec

    @model_validator(mode="after")
    def _proof_needs_canary(self) -> PlatformProfile:
        for i, p in enumerate(self.spec.pools):
            if p.proof is not None and self.canary(p) is None:
                raise ValueError(f"spec.pools[{i}] ({p.name}): proof runs pair tests with the canary's image, probe "
                                 "and Lustre: enable the pool's canary (and spec.storage.lustre) or remove proof")
        return self

    def pool(self, name: str | None = None) -> Pool:
        """The named pool, or the default pool; ``UnknownPoolError`` lists the known ones."""
        wanted = name or self.spec.defaultPool
        if wanted is None:
            if len(self.spec.pools) == 1:
                return self.spec.pools[0]
            raise UnknownPoolError(None, self.pool_names)
        for p in self.spec.pools:
            if p.name == wanted:
                return p
        raise UnknownPoolError(wanted, self.pool_names)

    @property
    def pool_names(self) -> list[str]:
        return [p.name for p in self.spec.pools]

    @property
    def taint_keys(self) -> tuple[str, ...]:
        """Every readiness taint key the profile's pools use (what node agents and DaemonSets must tolerate)."""
        keys = [k for p in self.spec.pools for k in p.taint_keys]
        return tuple(dict.fromkeys([*names.TAINT_KEYS, *keys]))

    def mode_of(self, pool: Pool, default: str = "enforce") -> Mode:
        """The pool's mode: its own ``mode`` field, else the install's (``--mode`` of each component; anything
        but ``observe`` enforces)."""
        return pool.mode or ("observe" if default == "observe" else "enforce")

    def pool_of(self, node: dict[str, Any] | None) -> Pool | None:
        """The pool a Node belongs to: the one whose nodeSelector its labels match (pools are disjoint, so at
        most one does), else None. The one definition of node membership every part uses."""
        return next((p for p in self.spec.pools if p.matches(node)), None)

    def canary(self, pool: Pool) -> Canary | None:
        """The pool's effective canary: its block, or the defaults on a fabric pool with Lustre; None: no canary."""
        if pool.canary is not None:
            return pool.canary if pool.canary.enabled else None
        if pool.fabric.has_fabric and pool.lustre and self.spec.storage.lustre is not None:
            d = pool.fabric.dra
            # A pool that offers its fabric per node gives it only to pods that take the whole node.
            return Canary(gpusPerPod=pool.gpusPerNode) if d is not None and d.countPer == "node" else Canary()
        return None

    def pod_additions(self, pool: Pool) -> PodAdditions:
        """The cluster's pod additions followed by the pool's."""
        return self.spec.podAdditions.merged(pool.podAdditions)

    def fabric_daemonsets(self) -> list[FabricDaemonSet]:
        """Every DaemonSet a fabric node needs before it is ready: the pools' device plugins and DRA drivers, then
        the listed."""
        out: list[FabricDaemonSet] = []
        for p in self.spec.pools:
            dp = p.fabric.fabric_daemonset  # the device plugin, or the DRA driver
            if p.fabric.has_fabric and dp is not None:
                role: Literal["device-plugin", "dra-driver"] = "dra-driver" if p.fabric.dra else "device-plugin"
                ds = FabricDaemonSet(namespace=dp.namespace, name=dp.daemonSet, role=role)
                if ds not in out:
                    out.append(ds)
        out += [d for d in self.spec.fabricDaemonSets if d not in out]
        return out

    def inspector_for(self, pool: Pool) -> Inspector | None:
        """The Inspector settings that apply to ``pool``'s jobs; None: the pool's jobs do not get the plugin."""
        ins = self.spec.inspector
        if ins is None or not ins.enabled or not pool.fabric.has_fabric or not pool.lustre \
                or self.spec.storage.lustre is None:
            return None
        if ins.pools and pool.name not in ins.pools:
            return None
        return ins

    def canary_flavors(self, pool: Pool) -> list[str]:
        """Kueue ResourceFlavors whose workloads wait for this pool's canary."""
        return list(pool.canary.flavors) if pool.canary and pool.canary.flavors else [pool.name]

    def advisories(self) -> list[str]:
        """Valid but risky choices, worth a warning in ``profile check``."""
        out: list[str] = []
        for i, p in enumerate(self.spec.pools):
            where = f"spec.pools[{i}] ({p.name})"
            f = p.fabric
            if f.has_fabric and not f.resources and f.spec.needs_resources and f.dra is None:
                out.append(
                    f"{where}: fabric {f.type} requests no extended resources; a pod that asks for nothing "
                    "is never refused, so a broken device plugin goes unnoticed"
                )
            if f.has_fabric and f.devicePlugin is None and f.dra is None:
                out.append(f"{where}: no fabric.devicePlugin; the doctor cannot check that it is ever ready")
            if f.dra is not None and f.dra.driverDaemonSet is None:
                out.append(f"{where}: no fabric.dra.driverDaemonSet; the doctor cannot check that the DRA driver "
                           "is ever ready")
            if f.dra is not None and f.networks:
                out.append(f"{where}: fabric.networks is ignored on a DRA pool (the driver moves the NICs into the "
                           "pod; no networking.gke.io/interfaces annotation is written)")
            if f.has_fabric and self.canary(p) is None:
                out.append(f"{where}: no canary; a broken fabric is found only when a job runs on it")
            if f.has_fabric and p.baseline.allReduceBusBwGBps is None:
                out.append(f"{where}: no baseline.allReduceBusBwGBps; bandwidth cannot be judged, only transport")
            pr = p.proof
            if pr is not None and pr.queue is None:
                out.append(f"{where}: proof.queue is not set; pair tests bypass Kueue (they still never preempt, at "
                           f"PriorityClass {pr.priorityClassName}), so Kueue's quota does not see them")
            if pr is not None and p.nodes:
                # A full round proves two nodes per pair, each pair charged pairDuration on 2 x gpusPerPod GPUs.
                gpus = pr.gpusPerPod or p.gpusPerNode
                per_round = math.ceil(p.nodes / 2) * 2 * gpus * pr.pair_s / 3600
                affordable = pr.budget_gpu_hours(p.nodes, p.gpusPerNode) * pr.every_s / 86400
                if per_round > affordable:
                    out.append(f"{where}: proving all {p.nodes} nodes costs {per_round:.0f} GPU-h per proof.every "
                               f"({pr.every}) at pairDuration {pr.pairDuration}, more than the budget's "
                               f"{affordable:.0f}: raise proof.budget, lengthen proof.every or shorten pairDuration")
            if self.inspector_for(p) is not None and p.baseline.allReduceBusBwGBps is None:
                out.append(f"{where}: its jobs get NCCL's Inspector but the pool has no baseline.allReduceBusBwGBps; "
                           "their busbw is shown, never judged")
        ins = self.spec.inspector
        if ins is not None and ins.delivery == "image":
            out.append("spec.inspector: delivery image uses an OCI image volume (Kubernetes 1.36 GA, beta and off by "
                       "default before); on an older cluster use delivery initContainer")
        if ins is not None and ins.interval_us < 10_000_000:
            out.append(f"spec.inspector: dumpInterval {ins.dumpInterval} writes often: each dump adds up to ringSize "
                       "records per communicator to every rank's file on Lustre")
        return out


def selectors_overlap(a: dict[str, str], b: dict[str, str]) -> bool:
    """True when one node's labels can satisfy both ``matchLabels`` selectors: no key has two values."""
    return all(a[k] == b[k] for k in a.keys() & b.keys())


class UnknownPoolError(KeyError):
    def __init__(self, name: str | None, known: list[str]) -> None:
        self.name = name
        self.known = known
        if name is None:
            msg = f"no pool named and the profile has no spec.defaultPool; choose one of: {', '.join(known)}"
        else:
            msg = f"unknown pool {name!r}; known pools: {', '.join(known)}"
        super().__init__(msg)

    def __str__(self) -> str:
        return str(self.args[0])
