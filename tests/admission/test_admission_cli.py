"""`fabricguard admission review` and `fabricguard render webhook` through the real CLI app."""

from __future__ import annotations

import json
from pathlib import Path

import jsonpatch
import yaml
from admission_support import FIXTURES, PROFILES, load_review
from typer.testing import CliRunner

from fabricguard.admission import review as rv
from fabricguard.cli import app

runner = CliRunner()
GKE = str(next(p for p in PROFILES if p.stem == "gke-a3-ultra"))


def test_review_file_prints_patched_response() -> None:
    res = runner.invoke(app, ["admission", "review", "--profile", GKE, str(FIXTURES / "jobset.json")])
    assert res.exit_code == 0, res.output
    body = json.loads(res.stdout)
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    assert body["response"]["uid"] == load_review("jobset")["request"]["uid"]
    obj = jsonpatch.apply_patch(load_review("jobset")["request"]["object"], rv.decode_patch(body))
    assert obj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "h200"


def test_review_stdin_denied_exits_1() -> None:
    review = load_review("jobset")
    c = review["request"]["object"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["containers"][0]
    c["env"].append({"name": "NCCL_IB_DISABLE", "value": "1"})
    res = runner.invoke(app, ["admission", "review", "--profile", GKE, "-"], input=json.dumps(review))
    assert res.exit_code == 1
    body = json.loads(res.stdout)
    assert body["response"]["allowed"] is False and "NCCL_IB_DISABLE" in body["response"]["status"]["message"]


def test_review_rejects_non_review_input(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}')
    res = runner.invoke(app, ["admission", "review", "--profile", GKE, str(bad)])
    assert res.exit_code == 3
    assert "admission.k8s.io/v1" in res.stderr


def test_render_webhook_digest_and_tag_warning() -> None:
    digest = "ghcr.io/acme/fabricguard@sha256:" + "0" * 64
    res = runner.invoke(app, ["render", "webhook", "--profile", GKE, "--image", digest, "-n", "fg",
                              "--apiserver-cidr", "172.16.0.32/28", "--apiserver-cidr", "10.0.0.1"])
    assert res.exit_code == 0, res.output
    assert "warning" not in res.stderr
    docs = list(yaml.safe_load_all(res.stdout))
    kinds = [d["kind"] for d in docs]
    assert "MutatingWebhookConfiguration" in kinds and "Deployment" in kinds
    dep = next(d for d in docs if d["kind"] == "Deployment")
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == digest
    pol = next(d for d in docs if d["kind"] == "NetworkPolicy")
    assert pol["spec"]["ingress"][0]["from"] == [{"ipBlock": {"cidr": "172.16.0.32/28"}},
                                                 {"ipBlock": {"cidr": "10.0.0.1/32"}}]
    # By default the webhook port admits the API server only: without its CIDR, nothing is rendered.
    res = runner.invoke(app, ["render", "webhook", "--profile", GKE, "--image", digest])
    assert res.exit_code == 3 and res.stdout == ""
    assert "no --apiserver-cidr" in res.stderr and "--any-source" in res.stderr
    res = runner.invoke(app, ["render", "webhook", "--profile", GKE, "--image", "ghcr.io/acme/fabricguard:0.1",
                              "--any-source"])
    assert res.exit_code == 0
    assert "tag-only" in res.stderr and "--any-source: the NetworkPolicy admits the webhook port from any" in res.stderr
    pol = next(d for d in yaml.safe_load_all(res.stdout) if d["kind"] == "NetworkPolicy")
    assert "from" not in pol["spec"]["ingress"][0]  # open, as asked
    res = runner.invoke(app, ["render", "webhook", "--profile", GKE, "--image", digest, "--apiserver-cidr", "nope"])
    assert res.exit_code == 3 and "--apiserver-cidr 'nope' is not a CIDR" in res.stderr


def test_admission_never_imports_torch() -> None:
    import subprocess
    import sys

    code = ("import sys, fabricguard.admission.server, fabricguard.admission.commands, fabricguard.cli; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_serve_refuses_a_key_that_is_not_the_certificates(tmp_path: Path) -> None:
    from admission_support import make_tls

    one = make_tls(tmp_path / "one")
    two = make_tls(tmp_path / "two")
    res = runner.invoke(app, ["admission", "serve", "--profile", GKE, "--cert", str(one.cert), "--key", str(two.key),
                              "--port", "0", "--health-port", "0"])
    assert res.exit_code == 3
    stderr = " ".join(res.stderr.split())  # the console wraps long paths
    assert str(one.cert) in stderr.replace(" ", "") or str(one.cert) in stderr
    assert "Traceback" not in res.output
