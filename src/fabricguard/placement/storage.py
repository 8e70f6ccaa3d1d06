"""``fabricguard render storage``: a new cluster's Lustre file system as the platform's own tools declare it, its
network access, and the static PV/PVC per team namespace that ``render install`` expects.

"Onboarding a new region or cluster still means standing up a new filesystem instance by hand" (the field
report). Each provider is rendered in the form its operators already run, with the fields as documented:

- **GKE Managed Lustre**: Terraform (JSON syntax, ``main.tf.json``) with ``google_lustre_instance`` (``instance_id``,
  ``location``, ``filesystem`` of at most 8 letters and digits, ``capacity_gib``, ``network``,
  ``per_unit_storage_throughput`` of 125/250/500/1000 MB/s per TiB, ``gke_support_enabled``; hashicorp/google
  provider docs, resource ``lustre_instance``), the private services access it needs (a
  ``google_compute_global_address`` of purpose ``VPC_PEERING`` and a ``google_service_networking_connection``) and
  a firewall rule for Lustre's TCP port 988 from that range (Managed Lustre docs, "Configure a VPC network"); the
  same as the documented ``gcloud`` commands in ``gcloud.sh``. Capacity limits per tier: the minimum is 72,000 /
  36,000 / 18,000 / 9,000 GiB at 125 / 250 / 500 / 1000 MB/s per TiB (Managed Lustre "Quotas and limits").
- **FSx for Lustre**: ACK objects (``fsx.services.k8s.aws/v1alpha1`` FileSystem, ``fileSystemType: LUSTRE``,
  ``PERSISTENT_2``, Lustre 2.15, SSD capacity 1,200, 2,400 or a multiple of 2,400 GiB; the CRD's
  ``config/crd/bases/fsx.services.k8s.aws_filesystems.yaml``) and an ACK EC2 SecurityGroup admitting TCP 988 and
  1018-1023 from the cluster's nodes and the file system's own subnet (FSx's servers use the same ports among
  themselves; FSx for Lustre User Guide, "File system access control with Amazon VPC").
- **static** (DDN EXAScaler, on-premises): only the PV/PVC set, from the profile's ``storage.lustre.volume``.

The file system's address exists only once it is created (Managed Lustre's ``mount_point``, FSx's DNS and mount
names), so the PV/PVC set is rendered when it is known (``--mount-point``, ``--dns-name``/``--mount-name``, or a
profile whose ``volume`` already says it); otherwise the README names the one command that finishes it. Then the
storage canary proves it (``fabricguard probe storage``) before the pool's storage counts as ready.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabricguard import yamlout
from fabricguard.placement.install import PART_OF, lustre_claim, lustre_namespaces
from fabricguard.profile.cluster import LustreVolume
from fabricguard.profile.model import PlatformProfile

PROVIDERS = ("gke-managed-lustre", "fsx", "static")
GKE_TIERS = {125: 72_000, 250: 36_000, 500: 18_000, 1000: 9_000}  # MB/s per TiB -> minimum GiB
FSX_THROUGHPUT = (125, 250, 500, 1000)  # PERSISTENT_2 SSD, MB/s per TiB
LUSTRE_PORT = 988
FSX_PORTS = ((988, 988), (1018, 1023))
_FSNAME = re.compile(r"^[A-Za-z0-9]{1,8}$")
_GCP_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_ZONE = re.compile(r"^[a-z]+-[a-z]+[0-9]+-[a-z]$")
_MOUNT_POINT = re.compile(r"^(?P<ip>[0-9.]+)@tcp:/(?P<fs>[A-Za-z0-9]{1,8})$")
_SUBNET = re.compile(r"^subnet-[0-9a-f]{8,17}$")
_VPC = re.compile(r"^vpc-[0-9a-f]{8,17}$")
_FSX_DNS = re.compile(r"^fs-[0-9a-f]{8,17}\.fsx\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$")
_FSX_ID = re.compile(r"^fs-[0-9a-f]{8,17}$")


class StorageRenderError(ValueError):
    """An option or profile field that cannot make the file system; the message names it and what to change."""


@dataclass(frozen=True)
class GkeOptions:
    project: str
    location: str
    instance: str
    network: str
    capacity_gib: int
    throughput: int
    filesystem: str
    mount_point: str | None = None
    ip_range_prefix: int = 20


@dataclass(frozen=True)
class FsxOptions:
    name: str
    namespace: str
    vpc_id: str
    subnet_id: str
    client_cidrs: tuple[str, ...]
    capacity_gib: int
    throughput: int
    file_system_id: str | None = None
    dns_name: str | None = None
    mount_name: str | None = None


@dataclass(frozen=True)
class Rendered:
    """Files to write (relative path -> text) and what the person does next, in order."""

    files: dict[str, str]
    steps: list[str]


# ------------------------------------------------------------------------------------------------ checks


def check_gke(o: GkeOptions) -> None:
    if not _GCP_NAME.match(o.instance):
        raise StorageRenderError(f"--instance {o.instance!r}: a lowercase name of letters, digits and '-' "
                                 "(at most 63), starting with a letter")
    if not _ZONE.match(o.location):
        raise StorageRenderError(f"--location {o.location!r}: a zone such as us-central1-a (put the instance in "
                                 "the GPU nodes' zone)")
    if not _FSNAME.match(o.filesystem):
        raise StorageRenderError(f"--filesystem {o.filesystem!r}: at most 8 letters and digits (Managed Lustre's "
                                 "file system name)")
    if o.throughput not in GKE_TIERS:
        raise StorageRenderError(f"--throughput {o.throughput}: Managed Lustre's tiers are "
                                 f"{', '.join(map(str, GKE_TIERS))} MB/s per TiB")
    least = GKE_TIERS[o.throughput]
    if o.capacity_gib < least or o.capacity_gib % least:
        raise StorageRenderError(f"--capacity-gib {o.capacity_gib}: at {o.throughput} MB/s per TiB the capacity is "
                                 f"a multiple of {least:,} GiB (at least {least:,})")
    if not 8 <= o.ip_range_prefix <= 23:
        raise StorageRenderError(f"--ip-range-prefix {o.ip_range_prefix}: each instance needs a /23 or larger "
                                 "range; use 20 to leave room for more instances")
    if o.mount_point is not None:
        m = _MOUNT_POINT.match(o.mount_point)
        if not m:
            raise StorageRenderError(f"--mount-point {o.mount_point!r}: the instance's mount_point, "
                                     "<ip>@tcp:/<filesystem> (terraform output mount_point)")
        if m.group("fs") != o.filesystem:
            raise StorageRenderError(f"--mount-point {o.mount_point!r} names file system {m.group('fs')}, not "
                                     f"--filesystem {o.filesystem}")


def check_fsx(o: FsxOptions) -> None:
    if not _GCP_NAME.match(o.name):
        raise StorageRenderError(f"--instance {o.name!r}: a DNS label (the ACK objects' name)")
    if not _VPC.match(o.vpc_id):
        raise StorageRenderError(f"--vpc-id {o.vpc_id!r}: the cluster's VPC, vpc-...")
    if not _SUBNET.match(o.subnet_id):
        raise StorageRenderError(f"--subnet-id {o.subnet_id!r}: one subnet in the GPU nodes' Availability Zone, "
                                 "subnet-...")
    if not o.client_cidrs:
        raise StorageRenderError("--client-cidr is required: the nodes' CIDR(s) that mount the file system")
    for c in o.client_cidrs:
        if not re.match(r"^\d{1,3}(\.\d{1,3}){3}/\d{1,2}$", c):
            raise StorageRenderError(f"--client-cidr {c!r}: an IPv4 CIDR such as 10.0.0.0/16")
    if o.throughput not in FSX_THROUGHPUT:
        raise StorageRenderError(f"--throughput {o.throughput}: PERSISTENT_2 takes "
                                 f"{', '.join(map(str, FSX_THROUGHPUT))} MB/s per TiB")
    if not (o.capacity_gib in (1200, 2400) or (o.capacity_gib > 0 and o.capacity_gib % 2400 == 0)):
        raise StorageRenderError(f"--capacity-gib {o.capacity_gib}: FSx for Lustre SSD takes 1200, 2400 or a "
                                 "multiple of 2400 GiB")
    known = [o.file_system_id, o.dns_name, o.mount_name]
    if any(known) and not all(known):
        raise StorageRenderError("--file-system-id, --dns-name and --mount-name go together (aws fsx "
                                 "describe-file-systems: FileSystemId, DNSName, LustreConfiguration.MountName)")
    if o.file_system_id and not _FSX_ID.match(o.file_system_id):
        raise StorageRenderError(f"--file-system-id {o.file_system_id!r}: fs- and 8 to 17 hex digits")
    if o.dns_name and not _FSX_DNS.match(o.dns_name):
        raise StorageRenderError(f"--dns-name {o.dns_name!r}: the file system's DNSName, "
                                 "fs-....fsx.<region>.amazonaws.com")


# ------------------------------------------------------------------------------------------------ render


def gke_terraform(o: GkeOptions) -> dict[str, Any]:
    """Terraform JSON: the private services range and peering, the Lustre firewall rule, the instance."""
    net = f"projects/{o.project}/global/networks/{o.network}"
    range_name = f"{o.instance}-lustre-range"
    return {
        "terraform": {"required_providers": {"google": {"source": "hashicorp/google", "version": ">= 6.36"}}},
        "provider": {"google": {"project": o.project}},
        "resource": {
            "google_compute_global_address": {"lustre_range": {
                "name": range_name, "purpose": "VPC_PEERING", "address_type": "INTERNAL",
                "prefix_length": o.ip_range_prefix, "network": net,
                "description": "Managed Lustre private services access (fabricguard render storage)"}},
            "google_service_networking_connection": {"lustre_peering": {
                "network": net, "service": "servicenetworking.googleapis.com",
                "reserved_peering_ranges": ["${google_compute_global_address.lustre_range.name}"]}},
            "google_compute_firewall": {"lustre": {
                "name": f"{o.instance}-lustre", "network": net, "direction": "INGRESS",
                "allow": [{"protocol": "tcp", "ports": [str(LUSTRE_PORT)]}],
                "source_ranges": ["${google_compute_global_address.lustre_range.address}/"
                                  f"{o.ip_range_prefix}"]}},
            "google_lustre_instance": {"fabricguard": {
                "instance_id": o.instance, "location": o.location, "filesystem": o.filesystem,
                "capacity_gib": str(o.capacity_gib), "network": net,
                "per_unit_storage_throughput": str(o.throughput), "gke_support_enabled": True,
                "labels": {"app_kubernetes_io_part_of": "fabricguard"},
                "depends_on": ["google_service_networking_connection.lustre_peering"]}},
        },
        "output": {
            "mount_point": {"value": "${google_lustre_instance.fabricguard.mount_point}"},
            "volume_handle": {"value": f"{o.project}/{o.location}/{o.instance}"},
        },
    }


def gke_gcloud(o: GkeOptions) -> str:
    """The same as the documented gcloud commands, for clusters not managed with Terraform."""
    net = f"projects/{o.project}/global/networks/{o.network}"
    q = shlex.quote
    range_name = f"{o.instance}-lustre-range"
    return "\n".join([
        "#!/usr/bin/env bash",
        "# GKE Managed Lustre for fabricguard: private services access, the Lustre firewall rule, the instance.",
        "set -euo pipefail",
        f"gcloud services enable servicenetworking.googleapis.com lustre.googleapis.com --project={q(o.project)}",
        f"gcloud compute addresses create {q(range_name)} --global --purpose=VPC_PEERING "
        f"--prefix-length={o.ip_range_prefix} --network={q(o.network)} --project={q(o.project)}",
        f"CIDR=$(gcloud compute addresses describe {q(range_name)} --global --project={q(o.project)} "
        "--format='value[separator=/](address, prefixLength)')",
        f"gcloud services vpc-peerings connect --network={q(o.network)} --ranges={q(range_name)} "
        f"--service=servicenetworking.googleapis.com --project={q(o.project)}",
        f"gcloud compute firewall-rules create {q(o.instance + '-lustre')} --network={q(o.network)} "
        f"--direction=INGRESS --allow=tcp:{LUSTRE_PORT} --source-ranges=\"$CIDR\" --project={q(o.project)}",
        f"gcloud lustre instances create {q(o.instance)} --location={q(o.location)} "
        f"--capacity-gib={o.capacity_gib} --filesystem={q(o.filesystem)} --network={q(net)} "
        f"--per-unit-storage-throughput={o.throughput} --gke-support-enabled --project={q(o.project)}",
        f"gcloud lustre instances describe {q(o.instance)} --location={q(o.location)} --project={q(o.project)} "
        "--format='value(mountPoint)'",
        "",
    ])


def gke_volume(o: GkeOptions) -> dict[str, Any]:
    """The profile's ``storage.lustre.volume`` for the instance (its address once created)."""
    assert o.mount_point is not None
    m = _MOUNT_POINT.match(o.mount_point)
    assert m is not None
    return {"provider": "gke-managed-lustre", "volumeHandle": f"{o.project}/{o.location}/{o.instance}",
            "volumeAttributes": {"ip": m.group("ip"), "filesystem": m.group("fs")},
            "capacity": f"{o.capacity_gib}Gi"}


def fsx_objects(o: FsxOptions) -> list[dict[str, Any]]:
    """ACK objects: the security group admitting Lustre's ports from the nodes, and the file system."""
    labels = dict(PART_OF)
    sg_name = f"{o.name}-lustre"
    rules = [{"ipProtocol": "tcp", "fromPort": lo, "toPort": hi,
              "ipRanges": [{"cidrIP": c, "description": "fabricguard: Lustre clients"} for c in o.client_cidrs]}
             for lo, hi in FSX_PORTS]
    sg = {"apiVersion": "ec2.services.k8s.aws/v1alpha1", "kind": "SecurityGroup",
          "metadata": {"name": sg_name, "namespace": o.namespace, "labels": labels},
          "spec": {"name": sg_name, "description": "FSx for Lustre for fabricguard (TCP 988, 1018-1023)",
                   "vpcID": o.vpc_id, "ingressRules": rules}}
    fs = {"apiVersion": "fsx.services.k8s.aws/v1alpha1", "kind": "FileSystem",
          "metadata": {"name": o.name, "namespace": o.namespace, "labels": labels},
          "spec": {"fileSystemType": "LUSTRE", "fileSystemTypeVersion": "2.15", "storageType": "SSD",
                   "storageCapacity": o.capacity_gib, "subnetIDs": [o.subnet_id],
                   "securityGroupRefs": [{"from": {"name": sg_name, "namespace": o.namespace}}],
                   "lustreConfiguration": {"deploymentType": "PERSISTENT_2",
                                           "perUnitStorageThroughput": o.throughput,
                                           "dataCompressionType": "NONE",
                                           "metadataConfiguration": {"mode": "AUTOMATIC"}},
                   "tags": [{"key": "app.kubernetes.io/part-of", "value": "fabricguard"}]}}
    return [sg, fs]


def fsx_volume(o: FsxOptions) -> dict[str, Any]:
    assert o.file_system_id and o.dns_name and o.mount_name
    return {"provider": "fsx", "volumeHandle": o.file_system_id,
            "volumeAttributes": {"dnsname": o.dns_name, "mountname": o.mount_name},
            "capacity": f"{o.capacity_gib}Gi", "mountOptions": ["flock"]}


def claims(profile: PlatformProfile, volume: dict[str, Any] | None) -> tuple[PlatformProfile, list[dict[str, Any]]]:
    """The PV/PVC per team namespace that ``render install`` writes, for ``volume`` (or the profile's own)."""
    lustre = profile.spec.storage.lustre
    if lustre is None:
        raise StorageRenderError("spec.storage.lustre is not set: add it (claimName, mountPath) so the jobs and "
                                 "fabricguard know where the file system is mounted")
    prof = profile.model_copy(deep=True)
    assert prof.spec.storage.lustre is not None
    if volume is not None:
        prof.spec.storage.lustre.volume = LustreVolume.model_validate(volume)
    if prof.spec.storage.lustre.volume is None:
        return prof, []
    namespaces = lustre_namespaces(prof)
    if not namespaces:
        raise StorageRenderError("no pool with Lustre has a queue with namespaces: name the team namespaces in "
                                 "spec.pools[].queue.namespaces so each gets its claim")
    return prof, [o for ns in namespaces for o in lustre_claim(prof, ns)]


def _yaml(objs: list[dict[str, Any]]) -> str:
    return yamlout.dump_all(objs, sort_keys=False)


def _kubernetes(objs: list[dict[str, Any]], volume: dict[str, Any], claim: str) -> dict[str, str]:
    return {
        "kubernetes/claims.yaml": _yaml(objs),
        "kubernetes/kustomization.yaml": yamlout.dump({"apiVersion": "kustomize.config.k8s.io/v1beta1",
                                                         "kind": "Kustomization", "resources": ["claims.yaml"]},
                                                        sort_keys=False),
        "profile-volume.yaml": yamlout.dump({"spec": {"storage": {"lustre": {"claimName": claim,
                                                                               "volume": volume}}}},
                                              sort_keys=False),
    }


def _add_claims(profile: PlatformProfile, volume: dict[str, Any], claim: str, files: dict[str, str]) -> list[str]:
    """A file system whose address is known: its PV/PVC per namespace added to ``files``; the steps they need."""
    _, objs = claims(profile, volume)
    files |= _kubernetes(objs, volume, claim)
    return ["kubectl apply -k kubernetes/",
            "copy profile-volume.yaml's volume into the profile's spec.storage.lustre, then render install"]


def render_gke(profile: PlatformProfile, o: GkeOptions) -> Rendered:
    check_gke(o)
    files = {"terraform/main.tf.json": json.dumps(gke_terraform(o), indent=2) + "\n", "gcloud.sh": gke_gcloud(o)}
    steps = ["terraform -chdir=terraform init && terraform -chdir=terraform apply   (or: bash gcloud.sh)"]
    claim = _claim_name(profile)
    if o.mount_point:
        steps += _add_claims(profile, gke_volume(o), claim, files)
    else:
        steps += ["rerun this render with a new --output and --mount-point "
                  "\"$(terraform -chdir=terraform output -raw mount_point)\": it adds the PV/PVC per namespace"]
    steps += ["fabricguard probe storage --path <mountPath> in a pod of each Lustre pool: the pool's storage "
              "counts only after it passes at the floor"]
    return Rendered(files, steps)


def render_fsx(profile: PlatformProfile, o: FsxOptions) -> Rendered:
    check_fsx(o)
    files = {"ack/filesystem.yaml": _yaml(fsx_objects(o)),
             "ack/kustomization.yaml": yamlout.dump({"apiVersion": "kustomize.config.k8s.io/v1beta1",
                                                       "kind": "Kustomization", "resources": ["filesystem.yaml"]},
                                                      sort_keys=False)}
    steps = ["kubectl apply -k ack/   (needs the ACK fsx and ec2 controllers)",
             f"kubectl -n {o.namespace} wait filesystem/{o.name} --for=jsonpath='{{.status.lifecycle}}'=AVAILABLE "
             "--timeout=60m"]
    claim = _claim_name(profile)
    if o.dns_name:
        steps += _add_claims(profile, fsx_volume(o), claim, files)
    else:
        steps += ["rerun this render with a new --output and --file-system-id, --dns-name and --mount-name from "
                  f"aws fsx describe-file-systems --query 'FileSystems[?Tags[?Value==`{o.name}`]]': it adds the "
                  "PV/PVC per namespace"]
    steps += ["fabricguard probe storage --path <mountPath> in a pod of each Lustre pool"]
    return Rendered(files, steps)


def render_static(profile: PlatformProfile) -> Rendered:
    lustre = profile.spec.storage.lustre
    if lustre is None or lustre.volume is None:
        raise StorageRenderError("--provider static renders the PV/PVC set from spec.storage.lustre.volume, which "
                                 "is not set: add provider csi, driver, volumeHandle (docs/storage.md)")
    _, objs = claims(profile, None)
    files = _kubernetes(objs, lustre.volume.model_dump(exclude_defaults=True), lustre.claimName)
    return Rendered(files, ["kubectl apply -k kubernetes/"])


def _claim_name(profile: PlatformProfile) -> str:
    lustre = profile.spec.storage.lustre
    if lustre is None:
        raise StorageRenderError("spec.storage.lustre is not set: add it (claimName, mountPath) so the jobs and "
                                 "fabricguard know where the file system is mounted")
    return lustre.claimName


def write(rendered: Rendered, out: Path) -> None:
    for rel, text in rendered.files.items():
        p = out / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        if rel.endswith(".sh"):
            p.chmod(0o755)
    (out / "README.md").write_text("# The Lustre file system, rendered by fabricguard\n\nIn order:\n\n"
                                   + "".join(f"{i}. `{s}`\n" for i, s in enumerate(rendered.steps, 1)))
