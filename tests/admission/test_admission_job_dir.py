"""The job's directory made writable by a non-root workload (issue 24 item 9): the init container the webhook puts
first in every managed pod that mounts the job's directory, and the command it runs.

- mutation: every kind under every example profile, reviewed, stored as the API server stores it and reviewed
  again, keeps one init container (no duplicate on reinvocation), with the owner the pod's security context asks
  for; another webhook changing the user in between brings it up to date;
- policy: the mutated pod passes Pod Security baseline (its rules, as the standard lists them) and our compensating
  ValidatingAdmissionPolicy (CEL evaluated as the API server would);
- the command: ``python -m fabricguard storage job-dir`` as a subprocess against a temp directory, as root with only
  CAP_CHOWN/CAP_FOWNER (``setpriv``, as the container runs it), then a non-root workload writing there; a tenant's
  links in the way are refused and nothing behind them changes.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from admission_support import KINDS, PROFILES, load_review, pod_specs, with_object
from apiserver_defaults import kueue_suspend, stored_form
from test_admission_pod_security import refusals

from fabricguard.admission import review as rv
from fabricguard.admission.decide import Admission
from fabricguard.admission.mutate import LUSTRE_VOLUME
from fabricguard.admission.podsecurity import BASELINE_CAPABILITIES, policy
from fabricguard.profile import PlatformProfile, load_profile, loads_profile
from fabricguard.storage import jobdir
from fabricguard.userfiles import SourceError

IMAGE = "ghcr.io/acme/fabricguard-agent:0.2.0@sha256:" + "a" * 64
LUSTRE = [p for p in PROFILES if "lustre:" in p.read_text()]
GKE = Path(__file__).parents[2] / "examples/profiles/gke-a3-ultra.yaml"


@pytest.fixture
def gke_lustre() -> PlatformProfile:
    return load_profile(GKE)


def _mutated(adm: Admission, review: dict[str, Any]) -> dict[str, Any]:
    d = adm.handle("mutate", json.dumps(review))
    body = d.body["response"]
    assert body["allowed"], body
    patch = rv.decode_patch(d.body)
    return jsonpatch.apply_patch(review["request"]["object"], patch) if patch else review["request"]["object"]


def _ours(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in spec.get("initContainers") or () if c.get("name") == jobdir.INIT_CONTAINER]


def _gpu_specs(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in pod_specs(obj)
            if any("nvidia.com/gpu" in ((c.get("resources") or {}).get("limits") or {}) for c in s["containers"])]


@pytest.mark.parametrize("path", LUSTRE, ids=[p.stem for p in LUSTRE])
@pytest.mark.parametrize("kind", KINDS)
def test_one_init_container_first_and_settled_after_storage_and_reinvocation(path: Path, kind: str) -> None:
    adm = Admission(load_profile(path), job_dir_image=IMAGE)
    review = load_review(kind)
    obj = _mutated(adm, review)
    specs = _gpu_specs(obj)
    if kind == "trainjob":
        assert specs == [] and jobdir.INIT_CONTAINER not in json.dumps(obj)  # runtimePatches cannot add one
        return
    assert specs, kind
    for spec in specs:
        ours = _ours(spec)
        assert len(ours) == 1 and spec["initContainers"][0] is ours[0], spec.get("initContainers")
        c = ours[0]
        assert c["image"] == IMAGE and c["command"] == ["fabricguard"]
        # It mounts the namespace's directory (never the file system's root) and walks to the job's from there.
        assert c["args"][:6] == ["storage", "job-dir", "--root", jobdir.JOB_MOUNT, "--path", "$(FG_JOB)"]
        assert c["volumeMounts"] == [{"name": LUSTRE_VOLUME, "mountPath": jobdir.JOB_MOUNT,
                                      "subPathExpr": "$(FG_NAMESPACE)"}]
        # The names its args expand are its own env, from the same labels as the GPU containers'.
        gpu_env = {e["name"]: e for e in spec["containers"][0]["env"]}
        assert all(gpu_env[e["name"]] == e for e in c["env"]), c["env"]
        assert c["resources"]["requests"] == c["resources"]["limits"]  # a Guaranteed pod stays Guaranteed
        sc = c["securityContext"]
        assert sc["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN", "FOWNER"]}
        assert sc["runAsUser"] == 0 and sc["runAsNonRoot"] is False and sc["allowPrivilegeEscalation"] is False
    stored = stored_form(obj)
    for again in (stored, kueue_suspend(stored), _mutated(adm, with_object(review, stored))):
        for endpoint in ("mutate", "review"):
            d = adm.handle(endpoint, json.dumps(with_object(review, again)))
            assert d.body["response"]["allowed"]
            assert rv.decode_patch(d.body) == [], (endpoint, rv.decode_patch(d.body))
    assert all(len(_ours(s)) == 1 for s in _gpu_specs(stored))


def _with_security(obj: dict[str, Any], pod: dict[str, Any] | None, container: dict[str, Any] | None) -> None:
    for spec in pod_specs(obj):
        if pod is not None:
            spec["securityContext"] = dict(pod)
        if container is not None:
            for c in spec["containers"]:
                c["securityContext"] = {**(c.get("securityContext") or {}), **container}


@pytest.mark.parametrize(("pod", "container", "want"), [
    ({"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 2000}, None, ["--mode", "2775", "--uid", "1000", "--gid", "2000"]),
    ({"runAsUser": 1000}, None, ["--mode", "0755", "--uid", "1000"]),
    ({"fsGroup": 3000, "runAsNonRoot": True}, None, ["--mode", "2775", "--gid", "3000"]),
    (None, None, ["--mode", "1777"]),
    ({"runAsUser": 1000, "fsGroup": 2000}, {"runAsUser": 1001}, ["--mode", "2775", "--uid", "1001", "--gid", "2000"]),
    ({"runAsGroup": 5000}, None, ["--mode", "2775", "--gid", "5000"]),
])
def test_the_owner_follows_the_pods_security_context(gke_lustre: PlatformProfile, pod: Any, container: Any,
                                                     want: list[str]) -> None:
    adm = Admission(gke_lustre, job_dir_image=IMAGE)
    review = load_review("jobset")
    _with_security(review["request"]["object"], pod, container)
    obj = _mutated(adm, review)
    for spec in _gpu_specs(obj):
        args = _ours(spec)[0]["args"]
        assert args[args.index("--mode"):] == want


def test_two_users_in_one_pod_share_through_the_group() -> None:
    spec = {"securityContext": {"fsGroup": 4000},
            "containers": [{"securityContext": {"runAsUser": 1}}, {"securityContext": {"runAsUser": 2}}]}
    assert jobdir.owner_for(spec, spec["containers"]) == jobdir.Owner(None, 4000, 0o2775)
    spec = {"containers": [{"securityContext": {"runAsUser": 1}}, {}]}
    assert jobdir.owner_for(spec, spec["containers"]) == jobdir.Owner(None, None, 0o1777)


def test_another_webhook_changing_the_user_brings_it_up_to_date(gke_lustre: PlatformProfile) -> None:
    adm = Admission(gke_lustre, job_dir_image=IMAGE)
    review = load_review("jobset")
    stored = stored_form(_mutated(adm, review))
    _with_security(stored, {"runAsUser": 4242, "fsGroup": 4242}, None)  # a later webhook (say, a UID allocator)
    d = adm.handle("mutate", json.dumps(with_object(review, stored)))
    patch = rv.decode_patch(d.body)
    assert patch and {op["op"] for op in patch} == {"replace"}, patch
    assert all(op["path"].endswith("/initContainers/0") for op in patch), patch
    again = stored_form(jsonpatch.apply_patch(stored, patch))
    assert rv.decode_patch(adm.handle("mutate", json.dumps(with_object(review, again))).body) == []
    for spec in _gpu_specs(again):
        assert len(_ours(spec)) == 1 and "4242" in _ours(spec)[0]["args"]


def test_the_users_init_containers_keep_their_order_after_it(gke_lustre: PlatformProfile) -> None:
    adm = Admission(gke_lustre, job_dir_image=IMAGE)
    review = load_review("job")
    spec = review["request"]["object"]["spec"]["template"]["spec"]
    spec["initContainers"] = [{"name": "prefetch", "image": "busybox:1.37", "command": ["true"]},
                              {"name": "sidecar", "image": "busybox:1.37", "restartPolicy": "Always",
                               "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
    obj = _mutated(adm, review)
    names = [c["name"] for c in obj["spec"]["template"]["spec"]["initContainers"]]
    assert names == [jobdir.INIT_CONTAINER, "prefetch", "sidecar"]


def test_no_image_or_turned_off_means_no_init_container(gke_lustre: PlatformProfile) -> None:
    review = load_review("jobset")
    assert jobdir.INIT_CONTAINER not in json.dumps(_mutated(Admission(gke_lustre), review))
    text = GKE.read_text()
    off = text.replace("      claimName:", "      jobDirectory: {enabled: false}\n      claimName:", 1)
    assert off != text
    assert jobdir.INIT_CONTAINER not in json.dumps(_mutated(Admission(loads_profile(off), job_dir_image=IMAGE),
                                                            load_review("jobset")))
    mine = text.replace("      claimName:", "      jobDirectory: {image: 'registry.example.com/tools:1'}\n"
                                             "      claimName:", 1)
    obj = _mutated(Admission(loads_profile(mine), job_dir_image=IMAGE), load_review("jobset"))
    assert {_ours(s)[0]["image"] for s in _gpu_specs(obj)} == {"registry.example.com/tools:1"}


# ---------------------------------------------------------------------------------------------- policy

# Pod Security Standards, baseline (kubernetes.io/docs/concepts/security/pod-security-standards/#baseline): what
# each control allows, checked on every container of the pod (init ones included).
BASELINE_SECCOMP = (None, "RuntimeDefault", "Localhost")
BASELINE_SELINUX_TYPES = (None, "", "container_t", "container_init_t", "container_kvm_t", "container_engine_t")


def baseline_violations(spec: dict[str, Any]) -> list[str]:
    out = []
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            out.append(key)
    if any("hostPath" in v for v in spec.get("volumes") or ()):
        out.append("hostPath volumes")
    if (spec.get("securityContext") or {}).get("windowsOptions", {}).get("hostProcess"):
        out.append("hostProcess")
    for c in [*(spec.get("initContainers") or ()), *spec["containers"]]:
        sc = c.get("securityContext") or {}
        if sc.get("privileged"):
            out.append(f"{c['name']}: privileged")
        extra = set((sc.get("capabilities") or {}).get("add") or ()) - set(BASELINE_CAPABILITIES)
        if extra:
            out.append(f"{c['name']}: capabilities {sorted(extra)}")
        if any(p.get("hostPort") for p in c.get("ports") or ()):
            out.append(f"{c['name']}: hostPort")
        if (sc.get("seccompProfile") or {}).get("type") not in BASELINE_SECCOMP:
            out.append(f"{c['name']}: seccomp")
        if (sc.get("seLinuxOptions") or {}).get("type") not in BASELINE_SELINUX_TYPES:
            out.append(f"{c['name']}: seLinux type")
        if sc.get("procMount") not in (None, "Default"):
            out.append(f"{c['name']}: procMount")
        if (sc.get("appArmorProfile") or {}).get("type") not in (None, "RuntimeDefault", "Localhost"):
            out.append(f"{c['name']}: appArmor")
    return out


def test_the_init_container_passes_baseline_and_our_policy_and_more_would_not(gke_lustre: PlatformProfile) -> None:
    pol, _ = policy(gke_lustre)
    review = load_review("pod-bare-group")
    pod = _mutated(Admission(gke_lustre, job_dir_image=IMAGE), review)
    assert _ours(pod["spec"]), pod["spec"].get("initContainers")
    ours = {**pod, "spec": {**pod["spec"], "containers": [], "volumes": [
        v for v in pod["spec"].get("volumes") or () if "hostPath" not in v]}}  # the init container alone
    assert baseline_violations(ours["spec"]) == []
    assert refusals(pol, pod) == []
    for change, control in ((lambda c: c["securityContext"]["capabilities"]["add"].append("SYS_ADMIN"), "capabilities"),
                            (lambda c: c["securityContext"].update(privileged=True), "privileged")):
        bad = copy.deepcopy(pod)
        change(_ours(bad["spec"])[0])
        assert refusals(pol, bad), control
        assert any(control in v for v in baseline_violations(bad["spec"])), control


# ---------------------------------------------------------------------------------------------- the command

AS_CONTAINER = ["setpriv", "--inh-caps=-all,+chown,+fowner", "--ambient-caps=-all,+chown,+fowner",
                "--bounding-set=-all,+chown,+fowner", "--"]


def _can_run_as_the_container() -> bool:
    """Root, setpriv, and the capabilities to hand out (a container without CAP_SETPCAP cannot drop others)."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return False
    return subprocess.run([*AS_CONTAINER, "true"], capture_output=True, timeout=10).returncode == 0


ROOT_NEEDED = pytest.mark.skipif(not _can_run_as_the_container(),
                                 reason="needs root, setpriv (util-linux) and CAP_SETPCAP to run as the container "
                                        "does (CAP_CHOWN and CAP_FOWNER only)")


@pytest.fixture
def open_tmp() -> Any:
    """A temporary directory other users can reach (pytest's tmp_path is under a 0700 root-owned folder)."""
    d = Path(tempfile.mkdtemp(prefix="fg-jobdir-"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _run(args: list[str], prefix: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src"), "COLUMNS": "200"}
    return subprocess.run([*(prefix or []), sys.executable, "-m", "fabricguard", "storage", "job-dir", *args],
                          capture_output=True, text=True, timeout=60, env=env)


def _as_user(uid: int, gid: int, groups: str, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={gid}", f"--groups={groups}",
                           "--inh-caps=-all", "--bounding-set=-all", "--", sys.executable, "-c", code],
                          capture_output=True, text=True, timeout=30)


@ROOT_NEEDED
def test_the_command_gives_a_non_root_workload_its_directory(open_tmp: Path) -> None:
    root = open_tmp / "lustre"
    job = root / "team-a" / "llm-7b"
    job.mkdir(parents=True, mode=0o750)  # what the kubelet leaves for a subPath: root's, not the workload's
    write = f"open({str(job / '.fabricguard/nccl/host.1')!r}, 'w').write('NCCL INFO')"
    assert _as_user(1000, 1000, "2000", f"open({str(job / 'x')!r}, 'w')").returncode != 0  # the bug
    # As the init container runs it: --root is its mount of the namespace's directory.
    args = ["--root", str(root / "team-a"), "--path", "llm-7b", "--subdir", ".fabricguard/nccl",
            "--subdir", ".fabricguard/inspector", "--uid", "1000", "--gid", "2000", "--mode", "2775"]
    res = _run(args, AS_CONTAINER)
    assert res.returncode == 0, res.stderr
    assert f"{job}: changed, owner 1000:2000, mode 2775" in res.stdout, res.stdout
    for d in (job, job / ".fabricguard", job / ".fabricguard/nccl", job / ".fabricguard/inspector"):
        st = os.lstat(d)
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1000, 2000, 0o2775), d
    st = os.lstat(root / "team-a")
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o755)
    # The workload (uid 1000, fsGroup 2000 as a supplementary group) writes its logs; so does another user of
    # the group; a user of neither cannot.
    assert _as_user(1000, 1000, "2000", write).returncode == 0
    assert _as_user(1001, 1001, "2000", write.replace("host.1", "host.2")).returncode == 0
    assert _as_user(1002, 1002, "1002", write.replace("host.1", "host.3")).returncode != 0
    assert os.lstat(job / ".fabricguard/nccl/host.2").st_gid == 2000  # setgid: the ranks' files keep the group
    # A rerun (the pod restarted) changes nothing; one that adds a directory takes the parent back for a moment.
    owner = jobdir.Owner(1000, 2000, 0o2775)
    assert jobdir.prepare(root, "team-a/llm-7b", [".fabricguard/nccl", ".fabricguard/inspector"], owner) == []
    assert jobdir.prepare(root, "team-a/llm-7b", [".fabricguard/nccl", "ckpt"], owner) == [
        f"{job / 'ckpt'}: created, owner 1000:2000, mode 2775"]
    st = os.lstat(job)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1000, 2000, 0o2775)


@ROOT_NEEDED
def test_nobody_known_gets_a_sticky_shared_directory(open_tmp: Path) -> None:
    root = open_tmp / "lustre"
    root.mkdir()
    res = _run(["--root", str(root), "--path", "ns/job", "--subdir", "logs"], AS_CONTAINER)
    assert res.returncode == 0, res.stderr
    assert stat.S_IMODE(os.lstat(root / "ns/job").st_mode) == 0o1777
    assert _as_user(65532, 65532, "65532", f"open({str(root / 'ns/job/logs/a')!r}, 'w')").returncode == 0


def _attack(open_tmp: Path, attack: str) -> tuple[Path, str, list[Path]]:
    root = open_tmp / "lustre"
    victim = root / "team-b" / "secret"
    victim.mkdir(parents=True, mode=0o700)
    etc = open_tmp / "etc"
    etc.mkdir(mode=0o755)
    (root / "team-a").mkdir(0o755)
    path = "team-a/llm"
    if attack == "job-link":
        (root / "team-a" / "llm").symlink_to("../team-b/secret")
    elif attack == "namespace-link":
        (root / "team-a").rmdir()
        (root / "team-a").symlink_to(etc)
    elif attack == "subdir-link":
        (root / "team-a" / "llm").mkdir()
        (root / "team-a" / "llm" / ".fabricguard").symlink_to(etc)
    elif attack == "job-is-a-file":
        (root / "team-a" / "llm").write_text("x")
    else:
        path = "team-a/../team-b/secret"
    return root, path, [victim, etc]


def _unchanged(before: dict[Path, os.stat_result]) -> None:
    for p, st in before.items():
        now = os.lstat(p)
        assert (now.st_uid, now.st_gid, now.st_mode) == (st.st_uid, st.st_gid, st.st_mode), p
        assert list(p.iterdir()) == [], p


@ROOT_NEEDED
def test_a_tenants_link_is_refused_by_the_command(open_tmp: Path) -> None:
    root, path, targets = _attack(open_tmp, "job-link")
    before = {p: os.lstat(p) for p in targets}
    res = _run(["--root", str(root), "--path", path, "--subdir", ".fabricguard/nccl", "--uid", "1000",
                "--gid", "1000", "--mode", "2775"], AS_CONTAINER)
    assert res.returncode == 3, (res.returncode, res.stdout, res.stderr)
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert lines == [f"error: {root}/team-a/llm: is a link: refused (a link here could lead anywhere on the "
                     "file system); remove it"], res.stderr
    _unchanged(before)


@pytest.mark.parametrize("attack", ["job-link", "namespace-link", "subdir-link", "job-is-a-file", "dotdot"])
def test_a_tenants_link_is_refused_and_nothing_behind_it_changes(open_tmp: Path, attack: str) -> None:
    root, path, targets = _attack(open_tmp, attack)
    before = {p: os.lstat(p) for p in targets}
    with pytest.raises(SourceError) as err:
        jobdir.prepare(root, path, [".fabricguard/nccl"], jobdir.Owner(1000, 1000, 0o2775))
    assert any(w in err.value.problem for w in ("is a link", "not a directory", "'..'")), err.value
    _unchanged(before)


@ROOT_NEEDED
def test_without_chown_it_fails_naming_the_directory(open_tmp: Path) -> None:
    """A root-squashed file system answers root's chown with EPERM, as a root without CAP_CHOWN gets here."""
    root = open_tmp / "lustre"
    root.mkdir()
    res = _run(["--root", str(root), "--path", "ns/job", "--uid", "1000", "--mode", "0755"],
               ["setpriv", "--inh-caps=-all", "--bounding-set=-all", "--"])
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "ns/job: cannot give it owner 1000:root" in res.stderr and "CAP_CHOWN" in res.stderr, res.stderr


@ROOT_NEEDED
def test_a_refused_mkdir_is_the_file_system_not_the_input(open_tmp: Path) -> None:
    """Root squash maps root to nobody: the claim's root (another user's, 0755) refuses root's mkdir with EACCES,
    as it does here to a root without CAP_DAC_OVERRIDE. That is exit 2 with the file system named, not exit 3
    telling a person to remove something in the way."""
    root = open_tmp / "lustre"
    root.mkdir(mode=0o755)
    os.chown(root, 1234, 1234)
    res = _run(["--root", str(root), "--path", "ns/job", "--uid", "1000", "--mode", "0755"],
               ["setpriv", "--inh-caps=-all", "--bounding-set=-all", "--"])
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert res.stderr.startswith(f"error: {root / 'ns'}: cannot create: Permission denied (a root-squashed"), res.stderr
    assert "removes what is in the way" not in res.stderr, res.stderr


@pytest.mark.parametrize("bad", [["--mode", "9999"], ["--path", "/abs"], ["--path", "a//b"], ["--mode", "x"],
                                 ["--uid", "99999999999"], ["--uid", "4294967295"], ["--gid", "2147483648"]])
def test_bad_options_are_one_line_and_exit_3(tmp_path: Path, bad: list[str]) -> None:
    from typer.testing import CliRunner

    from fabricguard.cli import app

    opts = {"--root": str(tmp_path), "--path": "ns/job", bad[0]: bad[1]}
    res = CliRunner().invoke(app, ["storage", "job-dir", *[x for kv in opts.items() for x in kv]])
    assert res.exit_code == 3, res.output
    assert res.output.startswith("error:") and "Traceback" not in res.output, res.output


@pytest.mark.parametrize(("bad", "says", "hint"), [
    (["--root", "{tmp}/not-mounted"], "--root: ", "mount the namespace's directory at --root"),
    (["--path", "../x"], "--path: ", "give --path as <job> below --root"),
    (["--subdir", "../../etc"], "--subdir: ", "give --path as <job> below --root"),
])
def test_each_refusal_names_the_option_and_what_to_change(tmp_path: Path, bad: list[str], says: str,
                                                         hint: str) -> None:
    """A claim not mounted is not "something in the way": the hint fits the option that is wrong."""
    from typer.testing import CliRunner

    from fabricguard.cli import app

    opts = {"--root": str(tmp_path), "--path": "ns/job", bad[0]: bad[1].format(tmp=tmp_path)}
    res = CliRunner().invoke(app, ["storage", "job-dir", *[x for kv in opts.items() for x in kv]])
    assert res.exit_code == 3, res.output
    error, hint_line = res.output.splitlines()[:2]
    assert error.startswith("error: " + says) and hint_line.startswith("hint: " + hint), res.output
    assert not (tmp_path / "not-mounted").exists() and not (tmp_path.parent / "x").exists()


def test_the_install_gives_the_webhook_the_agents_image(gke_lustre: PlatformProfile) -> None:
    from fabricguard.placement import install

    digest = "@sha256:" + "b" * 64
    opts = install.Options(image=f"r.example.com/fabricguard:1{digest}",
                           agent_image=f"r.example.com/fabricguard-agent:1{digest}",
                           canary_image=f"r.example.com/fabricguard-canary:1{digest}",
                           apiserver_cidrs=("172.16.0.0/28",))
    comps = install.components(gke_lustre, GKE.read_text(), opts)
    deploys = [o for c in comps for o in c.objects if o["kind"] == "Deployment"
               and o["metadata"]["name"] == "fabricguard-admission"]
    assert len(deploys) == 1
    args = deploys[0]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--job-dir-image") + 1] == opts.agent_image
    # `admission serve` takes it; a bad reference is one line, exit 3.
    from typer.testing import CliRunner

    from fabricguard.cli import app

    res = CliRunner().invoke(app, ["admission", "serve", "-p", str(GKE), "--cert", "/nonexistent",
                                   "--key", "/nonexistent", "--job-dir-image", "a b"])
    assert res.exit_code == 3 and res.output.startswith("error: --job-dir-image"), res.output


def test_log_directories_are_made_plain_or_left_out() -> None:
    """The profile's logDir/dumpDir as the command accepts them: a sloppy path is made plain, one that leaves the
    job's directory is not made (the command would refuse it, and the pod would never start)."""
    text = GKE.read_text()
    for log_dir, want in (("nccl//logs/", ("nccl/logs",)), ("../elsewhere", ())):
        prof = loads_profile(text.replace("      claimName:", f"      logDir: {log_dir!r}\n      claimName:", 1))
        obj = _mutated(Admission(prof, job_dir_image=IMAGE), load_review("jobset"))
        for spec in _gpu_specs(obj):
            args = _ours(spec)[0]["args"]
            assert tuple(args[i + 1] for i, a in enumerate(args) if a == "--subdir") == want, args


@pytest.mark.parametrize("kind", ["job", "pod-owned"])
def test_no_init_container_where_the_users_own_mount_is_kept(gke_lustre: PlatformProfile, kind: str) -> None:
    """Where the user keeps their own volume at the job directory's mountPath (listed in allow-override, or an
    owned Pod, which the webhook does not refuse), the job's volume is not added: an init container mounting it
    would name a volume the pod does not have, and the API server would refuse the pod itself
    (spec.initContainers[0].volumeMounts[0].name: Not found)."""
    from fabricguard import names

    review = load_review(kind)
    obj = review["request"]["object"]
    obj["metadata"].setdefault("annotations", {})[names.ANN_ALLOW_OVERRIDE] = "/mnt/lustre"
    for spec in _gpu_specs(obj):
        spec.setdefault("volumes", []).append({"name": "data", "persistentVolumeClaim": {"claimName": "theirs"}})
        for c in spec["containers"]:
            c.setdefault("volumeMounts", []).append({"name": "data", "mountPath": "/mnt/lustre"})
    out = _mutated(Admission(gke_lustre, job_dir_image=IMAGE), with_object(review, obj))
    specs = _gpu_specs(out)
    assert specs
    for spec in specs:
        volumes = {v["name"] for v in spec.get("volumes") or ()}
        for c in spec.get("initContainers") or ():
            missing = [m["name"] for m in c.get("volumeMounts") or () if m["name"] not in volumes]
            assert not missing, (c["name"], missing, sorted(volumes))
        assert _ours(spec) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (chown to another user)")
def test_a_failed_rerun_gives_back_the_directory_it_took(open_tmp: Path) -> None:
    """A rerun that must create in the workload's own directory takes it back for the moment; when a later part
    is refused (a tenant's file where a log directory goes), the directory is given back, not left root's (with
    0755 and no group the workload could no longer write its own job's directory)."""
    root = open_tmp / "lustre"
    job = root / "ns" / "job"
    job.mkdir(parents=True)
    os.chown(job, 1000, 1000)
    os.chmod(job, 0o755)
    (job / ".fabricguard").write_text("a tenant's file where the log directory goes")
    with pytest.raises(SourceError, match="is not a directory"):
        jobdir.prepare(root, "ns/job", ["ckpt", ".fabricguard/nccl"], jobdir.Owner(1000, None, 0o755))
    st = os.lstat(job)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1000, 1000, 0o755)


def test_namespace_dirs_are_roots_and_never_made_through_a_link(open_tmp: Path) -> None:
    """The install's Job: each training namespace's directory (its volume's root), root's and 0755; a link in the
    way is refused naming it (exit 3) and what it points at stays as it was."""
    from typer.testing import CliRunner

    from fabricguard.cli import app

    root = open_tmp / "lustre"
    (root / "ml-search").mkdir(parents=True, mode=0o777)  # an older install's, looser
    os.chmod(root / "ml-search", 0o777)
    res = CliRunner().invoke(app, ["storage", "namespace-dirs", "--root", str(root), "ml-training", "ml-search",
                                   "teams/ml-ranking"])
    assert res.exit_code == 0, res.output
    for d in ("ml-training", "ml-search", "teams", "teams/ml-ranking"):
        st = os.lstat(root / d)
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o755, d
    again = CliRunner().invoke(app, ["storage", "namespace-dirs", "--root", str(root), "ml-training"])
    assert again.exit_code == 0 and "already there" in again.output
    elsewhere = open_tmp / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (root / "ml-adhoc").symlink_to(elsewhere)
    res = CliRunner().invoke(app, ["storage", "namespace-dirs", "--root", str(root), "ml-adhoc"])
    assert res.exit_code == 3 and "ml-adhoc" in res.output, res.output
    assert stat.S_IMODE(os.lstat(elsewhere).st_mode) == 0o700
    # A bad argument is named as the argument it is (there is no --path here), before anything is made.
    res = CliRunner().invoke(app, ["storage", "namespace-dirs", "--root", str(root), "ml-new", "../etc"])
    assert res.exit_code == 3 and "DIRECTORY: '../etc'" in res.output and "--path" not in res.output, res.output
    assert not (root / "ml-new").exists()


def test_a_rooted_namespace_refuses_a_claim_still_at_the_file_system_root(open_tmp: Path) -> None:
    """Upgrade order gone wrong: the webhook roots ml-training's jobs at its claim, but the claim is still the file
    system's root. The init container finds no mark of the namespace there and exits 2 naming what to do, instead
    of making <root>/<job> where the controller never reads (and where another namespace's job of the same name
    would write too)."""
    from typer.testing import CliRunner

    from fabricguard.cli import app

    root = open_tmp / "lustre"
    root.mkdir()
    args = ["storage", "job-dir", "--root", str(root), "--expect-namespace-dir", "ml-training", "--path", "llm"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2 and "not rooted at the namespace's directory 'ml-training'" in res.output, res.output
    # The hint is the upgrade's, not a root-squash one (capabilities change nothing here), and says what it found.
    assert "CAP_CHOWN" not in res.output and "kubectl delete pv" in res.output, res.output
    assert "has no .fabricguard-namespace" in res.output, res.output
    assert not (root / "llm").exists()
    made = CliRunner().invoke(app, ["storage", "namespace-dirs", "--root", str(root), "ml-training"])
    assert made.exit_code == 0 and jobdir.NAMESPACE_MARK in made.output, made.output
    # The namespace's volume is rooted there now: the init container's mount of its claim is <root>/ml-training.
    args[3] = str(root / "ml-training")
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert (root / "ml-training" / "llm").is_dir()
