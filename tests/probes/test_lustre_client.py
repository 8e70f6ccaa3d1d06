"""The Lustre client's health in FabricReady, on node trees in Lustre's own formats (lustre-release at c881f8e:
``obd_sysfs.c`` health_check, ``lprocfs_status.c`` import/state, ``liblnetconfig.c`` lnetctl YAML), with a real
``lnetctl`` stand-in executable so the agent's bounded runner is exercised as it runs on a node."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from fabricguard.probes.host import lustre_client_checks, probe_host
from fabricguard.probes.lustre_client import (
    Lnetctl,
    parse_lnet_nets,
    parse_lnet_peers,
    parse_state_history,
    read_imports,
)
from fabricguard.probes.result import Status
from fabricguard.profile import load_profile

from .conftest import FakeNode

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "profiles"
NOW = 1764600000.0


@pytest.fixture(scope="module")
def onprem():
    return load_profile(EXAMPLES / "onprem-infiniband.yaml")


def lnet_net_show(health: int = 1000, status: str = "up") -> str:
    """``lnetctl net show -v 3`` as liblnetconfig prints it (lo first, then the LNet network)."""
    return f"""net:
    - net type: lo
      local NI(s):
        - nid: 0@lo
          status: up
          statistics:
              send_count: 0
              recv_count: 0
              drop_count: 0
    - net type: tcp
      local NI(s):
        - nid: 10.1.0.21@tcp
          status: {status}
          interfaces:
              0: eth0
          statistics:
              send_count: 5120334
              recv_count: 5120330
              drop_count: 0
          health stats:
              fatal_error: 0
              health value: {health}
              interrupts: 0
              dropped: 0
              aborted: 0
              no route: 0
              timeouts: 0
              error: 0
"""


def lnet_peer_show(health: int = 1000, nid: str = "10.1.0.5@tcp") -> str:
    """``lnetctl peer show -v 3``: the file system's server and an unrelated peer at full health."""
    return f"""peer:
    - primary nid: {nid}
      Multi-Rail: True
      peer state: 273
      peer ni:
        - nid: {nid}
          state: up
          max_ni_tx_credits: 8
          available_tx_credits: 8
          min_tx_credits: 6
          tx_q_num_of_buf: 0
          available_rtr_credits: 8
          min_rtr_credits: 8
          refcount: 1
          statistics:
              send_count: 192919
              recv_count: 192919
              drop_count: 0
          health stats:
              health value: {health}
              dropped: 0
              timeout: 3
              error: 0
              network timeout: 0
    - primary nid: 10.1.0.99@tcp
      Multi-Rail: False
      peer ni:
        - nid: 10.1.0.99@tcp
          state: NA
          health stats:
              health value: 1000
"""


def fake_lnetctl(tmp_path: Path, net: str, peer: str, *, body: str | None = None) -> Lnetctl:
    """A real executable answering ``<net|peer> show -v 3`` as lnetctl does."""
    (tmp_path / "net.yaml").write_text(net)
    (tmp_path / "peer.yaml").write_text(peer)
    script = tmp_path / "lnetctl"
    script.write_text(body or f'#!/bin/sh\ncase "$1" in net) cat {tmp_path}/net.yaml;; peer) cat {tmp_path}/peer.yaml;; '
                      '*) exit 2;; esac\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return Lnetctl([str(script)], timeout=2.0)


def checks(onprem, node: FakeNode, lnetctl: Lnetctl | None = None) -> dict[str, object]:
    return {c.name: c for c in lustre_client_checks(onprem, onprem.pool("h100-ib"), node.root, lnetctl, now=NOW)}


def healthy(node: FakeNode, **kw: object) -> FakeNode:
    return node.mountinfo().lustre_client(**kw)  # type: ignore[arg-type]


def test_healthy_client_passes_every_check(node, onprem, tmp_path):
    c = checks(onprem, healthy(node), fake_lnetctl(tmp_path, lnet_net_show(), lnet_peer_show()))
    assert {n: v.status for n, v in c.items()} == {  # type: ignore[attr-defined]
        "lustre.health": Status.passed, "lustre.imports": Status.passed, "lustre.evictions": Status.passed,
        "lustre.lnet": Status.passed, "lustre.jobid": Status.passed}
    assert "3 imports of file system lfsfs connected" in c["lustre.imports"].detail  # type: ignore[attr-defined]


def test_evicted_client_fails_naming_the_target_and_the_line(node, onprem):
    evicted = int(NOW) - 600
    healthy(node, history={"lfsfs-OST0001": [(evicted - 5, "FULL"), (evicted, "DISCONN"), (evicted, "EVICTED"),
                                            (evicted + 1, "CONNECTING"), (evicted + 1, "FULL")]})
    c = checks(onprem, node)["lustre.evictions"]
    assert c.status is Status.failed  # type: ignore[attr-defined]
    assert "lfsfs-OST0001 evicted at" in c.detail and f"[ {evicted}, EVICTED ]" in c.detail  # type: ignore[attr-defined]


def test_an_old_eviction_outside_the_window_passes(node, onprem):
    healthy(node, history={"lfsfs-OST0000": [(int(NOW) - 7200, "EVICTED"), (int(NOW) - 7199, "FULL")]})
    assert checks(onprem, node)["lustre.evictions"].status is Status.passed  # type: ignore[attr-defined]


def test_non_full_import_fails_naming_it(node, onprem):
    healthy(node, states={"lfsfs-OST0001": "DISCONN"})
    c = checks(onprem, node)["lustre.imports"]
    assert c.status is Status.failed  # type: ignore[attr-defined]
    assert "lfsfs-OST0001: state: DISCONN" in c.detail and "1 of 3 imports" in c.detail  # type: ignore[attr-defined]


def test_idle_import_is_healthy(node, onprem):
    # osc.*.idle_timeout (2.12+) disconnects an unused OSC on purpose; it reconnects on the next RPC.
    healthy(node, states={"lfsfs-OST0000": "IDLE"})
    assert checks(onprem, node)["lustre.imports"].status is Status.passed  # type: ignore[attr-defined]


def test_imports_of_another_file_system_do_not_count(node, onprem):
    node.mountinfo().lustre_client("scratch")
    c = checks(onprem, node)["lustre.imports"]
    assert c.status is Status.failed and "no OSC/MDC import of file system lfsfs" in c.detail  # type: ignore[attr-defined]
    assert "imports seen: scratch" in c.detail  # type: ignore[attr-defined]


def test_procfs_layout_of_older_clients_is_read(node, onprem):
    healthy(node, layout="proc/fs/lustre", states={"lfsfs-MDT0000": "CONNECTING"})
    c = checks(onprem, node)["lustre.imports"]
    assert c.status is Status.failed and "lfsfs-MDT0000: state: CONNECTING" in c.detail  # type: ignore[attr-defined]


@pytest.mark.parametrize("text", ["NOT HEALTHY", "LBUG"])
def test_unhealthy_client_fails_quoting_health_check(node, onprem, text):
    healthy(node, health=text)
    c = checks(onprem, node)["lustre.health"]
    assert c.status is Status.failed and repr(text) in c.detail  # type: ignore[attr-defined]


def test_lnet_peer_at_900_fails_naming_the_peer(node, onprem, tmp_path):
    healthy(node)
    c = checks(onprem, node, fake_lnetctl(tmp_path, lnet_net_show(), lnet_peer_show(900)))["lustre.lnet"]
    assert c.status is Status.failed  # type: ignore[attr-defined]
    assert "peer 10.1.0.5@tcp: health value 900" in c.detail and "10.1.0.99" not in c.detail  # type: ignore[attr-defined]


def test_lnet_local_ni_health_and_status(node, onprem, tmp_path):
    healthy(node)
    c = checks(onprem, node, fake_lnetctl(tmp_path, lnet_net_show(health=0, status="down"),
                                          lnet_peer_show()))["lustre.lnet"]
    assert c.status is Status.failed  # type: ignore[attr-defined]
    assert "local NI 10.1.0.21@tcp: status down" in c.detail  # type: ignore[attr-defined]
    assert "local NI 10.1.0.21@tcp: health value 0" in c.detail  # type: ignore[attr-defined]


def test_no_lnetctl_is_said_not_passed(node, onprem):
    healthy(node)
    c = checks(onprem, node, Lnetctl(None))["lustre.lnet"]
    assert c.status is Status.skipped and "lnetctl is not available" in c.detail  # type: ignore[attr-defined]


def test_lnetctl_that_never_exits_is_cut_at_its_deadline(node, onprem, tmp_path):
    healthy(node)
    lnet = fake_lnetctl(tmp_path, "", "", body="#!/bin/sh\nsleep 30\n")
    lnet.timeout = 0.5
    t = time.monotonic()
    c = checks(onprem, node, lnet)["lustre.lnet"]
    assert time.monotonic() - t < 5
    assert c.status is Status.skipped and "did not finish within 0.5 s" in c.detail  # type: ignore[attr-defined]


def test_lnetctl_that_prints_forever_is_capped(node, onprem, tmp_path):
    healthy(node)
    lnet = fake_lnetctl(tmp_path, "", "", body="#!/bin/sh\nexec yes 'net:'\n")
    lnet.max_output = 1 << 20
    c = checks(onprem, node, lnet)["lustre.lnet"]
    assert c.status is Status.skipped and "printed more than 1 MiB" in c.detail  # type: ignore[attr-defined]


def test_lnetctl_garbage_fails_instead_of_passing(node, onprem, tmp_path):
    healthy(node)
    c = checks(onprem, node, fake_lnetctl(tmp_path, "net: [: {", lnet_peer_show()))["lustre.lnet"]
    assert c.status is Status.failed and "no YAML" in c.detail  # type: ignore[attr-defined]


def test_hostile_files_are_refused_not_hung_on(node, onprem):
    healthy(node)
    hc = node.root / "sys/fs/lustre/health_check"
    hc.unlink()
    os.mkfifo(hc)
    imp = next((node.root / "sys/kernel/debug/lustre/osc").iterdir()) / "import"
    imp.unlink()
    imp.symlink_to("/dev/zero")
    t = time.monotonic()
    c = checks(onprem, node)
    assert time.monotonic() - t < 5
    assert c["lustre.health"].status is Status.failed  # type: ignore[attr-defined]
    assert c["lustre.imports"].status is Status.failed and "unreadable" in c["lustre.imports"].detail  # type: ignore


def test_missing_client_files_fail_closed(node, onprem):
    node.mountinfo()
    c = checks(onprem, node)
    assert c["lustre.health"].status is Status.failed  # type: ignore[attr-defined]
    assert c["lustre.imports"].status is Status.failed  # type: ignore[attr-defined]


def test_a_failing_client_check_makes_the_node_not_ready(node, onprem):
    for i in range(8):
        node.hca(f"mlx5_{i}")
    node.modules().mountinfo().lustre_client(states={"lfsfs-OST0000": "EVICTED"})
    node.lib("usr/lib/x86_64-linux-gnu/libibverbs.so.1")
    r = probe_host(onprem, onprem.pool("h100-ib"), root=node.root, nvml_json=node.nvml(8))
    assert r.verdict == "not ready"
    assert [c.name for c in r.checks if c.status is Status.failed] == ["lustre.imports"]


def test_parsers_on_lustre_formats():
    assert parse_state_history("current_state: FULL\nstate_history:\n - [ 1558016440, CONNECTING ]\n"
                               " - [ 1558016460, EVICTED ]\n") == [(1558016440, "CONNECTING"), (1558016460, "EVICTED")]
    nis = parse_lnet_nets(lnet_net_show(950))
    assert [(n.nid, n.status, n.health) for n in nis] == [("10.1.0.21@tcp", "up", 950)]
    peers = parse_lnet_peers(lnet_peer_show())
    assert [(p.nid, p.health) for p in peers] == [("10.1.0.5@tcp", 1000), ("10.1.0.99@tcp", 1000)]


def test_imports_read_once_across_layouts(node):
    node.lustre_client(layout="sys/kernel/debug/lustre").lustre_client(layout="proc/fs/lustre")
    imps = read_imports(node.root)
    assert len(imps) == 3 and {i.connection for i in imps} == {"10.1.0.5@tcp"}


def test_disabled_in_the_profile_is_skipped(node, onprem):
    prof = onprem.model_copy(deep=True)
    assert prof.spec.storage.lustre is not None
    prof.spec.storage.lustre.clientHealth.enabled = False
    healthy(node, health="NOT HEALTHY")
    out = lustre_client_checks(prof, prof.pool("h100-ib"), node.root)
    assert [(c.name, c.status) for c in out] == [("lustre.client", Status.skipped)]


def test_untagged_client_is_degraded_not_failed(node, onprem):
    healthy(node, jobid_var="disable")
    c = checks(onprem, node)["lustre.jobid"]
    assert c.status is Status.degraded  # type: ignore[attr-defined]
    assert "jobid_var is 'disable', not FG_LUSTRE_JOBID" in c.detail  # type: ignore[attr-defined]
    assert "lctl set_param -P jobid_var=FG_LUSTRE_JOBID" in c.detail  # type: ignore[attr-defined]


def test_the_jobid_variable_fits_lustres_limit():
    from fabricguard import names

    assert len(names.LUSTRE_JOBID_ENV) <= 20  # JOBSTATS_JOBID_VAR_MAX_LEN (lustre-release lprocfs_status.h)


def _run_sidecar(tmp_path: Path, lnetctl_body: str) -> Path:
    """The rendered lnet sidecar's own script, run for one round: ``chroot /host`` is a stand-in that runs the
    command on this machine's PATH (where a stand-in ``lnetctl`` answers), ``timeout`` and the shell are real."""
    import subprocess

    from fabricguard.agent.render import LNET_DIR, LNET_SCRIPT

    out = tmp_path / "lnet"
    out.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("chroot", '#!/bin/sh\nshift\nexec "$@"\n'), ("lnetctl", lnetctl_body)):
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    script = LNET_SCRIPT.replace(LNET_DIR, str(out))
    proc = subprocess.Popen(["/bin/sh", "-c", script], env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any((out / f"peer.{x}").exists() for x in ("yaml", "err")):
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
    return out


def test_the_rendered_sidecar_feeds_the_unprivileged_agents_lnet_check(node, onprem, tmp_path):
    (tmp_path / "n.yaml").write_text(lnet_net_show())
    (tmp_path / "p.yaml").write_text(lnet_peer_show(900))
    out = _run_sidecar(tmp_path, f'#!/bin/sh\ncase "$1" in net) cat {tmp_path}/n.yaml;; peer) cat {tmp_path}/p.yaml;; '
                                 "*) exit 2;; esac\n")
    lnet = Lnetctl.from_option(f"dir:{out}")
    c = checks(onprem, healthy(node), lnet)["lustre.lnet"]
    assert c.status is Status.failed and "10.1.0.5@tcp: health value 900" in c.detail, c  # type: ignore[attr-defined]
    # A snapshot the sidecar stopped refreshing is not trusted.
    old = time.time() - 3600
    for f in out.glob("*.yaml"):
        os.utime(f, (old, old))
    c = checks(onprem, healthy(node), lnet)["lustre.lnet"]
    assert c.status is Status.skipped and "stopped writing it" in c.detail  # type: ignore[attr-defined]


def test_a_sidecar_that_cannot_run_lnetctl_says_why(node, onprem, tmp_path):
    out = _run_sidecar(tmp_path, "#!/bin/sh\necho 'ioctl: Permission denied' >&2\nexit 1\n")
    assert not (out / "net.yaml").exists()
    c = checks(onprem, healthy(node), Lnetctl.from_option(f"dir:{out}"))["lustre.lnet"]
    assert c.status is Status.skipped and "Permission denied" in c.detail, c  # type: ignore[attr-defined]
