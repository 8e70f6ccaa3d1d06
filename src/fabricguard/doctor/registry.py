"""A small, read-only client for the OCI distribution API: which platforms does an image offer?

It resolves a reference (``registry/repo:tag`` or ``@sha256:...``) with the Accept headers for OCI image
indexes, Docker manifest lists and single image manifests; for an index it reads each entry's
``platform``, for a single manifest it reads ``os``/``architecture`` from the config blob. Authentication
follows the distribution token flow: an anonymous request, a ``401`` with ``WWW-Authenticate: Bearer
realm=...,service=...,scope=...``, a token from the realm (anonymous, or with basic credentials), then the
request again with ``Authorization: Bearer``. Plain HTTP is used for ``localhost``/``127.0.0.1`` and hosts
named as ``http://host`` (a local mirror); everything else is HTTPS.
"""

from __future__ import annotations

import base64
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from http.client import HTTPMessage
from typing import IO, Any

from fabricguard.imageref import DOCKER_HUB, ImageRef, parse_reference

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
ACCEPT = ", ".join((OCI_INDEX, DOCKER_LIST, OCI_MANIFEST, DOCKER_MANIFEST))
INDEX_TYPES = frozenset({OCI_INDEX, DOCKER_LIST})
DOCKER_HUB_API = "registry-1.docker.io"


class RegistryError(RuntimeError):
    """The registry could not answer (unreachable, unauthorized, unknown manifest)."""


_CHALLENGE_PARAM = re.compile(r'(\w+)\s*=\s*"([^"]*)"')


def parse_challenge(header: str) -> tuple[str, dict[str, str]]:
    """``Bearer realm="...",service="...",scope="..."`` -> (``"bearer"``, {realm, service, scope})."""
    scheme, _, params = header.strip().partition(" ")
    return scheme.lower(), dict(_CHALLENGE_PARAM.findall(params))


class _NoAuthOnRedirect(urllib.request.HTTPRedirectHandler):
    # Blob downloads redirect to object storage, which rejects (or must not see) the registry token.
    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and urllib.parse.urlsplit(newurl).netloc != urllib.parse.urlsplit(req.full_url).netloc:
            new.remove_header("Authorization")
        return new


@dataclass
class RegistryClient:
    insecure: set[str] = field(default_factory=set)
    username: str | None = None
    password: str | None = None
    timeout: float = 10.0
    _tokens: dict[tuple[str, str], str] = field(default_factory=dict)
    _cache: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._opener = urllib.request.build_opener(_NoAuthOnRedirect())

    def _base(self, registry: str) -> str:
        host = DOCKER_HUB_API if registry == DOCKER_HUB else registry
        plain = registry in self.insecure or host.split(":")[0] in ("localhost", "127.0.0.1")
        return f"{'http' if plain else 'https'}://{host}"

    def _open(self, url: str, accept: str | None, auth: str | None) -> tuple[int, dict[str, str], bytes]:
        req = urllib.request.Request(url, method="GET")
        if accept:
            req.add_header("Accept", accept)
        if auth:
            req.add_header("Authorization", auth)
        try:
            with self._opener.open(req, timeout=self.timeout) as resp:
                return resp.status, dict(resp.headers.items()), resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers.items()), exc.read() if exc.fp else b""
        except (urllib.error.URLError, OSError) as exc:
            raise RegistryError(f"cannot reach {url}: {getattr(exc, 'reason', exc)}") from exc

    def _token(self, challenge: dict[str, str], scope_default: str) -> str:
        realm = challenge.get("realm")
        if not realm:
            raise RegistryError("Bearer challenge without realm")
        scope = challenge.get("scope", scope_default)
        key = (realm, scope)
        if key in self._tokens:
            return self._tokens[key]
        query = {k: v for k, v in (("service", challenge.get("service")), ("scope", scope)) if v}
        url = realm + ("&" if "?" in realm else "?") + urllib.parse.urlencode(query)
        basic = None
        if self.username is not None:
            basic = "Basic " + base64.b64encode(f"{self.username}:{self.password or ''}".encode()).decode()
        status, _, body = self._open(url, "application/json", basic)
        if status != 200:
            raise RegistryError(f"token endpoint {realm} answered HTTP {status}")
        data = json.loads(body or b"{}")
        token = data.get("token") or data.get("access_token")
        if not token:
            raise RegistryError(f"token endpoint {realm} returned no token")
        self._tokens[key] = token
        return str(token)

    def get(self, ref: ImageRef, path: str, accept: str | None) -> tuple[dict[str, str], bytes]:
        """GET ``/v2/<repo>/<path>`` with the token flow; returns headers and body."""
        url = f"{self._base(ref.registry)}/v2/{ref.repository}/{path}"
        scope = f"repository:{ref.repository}:pull"
        auth = next((f"Bearer {t}" for (_, s), t in self._tokens.items() if s == scope), None)
        status, headers, body = self._open(url, accept, auth)
        if status == 401:
            challenge = next((v for k, v in headers.items() if k.lower() == "www-authenticate"), "")
            scheme, params = parse_challenge(challenge)
            if scheme == "bearer":
                auth = f"Bearer {self._token(params, scope)}"
            elif scheme == "basic" and self.username is not None:
                auth = "Basic " + base64.b64encode(f"{self.username}:{self.password or ''}".encode()).decode()
            else:
                raise RegistryError(f"{url}: unauthorized ({challenge or 'no challenge'})")
            status, headers, body = self._open(url, accept, auth)
        if status != 200:
            raise RegistryError(f"{url}: HTTP {status} {body[:200].decode('utf-8', 'replace')}")
        return headers, body

    def manifest(self, image: str) -> tuple[str, dict[str, Any]]:
        """(media type, manifest) of ``image`` as the registry resolves it."""
        ref = parse_reference(image)
        headers, body = self.get(ref, f"manifests/{ref.reference}", ACCEPT)
        data = json.loads(body)
        ctype = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
        media = data.get("mediaType") or ctype.split(";")[0].strip()
        return media, data

    def platforms(self, image: str) -> list[str]:
        """``os/arch[/variant]`` entries the image offers (attestation entries left out)."""
        if image in self._cache:
            return self._cache[image]
        media, data = self.manifest(image)
        out: list[str] = []
        if media in INDEX_TYPES or "manifests" in data:
            for m in data.get("manifests") or ():
                p = m.get("platform") or {}
                if not p or p.get("os") == "unknown":
                    continue
                out.append("/".join(x for x in (p.get("os"), p.get("architecture"), p.get("variant")) if x))
        else:
            digest = (data.get("config") or {}).get("digest")
            if not digest:
                raise RegistryError(f"{image}: manifest has no config (schema 1 manifests are not supported)")
            _, blob = self.get(parse_reference(image), f"blobs/{digest}", None)
            cfg = json.loads(blob)
            out.append("/".join(x for x in (cfg.get("os"), cfg.get("architecture"), cfg.get("variant")) if x))
        self._cache[image] = out
        return out
