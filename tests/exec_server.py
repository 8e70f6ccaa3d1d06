"""A small API server + kubelet for ``pods/<name>/exec`` over a websocket, on real HTTPS (aiohttp, trustme).

Modelled on the Kubernetes source, read for this (not copied): ``apimachinery/pkg/util/remotecommand/constants.go``
(subprotocols ``v5``/``v4.channel.k8s.io``, streams 0 stdin, 1 stdout, 2 stderr, 3 error, 4 resize, 255 close;
``NonZeroExitCode`` and the ``ExitCode`` cause), ``pkg/kubelet/cri/streaming/remotecommand/websocket.go`` (each
binary message is a stream byte then data; an empty message on the lowest writable stream once the connection is
up; the error stream carries the command's ``metav1.Status`` as JSON, once, then the connection closes),
``exec.go`` (an exit code is a ``Failure``/``NonZeroExitCode``; a command that could not run is an
``InternalError`` status on the error stream) and the API server's checks before the upgrade: authentication
(401), authorization of the GET as ``get`` on ``pods/exec`` and, since 1.35
(``AuthorizePodWebsocketUpgradeCreatePermission``, kubernetes #134577), ``create`` as well (403 with the RBAC
message), the pod (404) and the container (400 "container x is not valid for pod y", or "a container name must be
specified" for a pod of several), and a request that is not an upgrade (400 "Upgrade request required").

The command really runs, as a kubelet runs it: a subprocess, its stdout and stderr sent in 32 KiB messages (the
size of Go's ``io.Copy`` buffer), killed when the client goes away. A pod may name a network namespace holder
(``netns_pid``): its commands then run inside that namespace (``nsenter --net``), where the pod's NCCL RAS
listens on localhost, as exec joins a pod's sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import trustme
from aiohttp import web

from kube_support import Attributes, Rbac

SUBPROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
CHUNK = 32 << 10


@dataclass
class Pod:
    containers: list[str]
    netns_pid: int | None = None  # run commands inside this process's network namespace
    running: bool = True  # False: the container exists in the spec but is not running (CrashLoopBackOff)


@dataclass
class ExecServer:
    """``pods[(namespace, name)]``; ``tokens[token] = user``; ``rbac`` decides; ``create_check`` models 1.35+."""

    rbac: Rbac
    tokens: dict[str, str]
    pods: dict[tuple[str, str], Pod] = field(default_factory=dict)
    create_check: bool = True
    protocols: tuple[str, ...] = SUBPROTOCOLS
    hold_upgrade: bool = False  # accept the request, never answer it (an overloaded API server)
    sent: dict[str, int] = field(default_factory=lambda: {"stdout": 0})
    killed: list[int] = field(default_factory=list)
    negotiated: list[str] = field(default_factory=list)
    url: str = ""
    ca: trustme.CA | None = None

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/api/v1/namespaces/{ns}/pods/{pod}/exec", self.exec)
        return app

    @staticmethod
    def status(code: int, reason: str, message: str) -> web.Response:
        return web.json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                  "message": message, "reason": reason, "code": code}, status=code)

    async def exec(self, request: web.Request) -> web.StreamResponse:
        if self.hold_upgrade:
            await asyncio.sleep(3600)
        auth = request.headers.get("Authorization", "")
        user = self.tokens.get(auth.removeprefix("Bearer ")) if auth.startswith("Bearer ") else None
        if user is None:
            return self.status(401, "Unauthorized", "Unauthorized")
        ns, name = request.match_info["ns"], request.match_info["pod"]
        verbs = ["get", "create"] if self.create_check else ["get"]
        for verb in verbs:
            a = Attributes(verb, "", "pods", "exec", ns, name)
            if not self.rbac.allows(user, a):
                return self.status(403, "Forbidden", a.describe(user))
        pod = self.pods.get((ns, name))
        if pod is None:
            return self.status(404, "NotFound", f'pods "{name}" not found')
        container = request.query.get("container", "")
        if not container:
            if len(pod.containers) != 1:
                return self.status(400, "BadRequest", f"a container name must be specified for pod {name}, "
                                   f"choose one of: [{' '.join(pod.containers)}]")
            container = pod.containers[0]
        elif container not in pod.containers:
            return self.status(400, "BadRequest", f"container {container} is not valid for pod {name}")
        if request.headers.get("Upgrade", "").lower() != "websocket":
            return self.status(400, "BadRequest", "Upgrade request required")
        ws = web.WebSocketResponse(protocols=self.protocols, autoping=True)
        await ws.prepare(request)
        self.negotiated.append(ws.ws_protocol or "")
        command = request.query.getall("command", [])
        try:
            await self.run(ws, pod, container, command, request.query.get("stdout") == "true",
                           request.query.get("stderr") == "true")
        finally:
            await ws.close()
        return ws

    async def run(self, ws: web.WebSocketResponse, pod: Pod, container: str, command: list[str], out: bool,
                  err: bool) -> None:
        await ws.send_bytes(bytes([1 if out else 2 if err else 3]))  # "the streams are up"
        if not pod.running:
            await self.send_status(ws, {"status": "Failure", "reason": "InternalError", "code": 500,
                                        "message": "Internal error occurred: error executing command in container: "
                                                   f'container not found ("{container}")'})
            return
        argv = (["nsenter", f"--net=/proc/{pod.netns_pid}/ns/net", "--", *command] if pod.netns_pid else command)
        try:
            proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL,
                                                        stdout=asyncio.subprocess.PIPE,
                                                        stderr=asyncio.subprocess.PIPE)
        except OSError as exc:
            await self.send_status(ws, {"status": "Failure", "reason": "InternalError", "code": 500,
                                        "message": f"Internal error occurred: error executing command in "
                                                   f"container: {exc}"})
            return
        gone = asyncio.Event()

        async def client() -> None:  # the client's close (or its going away) ends the command
            async for _ in ws:
                pass
            gone.set()

        async def pump(pipe: asyncio.StreamReader, stream: int, name: str) -> None:
            while True:  # to EOF, so the pipe closes; once the client is gone, what is left is dropped
                data = await pipe.read(CHUNK)
                if not data:
                    return
                if gone.is_set():
                    continue
                try:
                    await ws.send_bytes(bytes([stream]) + data)
                except (ConnectionError, RuntimeError, aiohttp.ClientError):
                    gone.set()
                    return
                self.sent[name] = self.sent.get(name, 0) + len(data)

        watcher = asyncio.create_task(client())
        assert proc.stdout is not None and proc.stderr is not None
        pumps = asyncio.gather(pump(proc.stdout, 1, "stdout"), pump(proc.stderr, 2, "stderr"))
        gone_wait = asyncio.create_task(gone.wait())
        await asyncio.wait([pumps, gone_wait], return_when=asyncio.FIRST_COMPLETED)
        if gone.is_set():
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            self.killed.append(proc.pid)
            await proc.wait()
            await pumps
            watcher.cancel()
            return
        code = await proc.wait()
        gone_wait.cancel()
        if code == 0:
            await self.send_status(ws, {"metadata": {}, "status": "Success"})
        else:
            await self.send_status(ws, {
                "metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
                "message": f"command terminated with non-zero exit code: error executing command {command}, "
                           f"exit code {code}",
                "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}})
        watcher.cancel()

    @staticmethod
    async def send_status(ws: web.WebSocketResponse, status: dict[str, Any]) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            await ws.send_bytes(b"\x03" + json.dumps(status).encode())


@contextlib.asynccontextmanager
async def serving(server: ExecServer, tmp: Path):  # type: ignore[no-untyped-def]
    """Serve ``server`` on 127.0.0.1 over TLS from a fresh trustme CA; ``server.url`` and ``server.ca`` set."""
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    leaf.configure_cert(ctx)
    runner = web.AppRunner(server.app(), shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    server.url, server.ca = f"https://127.0.0.1:{port}", ca
    try:
        yield server
    finally:
        await runner.cleanup()


def kubeconfig(tmp: Path, server: ExecServer, token: str) -> str:
    """A kubeconfig that trusts the server's CA (certificate-authority-data) and sends ``token``."""
    import base64

    assert server.ca is not None
    ca = base64.b64encode(server.ca.cert_pem.bytes()).decode()
    cfg = {"apiVersion": "v1", "kind": "Config",
           "clusters": [{"name": "c", "cluster": {"server": server.url, "certificate-authority-data": ca}}],
           "users": [{"name": "u", "user": {"token": token}}],
           "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}], "current-context": "c"}
    path = tmp / f"kubeconfig-{token}"
    path.write_text(json.dumps(cfg))
    return str(path)
