"""The edge's answers to what a real API server says besides yes and no: a 401 (an expired token) is
re-authenticated once and sent again; a 429/503 with ``Retry-After`` is waited out within the deadline (or
refused at once when the server asks for longer); a refusal keeps the ``Status``'s ``reason`` and ``causes``;
and the kr8s surface the edge uses is public and pinned."""

from __future__ import annotations

import json
import re
import time
import tomllib
from pathlib import Path
from typing import Any

import attrs
import pytest
from kmock import Server

from fabricguard.kube import Forbidden, Invalid, Kube, KubeError, Timeouts
from kube_support import Emulator, Rbac, kubeconfig

ROOT = Path(__file__).resolve().parents[2]
FAST = Timeouts(connect=2.0, read=2.0, call=2.5, list=3.0)


@attrs.define(kw_only=True)
class Scripted(Emulator):
    """Refuses the bearer token ``expired`` with 401 (authentication comes before RBAC in an API server, so this
    is ``_handle``), answers the next ``script`` entries as given, then serves as the emulator does."""

    script: list[tuple[int, dict[str, str], dict[str, Any]]] = attrs.field(factory=list)
    seen: list[tuple[str, str]] = attrs.field(factory=list)  # (method, token) of every request

    async def _handle(self, request: Any) -> Any:
        import aiohttp.web

        token = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        self.seen.append((str(request.method.value), token))
        if token == "expired":
            return aiohttp.web.json_response({"kind": "Status", "code": 401, "reason": "Unauthorized",
                                              "message": "Unauthorized"}, status=401)
        if self.script:
            status, headers, body = self.script.pop(0)
            return aiohttp.web.json_response(body, status=status, headers=headers)
        return await super()._handle(request)


@pytest.fixture()
async def server(tmp_path: Path):
    k8s = Scripted(rbac=Rbac(admins={"admin"}), tokens={"admin": {"username": "admin"}})
    async with k8s, Server(k8s) as srv:
        k8s.objects["v1/nodes", None, "n1"] = {"metadata": {"name": "n1"}}
        yield k8s, str(srv.url).rstrip("/"), tmp_path


async def test_a_401_reloads_the_credentials_once_and_sends_the_request_again(server) -> None:
    k8s, url, tmp = server
    path = kubeconfig(tmp, url, "expired")
    kube = await Kube.connect(path, timeouts=FAST)
    kubeconfig(tmp, url, "admin")  # the token was rotated on disk (a projected service-account token)
    node = await kube.get("v1", "nodes", "n1")
    assert node is not None and node["metadata"]["name"] == "n1"
    assert [t for _m, t in k8s.seen] == ["expired", "admin"]
    # a write too: a 401 was never processed
    kubeconfig(tmp, url, "expired")
    await kube._reauthenticate()
    k8s.seen.clear()
    with pytest.raises(Forbidden) as err:  # still refused after one reload: typed, once, no loop
        await kube.create("v1", "configmaps", {"metadata": {"name": "c", "namespace": "a"}})
    assert err.value.status == 401 and [m for m, _t in k8s.seen] == ["POST", "POST"]
    await kube.close()


async def test_retry_after_is_waited_out_within_the_deadline(server) -> None:
    k8s, url, tmp = server
    kube = await Kube.connect(kubeconfig(tmp, url, "admin"), timeouts=FAST)
    k8s.script = [(429, {"Retry-After": "1"}, {"kind": "Status", "code": 429, "reason": "TooManyRequests",
                                                "message": "too many requests, please try again later"})]
    t0 = time.monotonic()
    assert (await kube.get("v1", "nodes", "n1")) is not None
    assert time.monotonic() - t0 >= 1.0  # not the 0.25 s backoff: what the server asked for
    k8s.script = [(503, {"Retry-After": "30"}, {"kind": "Status", "code": 503, "message": "shutting down"})]
    k8s.seen.clear()
    t0 = time.monotonic()
    with pytest.raises(KubeError) as err:
        await kube.get("v1", "nodes", "n1")
    assert time.monotonic() - t0 < 1.0 and len(k8s.seen) == 1  # 30 s is past the 2.5 s deadline: said at once
    assert err.value.status == 503 and err.value.retry_after == 30.0
    await kube.close()


async def test_a_refusal_keeps_the_status_reason_and_causes(server) -> None:
    k8s, url, tmp = server
    kube = await Kube.connect(kubeconfig(tmp, url, "admin"), timeouts=FAST)
    causes = [{"reason": "FieldValueRequired", "message": "Required value", "field": "spec.containers[0].image"},
              {"reason": "FieldValueInvalid", "message": "must be no more than 63 characters",
               "field": "metadata.labels"}]
    k8s.script = [(422, {}, {"kind": "Status", "code": 422, "reason": "Invalid", "message": 'Pod "p" is invalid',
                             "details": {"name": "p", "kind": "pods", "causes": causes}})]
    with pytest.raises(Invalid) as err:
        await kube.create("v1", "pods", {"metadata": {"name": "p", "namespace": "a"}})
    assert err.value.reason == "Invalid" and list(err.value.causes) == causes
    assert 'Pod "p" is invalid' in str(err.value)
    await kube.close()


def test_the_kr8s_the_edge_uses_is_public_and_its_range_pinned() -> None:
    import kr8s
    from kr8s.asyncio import Api

    (spec,) = [d for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
               if d.startswith("kr8s")]
    low, high = re.fullmatch(r"kr8s>=([\d.]+),<([\d.]+)", spec.split("#")[0].strip()).groups()  # type: ignore[union-attr]
    version = tuple(int(x) for x in kr8s.__version__.split(".")[:2])
    assert tuple(int(x) for x in low.split(".")[:2]) <= version < tuple(int(x) for x in high.split(".")[:2]), (
        f"kr8s {kr8s.__version__} is outside {spec}: check kube.py's use of Api(bypass_factory=...), "
        "reauthenticate() and call_api(raise_for_status=...), then move the pin")
    for name in ("call_api", "reauthenticate", "auth"):
        assert hasattr(Api, name) or name in Api.__init__.__code__.co_names, name
    src = (ROOT / "src" / "fabricguard" / "kube.py").read_text()
    assert "kr8s._" not in src.replace("kr8s._api import", "")  # no private module
    assert "from kr8s._" not in src and "import kr8s._" not in src
    json.dumps(spec)
