"""Helpers for the admission tests: fixtures on disk, a throw-away TLS CA (trustme), kubernetes-validate wrappers.

kubernetes-validate ships only the built-in API schemas, so a JobSet's pod templates are validated by
wrapping each replicated job's Job spec into a batch/v1 Job, and a TrainJob's trainer plus fabricguard's
runtime patch by assembling the pod the Trainer would create into a v1 Pod.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes_validate
import trustme

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
    """A trustme CA and a serving certificate for 127.0.0.1/localhost written where the server reads them."""

    ca: trustme.CA
    ca_path: Path
    cert: Path
    key: Path

    def issue(self, common_name: str, cert: Path | None = None, key: Path | None = None) -> trustme.LeafCert:
        """Issue another serving certificate from the same CA; write it (to ``cert``/``key`` when given)."""
        leaf = self.ca.issue_cert("127.0.0.1", "localhost", common_name=common_name)
        if cert is not None:
            cert.write_bytes(b"".join(p.bytes() for p in leaf.cert_chain_pems))
        if key is not None:
            key.write_bytes(leaf.private_key_pem.bytes())
        return leaf


def make_tls(d: Path, common_name: str = "fabricguard-admission one") -> TlsFiles:
    d.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    tls = TlsFiles(ca, d / "ca.crt", d / "tls.crt", d / "tls.key")
    ca.cert_pem.write_to_path(str(tls.ca_path))
    tls.issue(common_name, tls.cert, tls.key)
    return tls


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


def decide(profile: Any, review: dict[str, Any], endpoint: str = "review") -> dict[str, Any]:
    """The webhook's answer to ``review`` through the server's own decision code; asserts the wire basics."""
    from fabricguard.admission.decide import Admission

    d = Admission(profile).handle(endpoint, json.dumps(review))  # type: ignore[arg-type]
    assert d.status == 200
    assert d.body["response"]["uid"] == review["request"]["uid"]
    return d.body["response"]


def workers(review: dict[str, Any]) -> dict[str, Any]:
    """The pod spec of a JobSet review's worker replicated job."""
    return review["request"]["object"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]


def pod_specs(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod specs of a workload the webhook patches in place (a Pod, a Job's template, each JobSet replicated
    job's); [] for a kind whose pods are not in the object (a TrainJob)."""
    if obj["kind"] == "Pod":
        return [obj["spec"]]
    if obj["kind"] == "Job":
        return [obj["spec"]["template"]["spec"]]
    if obj["kind"] == "JobSet":
        return [rj["template"]["spec"]["template"]["spec"] for rj in obj["spec"]["replicatedJobs"]]
    return []
