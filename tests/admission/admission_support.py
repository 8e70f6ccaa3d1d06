"""Helpers for the admission tests: fixtures on disk, a throw-away TLS CA, kubernetes-validate wrappers.

kubernetes-validate ships only the built-in API schemas, so a JobSet's pod templates are validated by
wrapping each replicated job's Job spec into a batch/v1 Job, and a TrainJob's trainer plus fabricguard's
runtime patch by assembling the pod the Trainer would create into a v1 Pod.
"""

from __future__ import annotations

import copy
import datetime as dt
import ipaddress
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes_validate
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
PROFILES = sorted((HERE.parents[1] / "examples" / "profiles").glob("*.yaml"))
KINDS = ["jobset", "trainjob", "job", "pod-owned", "pod-bare-group"]


def load_review(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def with_object(review: dict[str, Any], obj: dict[str, Any], uid: str | None = None) -> dict[str, Any]:
    out = copy.deepcopy(review)
    out["request"]["object"] = obj
    if uid:
        out["request"]["uid"] = uid
    return out


@dataclass
class TlsFiles:
    ca: Path
    cert: Path
    key: Path
    ca_pem: bytes
    ca_key: ec.EllipticCurvePrivateKey
    ca_cert: x509.Certificate


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_ca() -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(_name("fabricguard test CA")).issuer_name(_name("fabricguard test CA"))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(key, hashes.SHA256()))
    return key, cert


def issue(ca_key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate, cn: str,
          cert_path: Path, key_path: Path) -> x509.Certificate:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert



VERSION = kubernetes_validate.latest_version()


def check(obj: dict[str, Any]) -> None:
    kubernetes_validate.validate(obj, VERSION, strict=True)


def check_workload(obj: dict[str, Any]) -> int:
    """Validate the pods a workload describes; return how many objects were checked."""
    kind = obj["kind"]
    meta = {"name": obj["metadata"].get("name") or "generated", "namespace": "ml-team"}
    if kind in ("Job", "Pod"):
        check(obj)
        return 1
    if kind == "JobSet":
        n = 0
        for rj in obj["spec"]["replicatedJobs"]:
            check({"apiVersion": "batch/v1", "kind": "Job", "metadata": {**meta, "name": f"{meta['name']}-{rj['name']}"},
                   "spec": rj["template"]["spec"]})
            n += 1
        return n
    if kind == "TrainJob":
        trainer = obj["spec"]["trainer"]
        container = {"name": "node", "image": trainer["image"], "env": trainer.get("env", []),
                     "resources": trainer.get("resourcesPerNode", {})}
        pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": dict(meta),
                               "spec": {"containers": [container]}}
        for p in obj["spec"].get("runtimePatches", []):
            for rj in p["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]:
                tpl = copy.deepcopy(rj["template"]["spec"]["template"])
                pod["metadata"].update(tpl.get("metadata", {}))
                spec = tpl.get("spec", {})
                for c in spec.pop("containers", []):
                    if c["name"] == "node":
                        container.update({k: v for k, v in c.items() if k != "name"})
                pod["spec"].update(spec)
        check(pod)
        return 1
    raise AssertionError(f"unexpected kind {kind}")
