"""render storage: a new cluster's Lustre in one step, per provider, validated offline.

The provider schemas below are transcribed field by field (names, types, required) from what each provider
publishes, not copied: ``google_lustre_instance``'s arguments from the hashicorp/google provider documentation
(resource ``lustre_instance``, provider 6.36+), and the ACK FSx ``FileSystem`` spec from its CRD
(``config/crd/bases/fsx.services.k8s.aws_filesystems.yaml``, v1alpha1). Kubernetes objects are validated with
kubernetes-validate's published OpenAPI schemas, strictly. The PV/PVC set must equal what ``render install``
writes for the profile the render hands back (``profile-volume.yaml`` merged in)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml
from typer.testing import CliRunner

from fabricguard.cli import app
from fabricguard.placement.install import lustre_claim, lustre_namespaces
from fabricguard.profile import load_profile, loads_profile

ROOT = Path(__file__).resolve().parents[2]
GKE = ROOT / "examples" / "profiles" / "gke-a3-ultra.yaml"
AWS = ROOT / "examples" / "profiles" / "aws-p5-efa.yaml"

GOOGLE_LUSTRE_INSTANCE = {
    "type": "object",
    "required": ["instance_id", "location", "filesystem", "capacity_gib", "network"],
    "additionalProperties": False,
    "properties": {
        "instance_id": {"type": "string", "pattern": "^[a-z]([-a-z0-9]*[a-z0-9])?$"},
        "location": {"type": "string"},
        "filesystem": {"type": "string", "pattern": "^[A-Za-z0-9]{1,8}$"},
        "capacity_gib": {"type": "string", "pattern": "^[0-9]+$"},
        "network": {"type": "string", "pattern": "^projects/[^/]+/global/networks/[^/]+$"},
        "per_unit_storage_throughput": {"type": "string", "enum": ["125", "250", "500", "1000"]},
        "gke_support_enabled": {"type": "boolean"},
        "description": {"type": "string"}, "labels": {"type": "object"}, "project": {"type": "string"},
        "kms_key": {"type": "string"}, "placement_policy": {"type": "string"},
        "depends_on": {"type": "array", "items": {"type": "string"}}, "timeouts": {"type": "object"},
    },
}
ACK_FILESYSTEM_SPEC = {
    "type": "object",
    "required": ["fileSystemType"],
    "additionalProperties": False,
    "properties": {
        "fileSystemType": {"type": "string", "enum": ["WINDOWS", "LUSTRE", "ONTAP", "OPENZFS"]},
        "fileSystemTypeVersion": {"type": "string", "pattern": r"^[0-9](.[0-9]*)*$"},
        "storageCapacity": {"type": "integer"}, "storageType": {"type": "string"},
        "subnetIDs": {"type": "array", "items": {"type": "string"}},
        "subnetRefs": {"type": "array"}, "securityGroupIDs": {"type": "array", "items": {"type": "string"}},
        "securityGroupRefs": {"type": "array", "items": {"type": "object", "properties": {"from": {
            "type": "object", "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}},
            "additionalProperties": False}}, "additionalProperties": False}},
        "kmsKeyID": {"type": "string"}, "kmsKeyRef": {"type": "object"}, "networkType": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "object", "properties": {"key": {"type": "string"},
                                                                            "value": {"type": "string"}},
                                            "additionalProperties": False}},
        "lustreConfiguration": {"type": "object", "additionalProperties": False, "properties": {
            "deploymentType": {"type": "string"}, "perUnitStorageThroughput": {"type": "integer"},
            "dataCompressionType": {"type": "string"}, "efaEnabled": {"type": "boolean"},
            "metadataConfiguration": {"type": "object", "properties": {"iops": {"type": "integer"},
                                                                      "mode": {"type": "string"}},
                                      "additionalProperties": False},
            "automaticBackupRetentionDays": {"type": "integer"}, "weeklyMaintenanceStartTime": {"type": "string"},
            "rootSquashConfiguration": {"type": "object"}, "logConfiguration": {"type": "object"},
            "throughputCapacity": {"type": "integer"}, "driveCacheType": {"type": "string"}}},
    },
}
ACK_SECURITY_GROUP_SPEC = {  # ec2.services.k8s.aws/v1alpha1 SecurityGroup (ACK ec2-controller CRD)
    "type": "object", "required": ["description", "name"],
    "properties": {"name": {"type": "string"}, "description": {"type": "string"}, "vpcID": {"type": "string"},
                   "ingressRules": {"type": "array", "items": {"type": "object", "additionalProperties": False,
                                    "properties": {"ipProtocol": {"type": "string"}, "fromPort": {"type": "integer"},
                                                   "toPort": {"type": "integer"}, "ipRanges": {"type": "array"},
                                                   "userIDGroupPairs": {"type": "array"}}}}},
}


def render(tmp_path: Path, *args: str) -> tuple[int, str, Path]:
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["render", "storage", "-o", str(out), *args])
    return r.exit_code, r.output, out


def k8s_valid(objs: list[dict]) -> None:
    for o in objs:
        kubernetes_validate.validate(o, kubernetes_validate.latest_version(), strict=True)


def merged_profile(profile: Path, out: Path):  # type: ignore[no-untyped-def]
    doc = yaml.safe_load(profile.read_text())
    doc["spec"]["storage"]["lustre"]["volume"] = yaml.safe_load(
        (out / "profile-volume.yaml").read_text())["spec"]["storage"]["lustre"]["volume"]
    return loads_profile(yaml.safe_dump(doc))


GKE_ARGS = ["-p", str(GKE), "--provider", "gke-managed-lustre", "--instance", "train-lfs", "--project",
            "prod-ml", "--location", "us-central1-b", "--network", "gpu-vpc", "--capacity-gib", "36000",
            "--filesystem", "lfsfs"]


def test_gke_managed_lustre_in_one_render(tmp_path: Path) -> None:
    code, out_text, out = render(tmp_path, *GKE_ARGS, "--mount-point", "10.90.1.4@tcp:/lfsfs")
    assert code == 0, out_text
    tf = json.loads((out / "terraform/main.tf.json").read_text())
    inst = tf["resource"]["google_lustre_instance"]["fabricguard"]
    jsonschema.validate(inst, GOOGLE_LUSTRE_INSTANCE)
    assert inst["gke_support_enabled"] is True and inst["capacity_gib"] == "36000"
    assert tf["resource"]["google_compute_global_address"]["lustre_range"]["purpose"] == "VPC_PEERING"
    assert tf["resource"]["google_compute_firewall"]["lustre"]["allow"] == [{"protocol": "tcp", "ports": ["988"]}]
    assert subprocess.run(["bash", "-n", str(out / "gcloud.sh")]).returncode == 0
    assert "--gke-support-enabled" in (out / "gcloud.sh").read_text()
    objs = list(yaml.safe_load_all((out / "kubernetes/claims.yaml").read_text()))
    k8s_valid(objs)
    prof = merged_profile(GKE, out)
    # Exactly what render install writes for the profile with the new volume.
    assert objs == [o for ns in lustre_namespaces(prof) for o in lustre_claim(prof, ns)]
    pv = objs[0]
    assert pv["spec"]["csi"] == {"driver": "lustre.csi.storage.gke.io", "volumeHandle": "prod-ml/us-central1-b/train-lfs",
                                 "volumeAttributes": {"ip": "10.90.1.4", "filesystem": "lfsfs"}}
    assert {o["metadata"].get("namespace") for o in objs if o["kind"] == "PersistentVolumeClaim"} == {
        "ml-search", "ml-ranking"}
    assert "kubectl apply -k kubernetes/" in (out / "README.md").read_text()


def test_gke_before_the_instance_exists_says_the_next_command(tmp_path: Path) -> None:
    code, text, out = render(tmp_path, *GKE_ARGS)
    assert code == 0, text
    assert not (out / "kubernetes").exists()
    assert "--mount-point" in text and "terraform -chdir=terraform output -raw mount_point" in text


def test_fsx_ack_objects_and_claims(tmp_path: Path) -> None:
    args = ["-p", str(AWS), "--provider", "fsx", "--instance", "train-fsx", "--vpc-id", "vpc-0a1b2c3d4e5f60718",
            "--subnet-id", "subnet-0123456789abcdef0", "--client-cidr", "10.0.0.0/16", "--capacity-gib", "4800",
            "--throughput", "500"]
    code, text, out = render(tmp_path, *args)
    assert code == 0, text
    sg, fs = yaml.safe_load_all((out / "ack/filesystem.yaml").read_text())
    jsonschema.validate(fs["spec"], ACK_FILESYSTEM_SPEC)
    jsonschema.validate(sg["spec"], ACK_SECURITY_GROUP_SPEC)
    assert fs["spec"]["lustreConfiguration"]["deploymentType"] == "PERSISTENT_2"
    assert [(r["fromPort"], r["toPort"]) for r in sg["spec"]["ingressRules"]] == [(988, 988), (1018, 1023)]
    assert not (out / "kubernetes").exists() and "--dns-name" in text
    code, text, out2 = render(tmp_path / "b", *args, "--file-system-id", "fs-0fedcba9876543210", "--dns-name",
                              "fs-0fedcba9876543210.fsx.us-east-1.amazonaws.com", "--mount-name", "x7yqzbmv")
    assert code == 0, text
    objs = list(yaml.safe_load_all((out2 / "kubernetes/claims.yaml").read_text()))
    k8s_valid(objs)
    prof = merged_profile(AWS, out2)
    assert objs == [o for ns in lustre_namespaces(prof) for o in lustre_claim(prof, ns)]
    # Each training namespace's volume is rooted at its own directory (tenant isolation by the mount).
    assert objs[0]["spec"]["csi"]["volumeAttributes"] == {
        "dnsname": "fs-0fedcba9876543210.fsx.us-east-1.amazonaws.com", "mountname": "x7yqzbmv/ml-training"}
    assert objs[0]["spec"]["csi"]["volumeHandle"] == "fs-0fedcba9876543210:ml-training"


def test_static_renders_the_profiles_volume(tmp_path: Path) -> None:
    code, text, out = render(tmp_path, "-p", str(AWS), "--provider", "static")
    assert code == 0, text
    objs = list(yaml.safe_load_all((out / "kubernetes/claims.yaml").read_text()))
    prof = load_profile(AWS)
    assert objs == [o for ns in lustre_namespaces(prof) for o in lustre_claim(prof, ns)]


@pytest.mark.parametrize("extra, says", [
    (["--capacity-gib", "20000"], "--capacity-gib 20000: at 1000 MB/s per TiB the capacity is a multiple of 9,000"),
    (["--throughput", "300"], "--throughput 300: Managed Lustre's tiers are 125, 250, 500, 1000"),
    (["--filesystem", "toolongname"], "--filesystem 'toolongname': at most 8 letters and digits"),
    (["--location", "us-central1"], "--location 'us-central1': a zone such as us-central1-a"),
    (["--mount-point", "10.0.0.1@tcp:/other"], "names file system other, not --filesystem lfsfs"),
])
def test_bad_options_get_one_line_and_exit_3(tmp_path: Path, extra: list[str], says: str) -> None:
    code, text, _ = render(tmp_path, *GKE_ARGS, *extra)
    assert code == 3 and says in text and "Traceback" not in text


def test_missing_provider_options_are_named(tmp_path: Path) -> None:
    code, text, _ = render(tmp_path, "-p", str(GKE), "--provider", "gke-managed-lustre", "--instance", "x")
    assert code == 3 and "--project, --location, --network, --capacity-gib" in text
    code, text, _ = render(tmp_path, "-p", str(GKE), "--provider", "netapp")
    assert code == 3 and "use one of gke-managed-lustre, fsx, static" in text
