"""Bad input of every class: one ``error:`` line naming the file or option, exit 3, no traceback, no hang.

FIFOs are tested in a child process with a time limit: opening one for reading blocks until a writer
appears, so a command that opened it before looking at what it is would hang the test (and fail it).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import trustme
from cli_support import EXAMPLES, GKE, JOBS, SNAPSHOTS, one_error_line, refused, run, run_process

NVML = Path(__file__).resolve().parents[1] / "fixtures" / "h200-host" / "nvml.json"
PROD = SNAPSHOTS / "incident-271-days" / "production"


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    p = tmp_path / "pipe.yaml"
    os.mkfifo(p)
    return p


# --- inputs that are not regular files -----------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["profile", "check", "{fifo}"],
        ["verify-job", str(JOBS / "rdma-healthy"), "--profile", "{fifo}"],
        ["storage", "where", "/mnt/lustre", "--mountinfo", "{fifo}"],
        ["admission", "review", "-p", str(GKE), "{fifo}"],
        ["probe", "host", "--nvml-json", "{fifo}"],
        ["doctor", "--snapshot", str(PROD), "--profile", "{fifo}"],
        ["doctor", "--kubeconfig", "{fifo}"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_a_fifo_is_refused_without_opening_it(argv: list[str], fifo: Path) -> None:
    p = run_process(*[a.replace("{fifo}", str(fifo)) for a in argv], timeout=60)
    assert p.returncode == 3, p.stderr
    line = one_error_line(p.stderr)
    assert str(fifo) in line and "FIFO" in line


def test_a_fifo_in_a_snapshot_folder_is_refused(tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    shutil.copytree(PROD, snap)
    (snap / "pods.json").unlink()
    os.mkfifo(snap / "pods.json")
    p = run_process("doctor", "--snapshot", snap, "--format", "json", timeout=60)
    assert p.returncode == 3 and "pods.json" in one_error_line(p.stderr) and "FIFO" in p.stderr


def test_character_devices_and_proc_files(tmp_path: Path) -> None:
    refused(run("profile", "check", "/dev/zero"), "/dev/zero", "character device")
    # /proc files are regular files: read like any other, and judged by their content.
    refused(run("profile", "check", "/proc/self/status"), "/proc/self/status")
    r = run("storage", "where", "/", "--mountinfo", "/proc/self/mountinfo", "--expect", "no-such-fs", "--format", "json")
    assert r.exit_code == 1 and json.loads(r.stdout)["verdict"] == "degraded"
    refused(run("verify-job", str(JOBS / "rdma-healthy"), "-p", "/proc/self/mem"), "/proc/self/mem")


def test_directory_where_a_file_is_expected_and_the_reverse(tmp_path: Path) -> None:
    refused(run("profile", "check", str(tmp_path)), str(tmp_path), "directory")
    refused(run("storage", "where", "/x", "--mountinfo", str(tmp_path)), "--mountinfo", "directory")
    refused(run("probe", "host", "--nvml-json", str(tmp_path)), "--nvml-json", "directory")
    refused(run("verify-job", str(GKE), "-p", str(GKE)), str(GKE), "not a directory")
    refused(run("doctor", "--snapshot", str(GKE)), str(GKE), "not a directory")
    refused(run("doctor", "diff", str(PROD), str(GKE)), str(GKE))


def test_missing_files_name_themselves(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    refused(run("profile", "check", str(missing)), str(missing), "no such file")
    refused(run("admission", "review", "-p", str(GKE), str(missing)), str(missing), "no such file")
    refused(run("validate", "--gpu-ceilings", str(missing), "--skip", "host,collective,storage"), str(missing))


# --- outputs -------------------------------------------------------------------------------------------


def test_unusable_output_paths(tmp_path: Path, fifo: Path) -> None:
    args = ["doctor", "--snapshot", str(PROD), "--now", "2025-09-30T12:00:00Z", "--format", "json"]
    refused(run(*args, "-o", str(tmp_path)), "-o/--output", "is a directory")
    refused(run(*args, "-o", str(tmp_path / "no" / "such" / "dir" / "r.json")), "does not exist")
    refused(run(*args, "-o", str(GKE / "r.json")), "is a file, not a folder")
    # Writing to a FIFO would block until someone reads it: refused before the audit runs.
    p = run_process(*args, "-o", str(fifo), timeout=60)
    assert p.returncode == 3 and "FIFO" in one_error_line(p.stderr)
    refused(run("doctor", "diff", str(PROD), str(PROD), "-o", str(tmp_path)), "is a directory")
    # Folder outputs: a file where the folder should be, or a folder that cannot be created.
    afile = tmp_path / "afile"
    afile.write_text("x")
    refused(run("validate", "-o", str(afile), "--skip", "collective,storage,gpu"), "-o/--output", "is a file")
    refused(run("probe", "collective", "-o", str(afile / "logs")), "-o/--output", str(afile))
    refused(run("snapshot", str(afile)), str(afile), "is a file")
    refused(run("validate", "--storage-path", str(afile), "--skip", "host,collective,gpu"), str(afile), "not a directory")
    # The report lands where asked when the path is good.
    good = tmp_path / "report.json"
    r = run(*args, "-o", str(good))
    assert r.exit_code == 1 and json.loads(good.read_text())["verdict"] == "degraded"


@pytest.mark.skipif(os.geteuid() != 0, reason="a read-only mount needs /proc, which only root may not write")
def test_read_only_output_folder() -> None:
    # /proc is read-only even for root: os.access reports it, so the refusal does not depend on the user.
    refused(run("doctor", "--snapshot", str(PROD), "--format", "json", "-o", "/proc/fabricguard.json"), "/proc")


# --- files of the wrong shape --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("[1, 2, 3]", 'a "gpus" list'),
        ('{"gpus": {"0": {}}}', 'a "gpus" list'),
        ('{"gpus": [1]}', "gpus[0] is int"),
        ('{"gpus": [{"index": {"a": 1}}]}', "gpus[0].index is an object"),
        ("not json", "not JSON"),
        ("", "not JSON"),
    ],
)
def test_nvml_json_of_the_wrong_shape(tmp_path: Path, content: str, says: str) -> None:
    bad = tmp_path / "nvml.json"
    bad.write_text(content)
    refused(run("probe", "host", "--nvml-json", str(bad)), "--nvml-json", str(bad), says)
    refused(run("validate", "--nvml-json", str(bad), "--skip", "collective,storage,gpu"), str(bad), says)


def test_recorded_nvml_data_is_still_read(tmp_path: Path) -> None:
    r = run("probe", "host", "--nvml-json", str(NVML), "--format", "json")
    assert r.exit_code in (0, 1, 2) and json.loads(r.stdout)["verdict"] in ("pass", "degraded", "failed")


def test_gpu_ceilings_of_the_wrong_shape(tmp_path: Path) -> None:
    bad = tmp_path / "ceilings.json"
    bad.write_text('{"bf16_matmul_tflops": "fast"}')
    refused(run("validate", "--gpu-ceilings", str(bad), "--skip", "host,collective,storage"), str(bad), "not a number")
    bad.write_text('{"bf16_tflops": 700}')  # a misspelt key would leave nothing to compare with
    refused(run("validate", "--gpu-ceilings", str(bad), "--skip", "host,collective,storage"), str(bad), "none of")


# --- names and certificates ----------------------------------------------------------------------------


@pytest.mark.parametrize("namespace", ["", "Fabric", "fabric_guard", "-x", "x" * 64, "a/b"])
def test_render_webhook_namespace_must_be_a_dns_label(namespace: str) -> None:
    r = run("render", "webhook", "-p", str(GKE), "--image", "registry.example.com/fg:v1", "--namespace", namespace)
    refused(r, "--namespace")


def test_render_webhook_accepts_a_good_namespace() -> None:
    r = run("render", "webhook", "-p", str(GKE), "--image", "registry.example.com/fg:v1", "-n", "fabricguard-system",
            "--apiserver-cidr", "172.16.0.0/28")
    assert r.exit_code == 0 and "namespace: fabricguard-system" in r.stdout
    # The embedded profile, asked for by name, renders like a file.
    assert run("render", "webhook", "-p", "local", "--image", "registry.example.com/fg:v1",
               "--any-source").exit_code == 0


def test_tls_files_name_what_is_wrong(tmp_path: Path) -> None:
    ca = trustme.CA()
    one, other = ca.issue_cert("a.example.com"), ca.issue_cert("b.example.com")
    cert, key, other_key = tmp_path / "tls.crt", tmp_path / "tls.key", tmp_path / "other.key"
    one.cert_chain_pems[0].write_to_path(str(cert))
    one.private_key_pem.write_to_path(str(key))
    other.private_key_pem.write_to_path(str(other_key))
    serve = ["admission", "serve", "-p", str(GKE), "--port", "0"]
    refused(run(*serve, "--cert", str(tmp_path / "none.crt"), "--key", str(key)), "--cert", "no such file")
    refused(run(*serve, "--cert", str(cert), "--key", str(tmp_path)), "--key", "directory")
    refused(run(*serve, "--cert", str(key), "--key", str(key)), "--cert", str(key), "BEGIN CERTIFICATE")
    refused(run(*serve, "--cert", str(cert), "--key", str(cert)), "--key", str(cert), "PRIVATE KEY")
    refused(run(*serve, "--cert", str(cert), "--key", str(other_key)), str(other_key), "does not belong")


def _kubeconfig(tmp_path: Path, **over) -> Path:
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1", "certificate-authority": "ca.crt"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    } | over
    p = tmp_path / "kubeconfig"
    p.write_text(json.dumps(cfg))
    return p


def test_kubeconfig_errors_name_the_file_and_the_problem(tmp_path: Path) -> None:
    refused(run("doctor", "--kubeconfig", str(tmp_path / "none")), str(tmp_path / "none"), "no such file")
    notcfg = tmp_path / "notcfg"
    notcfg.write_text("just: text\n")
    refused(run("doctor", "--kubeconfig", str(notcfg)), str(notcfg), "not a kubeconfig")
    cfg = _kubeconfig(tmp_path)
    refused(run("doctor", "--kubeconfig", str(cfg), "--context", "prod"), str(cfg), "'prod'", "contexts: ctx")
    # The CA file the cluster names is missing (relative paths are read beside the kubeconfig).
    refused(run("doctor", "--kubeconfig", str(cfg)), str(cfg), str(tmp_path / "ca.crt"), "no such file")
    refused(run("snapshot", str(tmp_path / "out"), "--kubeconfig", str(cfg)), str(cfg), "ca.crt")
    # With the CA present, the server is unreachable: the message names the server and the file.
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    line = refused(run("doctor", "--kubeconfig", str(cfg)), "https://127.0.0.1:1", str(cfg))
    assert "cannot read the cluster" in line


def test_kubeconfig_alias_bomb_is_refused(tmp_path: Path) -> None:
    bomb = tmp_path / "kubeconfig"
    bomb.write_text(_alias_bomb())
    refused(run("doctor", "--kubeconfig", str(bomb)), str(bomb), "alias bomb")


def _alias_bomb() -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, cur in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_examples_still_work(tmp_path: Path) -> None:
    job = tmp_path / "job"
    shutil.copytree(JOBS / "rdma-healthy", job)
    assert run("verify-job", str(job), "-p", str(GKE)).exit_code == 0
    assert run("profile", "check", *map(str, sorted((EXAMPLES / "profiles").glob("*.yaml")))).exit_code == 0


@pytest.mark.parametrize("args", [
    ["controller", "-p", GKE, "--once", "--canary-image", "x"],
    ["pool", "transition", "status", "--from", EXAMPLES / "transitions" / "gke-block-a.yaml",
     "--to", EXAMPLES / "transitions" / "gke-block-b.yaml"],
    ["agent", "--once", "--node", "n", "-p", GKE],
    ["agent-sweep"],
])
def test_a_broken_kubeconfig_is_named_by_every_command_that_writes(tmp_path: Path, args: list) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("garbage\n")
    line = refused(run(*args, "--kubeconfig", bad), str(bad), "not a kubeconfig")
    assert "TypeError" not in line


@pytest.mark.parametrize("argv", [["render", "agent", "--image", "r.example.com/fga:1@sha256:" + "ab" * 32],
                                  ["preflight"], ["render", "controller", "--image",
                                                                 "r.example.com/fg:1@sha256:" + "ab" * 32]])
def test_a_missing_profile_file_is_not_told_to_fix_fields(tmp_path: Path, argv: list[str]) -> None:
    """Issue 24: a profile path that does not exist has no field to fix: the hint says what to pass instead."""
    missing = tmp_path / "no-such-profile.yaml"
    r = run(*argv, "--profile", str(missing))
    assert r.exit_code == 3, r.output
    assert "no such file or directory" in r.output and "fix the fields" not in r.output
    assert "examples/profiles" in r.output and "Traceback" not in r.output
