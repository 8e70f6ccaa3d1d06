"""Container image references: ``[host[:port]/]repo[:tag][@digest]``, parsed the way runtimes do.

The doctor compares references across snapshots and asks registries for them; ``render webhook`` refuses a
reference no runtime could pull and warns about one that can move (a tag instead of a digest).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DOCKER_HUB = "docker.io"

# The distribution reference grammar (repository components lowercase; hosts may carry a port).
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_HOST = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?"
_REFERENCE = re.compile(
    rf"^(?:{_HOST}/)?{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::[\w][\w.-]{0,127})?"
    r"(?:@[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[0-9a-fA-F]{32,})?$"
)
_SHA256 = re.compile(r"@sha256:[0-9a-f]{64}$")


@dataclass
class ImageRef:
    registry: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    @property
    def reference(self) -> str:
        return self.digest or self.tag or "latest"

    def __str__(self) -> str:
        out = f"{self.registry}/{self.repository}"
        if self.tag:
            out += f":{self.tag}"
        if self.digest:
            out += f"@{self.digest}"
        return out


def parse_reference(image: str) -> ImageRef:
    """Split ``[host[:port]/]repo[:tag][@digest]`` the way container runtimes do (Docker Hub default).

    Lenient on purpose: it reads whatever a cluster snapshot holds; ``reference_problem`` judges the grammar.
    """
    rest, digest = image, None
    if "@" in image:
        rest, digest = image.split("@", 1)
    first, _, remainder = rest.partition("/")
    if remainder and ("." in first or ":" in first or first == "localhost"):
        registry, path = first, remainder
    else:
        registry, path = DOCKER_HUB, rest
        if "/" not in path:
            path = f"library/{path}"
    tag = None
    last = path.rsplit("/", 1)[-1]
    if ":" in last:
        path, tag = path.rsplit(":", 1)
    if tag is None and digest is None:
        tag = "latest"
    return ImageRef(registry=registry, repository=path, tag=tag, digest=digest)


def reference_problem(image: str) -> str | None:
    """Why no runtime could pull ``image`` (None when the reference is well formed)."""
    if not image:
        return "the image reference is empty"
    if _REFERENCE.match(image):
        return None
    if any(c.isspace() for c in image):
        return f"image {image!r} contains white space"
    if "@" in image and not re.search(r"@[a-z0-9]+:[0-9a-fA-F]{32,}$", image):
        return f"image {image!r} has a malformed digest; use repo@sha256:<64 hex digits>"
    return f"image {image!r} is not a valid reference; expected [host[:port]/]repo[:tag][@sha256:<digest>]"


def pinning_warnings(image: str) -> list[str]:
    """Why a well-formed reference is not reproducible (empty for ``repo@sha256:<digest>``)."""
    if _SHA256.search(image):
        return []
    if parse_reference(image).tag == "latest" and ":" not in image.rsplit("/", 1)[-1]:
        return [
            f"image {image!r} has neither tag nor digest, so it means :latest; pin it by digest "
            "(the multi-arch index digest, so arm64 and amd64 nodes both get their image)"
        ]
    return [
        f"image {image!r} is a tag-only reference, which can move; prefer repo@sha256:<digest> of the "
        "multi-arch index"
    ]
