"""``Kube.exec`` end to end against a websocket exec server on real HTTPS (``exec_server.py``: the API server's
checks before the upgrade, then a kubelet that runs the command and speaks ``v5``/``v4.channel.k8s.io`` as the
Kubernetes source does; that module's docstring names what was read). The controller asks NCCL's RAS this way
(controller/hang.py); its rendered role is the one the server authorizes here."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from exec_server import SUBPROTOCOLS, ExecServer, Pod, kubeconfig, serving
from fabricguard.controller.kube import CONTROLLER_GRANTS
from fabricguard.kube import Forbidden, Invalid, Kube, KubeError, NotFound, Permissions, TimedOut, Timeouts
from fabricguard.nccl.ras import parse_status
from fabricguard.rbac import grants, rbac_rules
from kube_support import Rbac

RAS = Path(__file__).parents[1] / "fixtures" / "ras"
FAST = Timeouts(connect=2.0, read=2.0, call=3.0, list=3.0)


def _role(table: frozenset, name: str) -> dict:  # type: ignore[type-arg]
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
            "rules": rbac_rules(table, "cluster")}


def _rbac() -> Rbac:
    # "controller": the controller's rendered ClusterRole; "old": the role of last session (create only, as SPDY
    # exec needed); "reader": no exec at all.
    return (Rbac().bind("controller", [_role(CONTROLLER_GRANTS, "controller")])
            .bind("old", [_role(frozenset(grants("v1", "pods", ["create"], subresource="exec")), "old")])
            .bind("reader", [_role(frozenset(grants("v1", "pods", ["get", "list"])), "reader")]))


@pytest.fixture()
async def exec_server(tmp_path: Path):
    srv = ExecServer(rbac=_rbac(), tokens={"c": "controller", "o": "old", "r": "reader"})
    srv.pods[("team", "w-0")] = Pod(["trainer"])
    srv.pods[("team", "two")] = Pod(["trainer", "sidecar"])
    srv.pods[("team", "crash")] = Pod(["trainer"], running=False)
    async with serving(srv, tmp_path):
        yield srv, tmp_path


async def _kube(srv: ExecServer, tmp: Path, token: str = "c", **kw: object) -> Kube:
    perms = Permissions(CONTROLLER_GRANTS, "fabricguard", "controller")
    return await Kube.connect(kubeconfig(tmp, srv, token), timeouts=FAST, permissions=perms, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("protocols", [SUBPROTOCOLS, ("v4.channel.k8s.io",)], ids=["v5", "v4-only"])
async def test_a_ras_answer_comes_back_on_stdout(exec_server, protocols) -> None:
    srv, tmp = exec_server
    srv.protocols = protocols
    kube = await _kube(srv, tmp)
    report = RAS / "v2.30.7-hung-rank9-q1.json"
    out = await kube.exec("team", "w-0", ["cat", str(report)], container="trainer", timeout=10)
    assert out == report.read_bytes()  # byte for byte, over several 32 KiB messages' worth of framing
    assert parse_status(out).comms
    assert srv.negotiated == [protocols[0]]
    # A report larger than one message (the kubelet writes 32 KiB at a time) arrives whole.
    big = await kube.exec("team", "two", [sys.executable, "-c", "import sys; sys.stdout.write('r' * 200000)"],
                          container="trainer", timeout=10)
    assert big == b"r" * 200000
    await kube.close()


async def test_a_non_zero_exit_is_an_error_naming_the_code_and_stderr(exec_server) -> None:
    srv, tmp = exec_server
    kube = await _kube(srv, tmp)
    cmd = [sys.executable, "-c", "import sys; print('partial'); "
           "sys.stderr.write('ConnectionRefusedError: [Errno 111] Connection refused'); sys.exit(3)"]
    with pytest.raises(KubeError) as err:
        await kube.exec("team", "w-0", cmd, container="trainer", timeout=10)
    assert err.value.reason == "NonZeroExitCode" and not isinstance(err.value, TimedOut)
    assert "exit 3" in str(err.value) and "Connection refused" in str(err.value)
    assert "/api/v1/namespaces/team/pods/w-0/exec" in str(err.value) and srv.url in str(err.value)
    await kube.close()


async def test_refusals_before_the_upgrade_are_typed(exec_server) -> None:
    srv, tmp = exec_server
    reader = await _kube(srv, tmp, "r")
    with pytest.raises(Forbidden) as fb:
        await reader.exec("team", "w-0", ["true"], container="trainer", timeout=5)
    assert fb.value.status == 403 and 'cannot get resource "pods/exec"' in str(fb.value)
    # Last session's role granted only create (what SPDY's POST needed): a websocket GET is refused.
    old = await _kube(srv, tmp, "o")
    with pytest.raises(Forbidden, match='cannot get resource "pods/exec"'):
        await old.exec("team", "w-0", ["true"], container="trainer", timeout=5)
    kube = await _kube(srv, tmp)
    # A 1.35 server checks create as well: the controller's role holds both.
    assert await kube.exec("team", "w-0", ["true"], container="trainer", timeout=5) == b""
    with pytest.raises(NotFound, match='pods "gone" not found'):
        await kube.exec("team", "gone", ["true"], container="trainer", timeout=5)
    with pytest.raises(Invalid, match="container sidecar is not valid for pod w-0") as bad:
        await kube.exec("team", "w-0", ["true"], container="sidecar", timeout=5)
    assert bad.value.status == 400
    with pytest.raises(Invalid, match="a container name must be specified for pod two"):
        await kube.exec("team", "two", ["true"], timeout=5)
    # In the spec but not running: the upgrade succeeds, the error stream says so.
    with pytest.raises(KubeError, match=r'did not run: .*container not found \("trainer"\)') as nr:
        await kube.exec("team", "crash", ["true"], container="trainer", timeout=5)
    assert nr.value.reason == "InternalError"
    for k in (reader, old, kube):
        await k.close()


async def test_the_permission_table_is_checked_before_anything_is_sent(exec_server) -> None:
    from fabricguard.kube import Undeclared

    srv, tmp = exec_server
    only_create = Permissions(frozenset(grants("v1", "pods", ["create"], subresource="exec")), "x", "client")
    kube = await Kube.connect(kubeconfig(tmp, srv, "c"), timeouts=FAST, permissions=only_create)
    with pytest.raises(Undeclared, match="get on pods/exec"):
        await kube.exec("team", "w-0", ["true"], container="trainer", timeout=5)
    assert srv.negotiated == []
    await kube.close()


async def _eventually(cond, deadline: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + deadline
    while not cond():
        assert time.monotonic() < end, "condition not met in time"
        await asyncio.sleep(0.02)


async def test_a_server_that_never_answers_is_bounded_by_the_timeout(exec_server) -> None:
    srv, tmp = exec_server
    kube = await _kube(srv, tmp)
    # Upgraded, then the command says nothing (a RAS that never answers, a stuck process).
    t0 = time.monotonic()
    with pytest.raises(TimedOut, match="no answer within"):
        await kube.exec("team", "w-0", ["sleep", "30"], container="trainer", timeout=0.6)
    assert time.monotonic() - t0 < 3.0
    await _eventually(lambda: len(srv.killed) == 1)  # the client went away: the kubelet ended the command
    # The upgrade itself never answered (an overloaded API server).
    srv.hold_upgrade = True
    t0 = time.monotonic()
    with pytest.raises(TimedOut):
        await kube.exec("team", "w-0", ["true"], container="trainer", timeout=0.6)
    assert time.monotonic() - t0 < 3.0
    await kube.close()


async def test_output_past_the_cap_stops_the_read_and_is_an_error(exec_server) -> None:
    srv, tmp = exec_server
    kube = await _kube(srv, tmp)
    flood = [sys.executable, "-c", "import sys\nfor _ in range(1024): sys.stdout.buffer.write(b'x' * 65536)"]
    with pytest.raises(KubeError, match="cap of 1048576 bytes") as err:
        await kube.exec("team", "w-0", flood, container="trainer", timeout=10, max_bytes=1 << 20)
    assert err.value.reason == "OutputTooLarge"
    await _eventually(lambda: len(srv.killed) == 1)
    assert srv.sent["stdout"] < 32 << 20  # of 64 MiB: the client stopped reading, the command was ended
    await kube.close()


# ------------------------------------------------------------------ the controller's RAS query, end to end

RAS_POD = r"""
import socket, sys
report = open(sys.argv[1], 'rb').read()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', 28028)); s.listen(8)
print('ready', flush=True)
while True:
    c, _ = s.accept(); f = c.makefile('rwb')
    for answer in (b'SERVER PROTOCOL 2\n', b'OK\n'):
        f.readline(); f.write(answer); f.flush()
    f.readline(); f.write(report); f.flush(); f.close(); c.close()
"""


@pytest.fixture()
def ras_pod() -> Iterator[int]:
    """A pod sandbox: its own network namespace with NCCL's RAS port answered on localhost (NCCL 2.30.7's
    report of a job hung on rank 9)."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("nsenter") or not shutil.which("ip"):
        pytest.skip("needs root, unshare, nsenter and ip (util-linux, iproute2) for a pod's network namespace")
    with subprocess.Popen(["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$0" -c "$1" "$2"',
                           sys.executable, RAS_POD, str(RAS / "v2.30.7-hung-rank9-q1.json")],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None and proc.stderr is not None
            if proc.stdout.readline().strip() != "ready":  # a container without CAP_SYS_ADMIN, say
                proc.wait(5)
                pytest.skip(f"cannot make a network namespace here: {proc.stderr.read().strip()[:200]}")
            yield proc.pid
        finally:
            proc.kill()


async def test_the_controller_asks_ras_inside_the_pod_through_exec(ras_pod, tmp_path: Path) -> None:
    from fabricguard.controller.runner import exec_querier
    from fabricguard.controller.suspects import PodPlace

    srv = ExecServer(rbac=_rbac(), tokens={"c": "controller"})
    srv.pods[("team", "w-0")] = Pod(["trainer"], netns_pid=ras_pod)
    async with serving(srv, tmp_path):
        kube = await _kube(srv, tmp_path)
        job = type("Job", (), {"namespace": "team", "name": "llm"})()
        raw = await exec_querier(kube)(job, PodPlace("w-0", "node-a", ("10.8.0.10",), "trainer"))  # type: ignore[arg-type]
        status = parse_status(raw)
        assert raw == (RAS / "v2.30.7-hung-rank9-q1.json").read_bytes() and len(status.comms) == 1
        await kube.close()


async def test_a_rotated_token_is_reloaded_once_on_401(exec_server) -> None:
    """A 401 on the upgrade (an expired or rotated service-account token) loads the credentials again and
    upgrades once more, as every other request does; a token still refused is a Forbidden."""
    srv, tmp = exec_server
    path = Path(kubeconfig(tmp, srv, "expired"))
    kube = await Kube.connect(str(path), timeouts=FAST, permissions=Permissions(CONTROLLER_GRANTS, "x", "c"))
    path.write_text(path.read_text().replace('"expired"', '"c"'))  # the kubelet rotated the projected token
    assert await kube.exec("team", "w-0", ["echo", "ok"], container="trainer", timeout=5) == b"ok\n"
    path.write_text(path.read_text().replace('"c"', '"revoked"'))
    other = await Kube.connect(str(path), timeouts=FAST, permissions=Permissions(CONTROLLER_GRANTS, "x", "c"))
    with pytest.raises(Forbidden, match="HTTP 401: Unauthorized"):
        await other.exec("team", "w-0", ["true"], container="trainer", timeout=5)
    await kube.close()
    await other.close()
