"""What a profile says about the cluster it is installed on: pod additions, the Lustre volume, fabric DaemonSets.

- ``PodAdditions`` (``spec.podAdditions`` and ``spec.pools[].podAdditions``): what this cluster's pods need that no
  fabric type implies (a pull secret for the registry, a CA bundle volume, a proxy variable, a toleration of a
  site-wide taint). The webhook adds it to every workload it injects and the canary carries it too, so a canary
  that passes ran exactly what a job will run.
- ``LustreVolume`` (``spec.storage.lustre.volume``): the file system behind the profile's Lustre claim, as a static
  PersistentVolume source (CSI driver, ``volumeHandle``, attributes). ``render install`` binds one claim per
  namespace that mounts Lustre to it, so fabricguard-system and the training namespaces read the same file
  system (a dynamically provisioned claim of the same name would be a new, empty, billed file system). Where the
  driver can (``NamespaceDirectory``), a training namespace's volume is rooted at that namespace's directory.
- ``FabricDaemonSet`` (``spec.fabricDaemonSets``): the DaemonSets a fabric node needs before it can become ready
  (CSI node plugin, Multus/CNI, ...). They must tolerate the readiness
  taints, or the node never advertises its fabric and the taint stays forever; the webhook adds the tolerations,
  the doctor and ``preflight`` check them.

Kept apart from ``model.py`` so the cluster-specific parts of a profile read as one page.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fabricguard import dnsnames
from fabricguard.names import TAINT_KEYS

_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class PodAdditions(_Strict):
    """Volumes, mounts, env, pull secrets and tolerations that every fabricguard-injected pod gets."""

    volumes: list[dict[str, Any]] = Field(default_factory=list, description="Pod volumes, as Kubernetes writes them.")
    volumeMounts: list[dict[str, Any]] = Field(
        default_factory=list, description="Mounts added to each GPU container (their volumes must be listed)."
    )
    env: dict[str, str] = Field(default_factory=dict, description="Variables added to each GPU container.")
    imagePullSecrets: list[str] = Field(default_factory=list, description="Secret names in the pod's namespace.")
    tolerations: list[dict[str, Any]] = Field(default_factory=list)

    @field_validator("volumes")
    @classmethod
    def _volumes(cls, v: list[dict[str, Any]]) -> list[dict[str, Any]]:
        names = [vol.get("name") for vol in v]
        for n in names:
            if not isinstance(n, str) or not dnsnames.is_label(n):
                raise ValueError(f"volume name {n!r} is not a DNS label")
            if n.startswith("fabricguard-"):
                raise ValueError(f"volume name {n!r}: the fabricguard- prefix is reserved for injected volumes")
        if len(set(names)) != len(names):
            raise ValueError("a volume is listed twice")
        for vol in v:
            if len(vol) != 2:
                raise ValueError(f"volume {vol.get('name')!r} needs exactly one source (hostPath, secret, ...)")
        return v

    @field_validator("volumeMounts")
    @classmethod
    def _mounts(cls, v: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for m in v:
            if not isinstance(m.get("name"), str) or not str(m.get("mountPath", "")).startswith("/"):
                raise ValueError(f"volumeMount {m!r} needs a name and an absolute mountPath")
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        for k in v:
            if not _ENV_NAME.match(k):
                raise ValueError(f"{k!r} is not an environment variable name")
            if k.startswith("NCCL_"):
                raise ValueError(f"{k}: NCCL variables belong in spec.pools[].fabric.env, where the webhook checks "
                                 "them against the fabric")
        return v

    @field_validator("imagePullSecrets")
    @classmethod
    def _secrets(cls, v: list[str]) -> list[str]:
        bad = [s for s in v if not dnsnames.is_subdomain(s)]
        if bad:
            raise ValueError(f"{bad} are not Secret names")
        return v

    @field_validator("tolerations")
    @classmethod
    def _tolerations(cls, v: list[dict[str, Any]]) -> list[dict[str, Any]]:
        allowed = {"key", "operator", "value", "effect", "tolerationSeconds"}
        for t in v:
            extra = set(t) - allowed
            if extra:
                raise ValueError(f"toleration {t!r}: unknown field(s) {sorted(extra)}")
            if t.get("operator", "Equal") not in ("Exists", "Equal"):
                raise ValueError(f"toleration {t!r}: operator is Exists or Equal")
        return v

    @model_validator(mode="after")
    def _mounts_have_volumes(self) -> PodAdditions:
        names = {vol["name"] for vol in self.volumes}
        missing = [m["name"] for m in self.volumeMounts if m["name"] not in names]
        if missing:
            raise ValueError(f"volumeMounts {missing} name no volume in podAdditions.volumes")
        return self

    def merged(self, other: PodAdditions | None) -> PodAdditions:
        """These additions followed by ``other``'s (a pool's on top of the cluster's); later wins for env."""
        if other is None:
            return self
        vols = list(self.volumes) + [v for v in other.volumes if v["name"] not in {x["name"] for x in self.volumes}]
        return PodAdditions(
            volumes=vols,
            volumeMounts=[*self.volumeMounts, *(m for m in other.volumeMounts if m not in self.volumeMounts)],
            env={**self.env, **other.env},
            imagePullSecrets=[*self.imagePullSecrets,
                              *(s for s in other.imagePullSecrets if s not in self.imagePullSecrets)],
            tolerations=[*self.tolerations, *(t for t in other.tolerations if t not in self.tolerations)],
        )

    @property
    def empty(self) -> bool:
        return not (self.volumes or self.volumeMounts or self.env or self.imagePullSecrets or self.tolerations)


class NamespaceDirectory(_Strict):
    """How the CSI driver roots a PersistentVolume at a directory of the file system, so that a training
    namespace's claim cannot reach another namespace's directories (docs/storage.md, "Tenant isolation").

    ``attribute`` is the ``volumeAttributes`` key that names the directory: ``form: path`` sets it to the directory
    (relative to the file system's root: Azure's ``sub-dir``); ``form: append`` adds ``/<directory>`` to the value
    the profile gives it (a Lustre mount source or name: FSx's ``mountname``, which the driver mounts as
    ``<dnsname>@tcp:/<mountname>``); none where the handle alone names it (DDN EXAScaler's static handle ends in
    the volume's directory: ``{volumeHandle}/{dir}``). ``volumeHandle`` makes each namespace's handle unique
    (``{volumeHandle}`` and ``{dir}`` are filled in): the kubelet keys a node's mounts by driver and handle, so
    two PersistentVolumes of one handle would share one mount, the file system root's among them."""

    attribute: str | None = None
    form: Literal["path", "append"] = "path"
    volumeHandle: str = "{volumeHandle}:{dir}"

    @field_validator("volumeHandle")
    @classmethod
    def _handle(cls, v: str) -> str:
        unknown = set(re.findall(r"{([^}]*)}", v)) - {"volumeHandle", "dir"}
        if unknown or "{dir}" not in v:
            raise ValueError(f"namespaceDirectory.volumeHandle {v!r} must name {{dir}} (and may name "
                             "{volumeHandle}), nothing else: each namespace's handle must be its own")
        return v


# FSx for Lustre: the node plugin mounts "<dnsname>@tcp:/<mountname>" (aws-fsx-csi-driver pkg/driver/node.go,
# NodePublishVolume, v1.9), so a mountname of "<mountname>/<dir>" mounts that directory (a Lustre subdirectory
# mount); the handle is only an identifier there.
FSX_NAMESPACE_DIRECTORY = NamespaceDirectory(attribute="mountname", form="append")

LustreProvider = Literal["gke-managed-lustre", "fsx", "csi"]
PROVIDER_DRIVER: dict[str, str] = {"gke-managed-lustre": "lustre.csi.storage.gke.io", "fsx": "fsx.csi.aws.com"}
_GKE_HANDLE = re.compile(r"^[a-z][-a-z0-9]*/[-a-z0-9]+/[a-z][-a-z0-9]*(:.+)?$")
_FSX_HANDLE = re.compile(r"^fs-[0-9a-f]{8,17}$")


class LustreVolume(_Strict):
    """The Lustre file system as a static CSI PersistentVolume source (k8s-injection.md §4 per driver)."""

    provider: LustreProvider
    driver: str | None = Field(default=None, description="CSI driver (set for provider csi; implied otherwise).")
    volumeHandle: str
    volumeAttributes: dict[str, str] = Field(default_factory=dict)
    capacity: str = Field(default="1Ti", description="The PV's capacity (informational for Lustre).")
    mountOptions: list[str] = Field(default_factory=list)
    namespaceDirectory: NamespaceDirectory | None = Field(
        default=None, description="How the driver roots a namespace's PV at its own directory (FSx: implied; GKE "
        "Managed Lustre: not possible, admission keeps namespaces apart).")

    @model_validator(mode="after")
    def _per_provider(self) -> LustreVolume:
        attrs = self.volumeAttributes
        nsdir = self.namespaceDirectory
        if self.provider == "gke-managed-lustre" and nsdir is not None:
            raise ValueError("namespaceDirectory: the GKE Managed Lustre CSI driver mounts only a whole instance "
                             "(its mountpoint is <ip>@tcp:/<fsname>, and a second volume of the same file system on "
                             "a node is refused): remove namespaceDirectory; admission keeps namespaces apart")
        if self.provider == "fsx" and nsdir is None and "namespaceDirectory" not in self.model_fields_set:
            self.namespaceDirectory = nsdir = FSX_NAMESPACE_DIRECTORY
        if nsdir is not None and nsdir.form == "append" and nsdir.attribute not in attrs:
            raise ValueError(f"namespaceDirectory.attribute {nsdir.attribute!r} (form append) must be one of "
                             "volumeAttributes: the directory is added to its value")
        if self.provider == "gke-managed-lustre":
            if not _GKE_HANDLE.match(self.volumeHandle):
                raise ValueError(f"volumeHandle {self.volumeHandle!r}: GKE Managed Lustre takes "
                                 "<project>/<location>/<instance>")
            if not ({"ip", "filesystem"} <= set(attrs) or "mountpoint" in attrs):
                raise ValueError("GKE Managed Lustre needs volumeAttributes ip and filesystem (or mountpoint "
                                 "<ip>@tcp:/<fs>): the instance's MGS address and file system name")
        elif self.provider == "fsx":
            if not _FSX_HANDLE.match(self.volumeHandle):
                raise ValueError(f"volumeHandle {self.volumeHandle!r}: FSx for Lustre takes the file system id fs-...")
            if not {"dnsname", "mountname"} <= set(attrs):
                raise ValueError("FSx for Lustre needs volumeAttributes dnsname and mountname (aws fsx "
                                 "describe-file-systems: DNSName, LustreConfiguration.MountName)")
        elif not self.driver:
            raise ValueError("provider csi needs driver (the CSI driver name, e.g. exa.csi.ddn.com)")
        return self

    @property
    def csi_driver(self) -> str:
        return self.driver or PROVIDER_DRIVER[self.provider]

    @property
    def access_mode(self) -> str:
        return "ReadWriteMany"

    def csi_source(self, directory: str | None = None) -> dict[str, Any]:
        """The PersistentVolume's ``csi`` source: the file system's root, or rooted at ``directory`` (relative to
        the root) by :attr:`namespaceDirectory`; None there is a bug of the caller (:func:`roots_namespaces`)."""
        csi: dict[str, Any] = {"driver": self.csi_driver, "volumeHandle": self.volumeHandle}
        attrs = dict(self.volumeAttributes)
        if directory is not None:
            nsdir = self.namespaceDirectory
            if nsdir is None:
                raise ValueError(f"{self.csi_driver}: no namespaceDirectory, the volume cannot be rooted at "
                                 f"{directory!r}")
            csi["volumeHandle"] = nsdir.volumeHandle.replace("{volumeHandle}", self.volumeHandle).replace(
                "{dir}", directory)
            if nsdir.attribute is None:
                pass  # the handle alone names the directory
            elif nsdir.form == "append":
                attrs[nsdir.attribute] = attrs[nsdir.attribute].rstrip("/") + "/" + directory
            else:
                attrs[nsdir.attribute] = directory
        if attrs:
            csi["volumeAttributes"] = attrs
        return csi

    @property
    def roots_namespaces(self) -> bool:
        """Whether each namespace's PersistentVolume can be rooted at that namespace's directory."""
        return self.namespaceDirectory is not None


class FabricDaemonSet(_Strict):
    """A DaemonSet (not fabricguard's) that a fabric node needs before it can become ready."""

    namespace: str
    name: str
    role: Literal["device-plugin", "dra-driver", "csi-node", "cni", "readiness", "other"] = "other"

    @field_validator("namespace", "name")
    @classmethod
    def _dns(cls, v: str) -> str:
        if not dnsnames.is_subdomain(v):
            raise ValueError(f"{v!r} is not a Kubernetes name")
        return v


def tolerates(tolerations: list[dict[str, Any]] | tuple[dict[str, Any], ...], taint: dict[str, Any]) -> bool:
    """Whether a pod with ``tolerations`` tolerates ``taint``, by the scheduler's rules: an empty key with
    ``Exists`` tolerates every taint; an empty effect matches every effect; ``Equal`` (the default) compares values."""
    for t in tolerations:
        if not isinstance(t, dict):
            continue
        effect = t.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        op = t.get("operator") or "Equal"
        key = t.get("key") or ""
        if not key:
            if op == "Exists":
                return True
            continue
        if key != taint.get("key"):
            continue
        if op == "Exists" or (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def readiness_tolerations(keys: tuple[str, ...] = TAINT_KEYS) -> list[dict[str, Any]]:
    """Tolerations of the readiness taints (``PlatformProfile.taint_keys``: both readiness keys, plus the
    autoscaler's startup key where a pool uses it), whatever pool they name (NoSchedule, as the rules set them)."""
    return [{"key": k, "operator": "Exists", "effect": "NoSchedule"} for k in keys]
