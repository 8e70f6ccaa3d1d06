"""The OCI registry check against a real registry (Debian ``docker-registry``) and a token-auth server.

The registry test starts ``docker-registry`` on a free loopback port with a temporary config and storage,
pushes config/layer blobs, image manifests and a manifest list/OCI index over the distribution API, then
asks the doctor which platforms each reference offers.
"""

from __future__ import annotations

import asyncio
import copy
import gzip
import hashlib
import io
import json
import shutil
import socket
import subprocess
import tarfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from doctor_support import gen, snap

from fabricguard.doctor.registry import (
    DOCKER_LIST,
    DOCKER_MANIFEST,
    OCI_INDEX,
    OCI_MANIFEST,
    RegistryClient,
    RegistryError,
    parse_challenge,
    parse_reference,
)
from fabricguard.doctor.rules.images import images_on_hosts, registry_rule

BINARY = shutil.which("docker-registry")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if BINARY is None:
        pytest.skip("docker-registry is not installed (apt-get install docker-registry; `make deps` does it)")
    tmp = tmp_path_factory.mktemp("registry")
    port = _free_port()
    cfg = tmp / "config.yml"
    cfg.write_text(
        "version: 0.1\nlog: {level: error}\n"
        f"storage: {{filesystem: {{rootdirectory: {tmp / 'data'}}}, delete: {{enabled: true}}}}\n"
        f"http: {{addr: '127.0.0.1:{port}'}}\n"
    )
    proc = subprocess.Popen([BINARY, "serve", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    host = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                urllib.request.urlopen(f"http://{host}/v2/", timeout=1).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode() if proc.stderr else ""
                    pytest.fail(f"docker-registry did not start: {err[-500:]}")
                time.sleep(0.1)
        yield host
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _req(method: str, url: str, data: bytes | None = None, ctype: str | None = None):
    req = urllib.request.Request(url, data=data, method=method)
    if ctype:
        req.add_header("Content-Type", ctype)
    return urllib.request.urlopen(req, timeout=10)


def push_blob(host: str, repo: str, data: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    with _req("POST", f"http://{host}/v2/{repo}/blobs/uploads/") as r:
        assert r.status == 202
        location = r.headers["Location"]
    if location.startswith("/"):
        location = f"http://{host}{location}"
    sep = "&" if "?" in location else "?"
    with _req("PUT", f"{location}{sep}digest={digest}", data, "application/octet-stream") as r:
        assert r.status == 201
    return digest


def push_manifest(host: str, repo: str, ref: str, manifest: dict, media_type: str) -> tuple[str, int]:
    body = json.dumps(manifest).encode()
    with _req("PUT", f"http://{host}/v2/{repo}/manifests/{ref}", body, media_type) as r:
        assert r.status == 201
    return "sha256:" + hashlib.sha256(body).hexdigest(), len(body)


def _layer(arch: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        payload = f"#!/bin/true built for {arch}\n".encode()
        info = tarfile.TarInfo("bin/k8s-rdma-shared-dp")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    return gzip.compress(buf.getvalue(), mtime=0)


def push_image(host: str, repo: str, ref: str, arch: str, *, oci: bool = False) -> tuple[str, int]:
    layer = _layer(arch)
    diff_id = "sha256:" + hashlib.sha256(gzip.decompress(layer)).hexdigest()
    config = json.dumps(
        {"architecture": arch, "os": "linux", "rootfs": {"type": "layers", "diff_ids": [diff_id]}, "config": {}}
    ).encode()
    cfg_digest, layer_digest = push_blob(host, repo, config), push_blob(host, repo, layer)
    media = OCI_MANIFEST if oci else DOCKER_MANIFEST
    manifest = {
        "schemaVersion": 2,
        "mediaType": media,
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json"
            if oci
            else "application/vnd.docker.container.image.v1+json",
            "digest": cfg_digest,
            "size": len(config),
        },
        "layers": [
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip"
                if oci
                else "application/vnd.docker.image.rootfs.diff.tar.gzip",
                "digest": layer_digest,
                "size": len(layer),
            }
        ],
    }
    return push_manifest(host, repo, ref, manifest, media)


def push_index(host: str, repo: str, ref: str, arches: list[str], *, oci: bool) -> None:
    entries = []
    for arch in arches:
        digest, size = push_image(host, repo, f"{ref}-{arch}", arch, oci=oci)
        entries.append(
            {
                "mediaType": OCI_MANIFEST if oci else DOCKER_MANIFEST,
                "digest": digest,
                "size": size,
                "platform": {"architecture": arch, "os": "linux"},
            }
        )
    media = OCI_INDEX if oci else DOCKER_LIST
    push_manifest(host, repo, ref, {"schemaVersion": 2, "mediaType": media, "manifests": entries}, media)


@pytest.mark.external
def test_single_arch_vs_multi_arch(registry: str) -> None:
    push_image(registry, "mirror/k8s-rdma-shared-dev-plugin", "v1.5.2", "amd64")
    push_index(registry, "mellanox/k8s-rdma-shared-dev-plugin", "v1.5.2", ["amd64", "arm64"], oci=False)
    push_index(registry, "mellanox/k8s-rdma-shared-dev-plugin", "v1.5.2-oci", ["amd64", "arm64"], oci=True)
    client = RegistryClient()
    assert client.platforms(f"{registry}/mirror/k8s-rdma-shared-dev-plugin:v1.5.2") == ["linux/amd64"]
    assert client.platforms(f"{registry}/mellanox/k8s-rdma-shared-dev-plugin:v1.5.2") == ["linux/amd64", "linux/arm64"]
    assert client.platforms(f"{registry}/mellanox/k8s-rdma-shared-dev-plugin:v1.5.2-oci") == [
        "linux/amd64",
        "linux/arm64",
    ]
    # By digest: the arm64 manifest alone is single-architecture, and right for arm64 nodes.
    media, index = client.manifest(f"{registry}/mellanox/k8s-rdma-shared-dev-plugin:v1.5.2")
    assert media == DOCKER_LIST
    arm = next(m["digest"] for m in index["manifests"] if m["platform"]["architecture"] == "arm64")
    assert client.platforms(f"{registry}/mellanox/k8s-rdma-shared-dev-plugin@{arm}") == ["linux/arm64"]
    with pytest.raises(RegistryError, match="HTTP 404"):
        client.platforms(f"{registry}/mirror/does-not-exist:v1")


@pytest.mark.external
def test_registry_rule_flags_the_mirrored_single_arch_image(registry: str, now) -> None:
    push_image(registry, "mirror2/k8s-rdma-shared-dev-plugin", "v1.5.2", "amd64")
    push_index(registry, "upstream/k8s-rdma-shared-dev-plugin", "v1.5.2", ["amd64", "arm64"], oci=True)
    lists = gen.incident("production")
    bad, good = copy.deepcopy(lists), copy.deepcopy(lists)
    bad_img = f"{registry}/mirror2/k8s-rdma-shared-dev-plugin:v1.5.2"
    good_img = f"{registry}/upstream/k8s-rdma-shared-dev-plugin:v1.5.2"
    for lst, img in ((bad, bad_img), (good, good_img)):
        lst["daemonsets"]["items"][0]["spec"]["template"]["spec"]["containers"][0]["image"] = img
        lst["pods"]["items"] = []  # the rule must work from the DaemonSet's selector alone
    client = RegistryClient()
    looked_up = {i: client.platforms(i) for i in images_on_hosts(snap(bad), None, [registry])}
    assert looked_up == {bad_img: ["linux/amd64"]}
    [f] = registry_rule(looked_up)(snap(bad), None, now)
    assert f.rule == "image-arch-mismatch" and f.evidence["registry platforms"] == ["linux/amd64"]
    assert f.evidence["nodes: kubernetes.io/arch"] == ["arm64"] and "single-architecture" in f.message
    good_lookup = {i: client.platforms(i) for i in images_on_hosts(snap(good), None, [registry])}
    assert registry_rule(good_lookup)(snap(good), None, now) == []
    # Images on hosts not named with --registry are not looked up, and an image not looked up is not judged.
    assert images_on_hosts(snap(bad), None, ["other.example.com"]) == []
    assert registry_rule({})(snap(bad), None, now) == []


@pytest.mark.external
def test_cli_registry_flag(registry: str, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from fabricguard.cli import app

    push_image(registry, "mirror3/plugin", "v1", "amd64")
    lists = gen.incident("staging")  # healthy pods: only the registry can tell
    lists["daemonsets"]["items"][0]["spec"]["template"]["spec"]["containers"][0]["image"] = (
        f"{registry}/mirror3/plugin:v1"
    )
    gen.write(tmp_path, lists, gen.INCIDENT_PROFILE.format(name="stg", env="staging"))
    args = ["doctor", "--snapshot", str(tmp_path), "--now", "2025-09-30T12:00:00Z", "--format", "json"]
    assert CliRunner().invoke(app, args).exit_code == 0
    r = CliRunner().invoke(app, [*args, "--registry", f"http://{registry}"])
    assert r.exit_code == 1
    assert json.loads(r.stdout)["findings"][0]["rule"] == "image-arch-mismatch"


def test_parse_challenge_and_reference() -> None:
    scheme, params = parse_challenge(
        'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/nginx:pull"'
    )
    assert scheme == "bearer"
    assert params == {
        "realm": "https://auth.docker.io/token",
        "service": "registry.docker.io",
        "scope": "repository:library/nginx:pull",
    }
    assert str(parse_reference("nginx")) == "docker.io/library/nginx:latest"
    r = parse_reference("127.0.0.1:5000/a/b:v1@sha256:00")
    assert (r.registry, r.repository, r.tag, r.digest, r.reference) == (
        "127.0.0.1:5000",
        "a/b",
        "v1",
        "sha256:00",
        "sha256:00",
    )


async def test_bearer_token_flow() -> None:
    """A registry that answers 401 with a Bearer challenge and a token endpoint, both on loopback."""
    seen: dict[str, list] = {"token_queries": [], "auth": []}
    index = {
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [
            {
                "mediaType": OCI_MANIFEST,
                "digest": "sha256:" + "a" * 64,
                "size": 1,
                "platform": {"os": "linux", "architecture": "amd64"},
            },
            {
                "mediaType": OCI_MANIFEST,
                "digest": "sha256:" + "b" * 64,
                "size": 1,
                "platform": {"os": "unknown", "architecture": "unknown"},
            },
        ],
    }

    async def token(request: web.Request) -> web.Response:
        seen["token_queries"].append(dict(request.query))
        return web.json_response({"token": "tok-123", "expires_in": 300})

    async def manifest(request: web.Request) -> web.Response:
        auth = request.headers.get("Authorization")
        seen["auth"].append(auth)
        assert OCI_INDEX in request.headers.get("Accept", "")
        if auth != "Bearer tok-123":
            realm = f"http://{request.host}/token"
            return web.Response(
                status=401,
                headers={
                    "WWW-Authenticate": (
                        f'Bearer realm="{realm}",service="test-registry",scope="repository:team/img:pull"'
                    )
                },
            )
        return web.Response(body=json.dumps(index), content_type=OCI_INDEX)

    app = web.Application()
    app.router.add_get("/token", token)
    app.router.add_get("/v2/team/img/manifests/{ref}", manifest)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        client = RegistryClient()
        platforms = await asyncio.to_thread(client.platforms, f"127.0.0.1:{port}/team/img:v2")
        assert platforms == ["linux/amd64"]  # the attestation entry (unknown/unknown) is left out
        assert seen["token_queries"] == [{"service": "test-registry", "scope": "repository:team/img:pull"}]
        assert seen["auth"] == [None, "Bearer tok-123"]
        # The token is reused: no second token request.
        await asyncio.to_thread(client.manifest, f"127.0.0.1:{port}/team/img:v3")
        assert len(seen["token_queries"]) == 1 and seen["auth"][-1] == "Bearer tok-123"
    finally:
        await runner.cleanup()
