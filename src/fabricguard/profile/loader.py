"""Read a platform profile from YAML and turn validation failures into errors a person can act on.

Each problem names the field path (``spec.pools[0].fabric.type``), the file and line, what was wrong
and, where we can tell, what would be right.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fabricguard.profile.model import API_VERSION, KIND, PlatformProfile
from fabricguard.yamlsource import (
    Positioned,
    SourceError,
    YamlSyntaxError,
    load_with_positions,
    loads_with_positions,
    read_text,
)


@dataclass(frozen=True)
class Problem:
    path: str
    line: int | None
    message: str

    def render(self, source: str) -> str:
        where = f"{source}:{self.line}" if self.line else source
        if not self.path:
            return f"{where}: {self.message}"
        return f"{where}: {self.path}: {self.message}"


class ProfileError(ValueError):
    """A profile that cannot be used; ``problems`` lists every field at fault."""

    def __init__(self, source: str, problems: list[Problem]) -> None:
        self.source = source
        self.problems = problems
        super().__init__("\n".join(p.render(source) for p in problems))


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _message(err: Mapping[str, Any]) -> str:
    kind = err.get("type", "")
    msg = str(err.get("msg", "invalid"))
    ctx = err.get("ctx") or {}
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return "unknown field (check the spelling; unknown fields are rejected so typos do not become defaults)"
    if kind == "too_short" and "min_length" in ctx:
        return f"needs at least {ctx['min_length']} entry (got none)"
    if kind in ("enum", "literal_error") and "expected" in ctx:
        return f"got {err.get('input')!r}; expected {ctx['expected']}"
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if "input" in err and kind not in ("value_error", "model_type", "dict_type", "list_type"):
        return f"{msg} (got {err['input']!r})"
    return msg


def _clean_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    # pydantic appends validator names such as 'function-after[...]'; they mean nothing to a user.
    return tuple(p for p in loc if not (isinstance(p, str) and ("[" in p and "]" in p and "(" not in p)))


def profile_from_document(doc: Positioned) -> PlatformProfile:
    if not isinstance(doc.data, dict):
        raise ProfileError(doc.source, [Problem("", 1, "a profile is a YAML mapping with apiVersion, kind, ...")])
    if doc.data.get("kind") != KIND and doc.data.get("apiVersion") != API_VERSION:
        # Some other document (a manifest, a /proc file): one problem, not one per unknown field.
        got = f"kind {doc.data['kind']!r}" if "kind" in doc.data else "no kind"
        raise ProfileError(
            doc.source,
            [Problem("", 1, f"not a PlatformProfile ({got}); expected apiVersion: {API_VERSION}, kind: {KIND}")],
        )
    try:
        return PlatformProfile.model_validate(doc.data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = _clean_loc(tuple(err["loc"]))
            problems.append(Problem(_dotted(loc), doc.line_of(loc), _message(err)))
        raise ProfileError(doc.source, problems) from None


def loads_profile(text: str, source: str = "<string>") -> PlatformProfile:
    try:
        docs = loads_with_positions(text, source)
    except YamlSyntaxError as exc:
        raise ProfileError(source, [Problem("", exc.line, f"invalid YAML: {exc.problem}")]) from None
    return _select(source, docs)


def load_profile(path: str | Path) -> PlatformProfile:
    """Load and validate a profile file; raises ``ProfileError`` naming the field and line."""
    p = Path(path)
    try:
        docs = load_with_positions(p)
    except YamlSyntaxError as exc:
        raise ProfileError(str(p), [Problem("", exc.line, f"invalid YAML: {exc.problem}")]) from None
    except SourceError as exc:
        raise ProfileError(str(p), [Problem("", exc.line, exc.problem)]) from None
    return _select(str(p), docs)


def _select(source: str, docs: list[Positioned]) -> PlatformProfile:
    profiles = [d for d in docs if isinstance(d.data, dict) and d.data.get("kind") == "PlatformProfile"]
    if not docs:
        raise ProfileError(source, [Problem("", None, "the file is empty; expected a PlatformProfile")])
    if len(profiles) > 1:
        raise ProfileError(source, [Problem("", None, "more than one PlatformProfile in one file")])
    return profile_from_document(profiles[0] if profiles else docs[0])


# Profiles shipped inside the package, chosen by name (``--profile local``).
EMBEDDED_PROFILES = ("local",)


def profile_text(path: str | Path) -> str:
    """The YAML text of a profile file, or of an embedded profile named ``local``."""
    if str(path) in EMBEDDED_PROFILES:
        return resources.files("fabricguard.data.profiles").joinpath(f"{path}.yaml").read_text("utf-8")
    return read_text(Path(path))


def embedded_profile(name: str = "local") -> PlatformProfile:
    """A profile shipped inside the package (``local``: this machine, gloo ranks, no RDMA)."""
    return loads_profile(profile_text(name), source=f"<embedded {name}.yaml>")
