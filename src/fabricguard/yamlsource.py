"""YAML loading: one safe loader for every file a person hands us, remembering where every value came from.

Users edit profiles and snapshots by hand; an error that says ``spec.pools[1].fabric.type`` is only half
useful without ``line 23``. ``load_with_positions`` returns the plain Python data and a map from the path
of every node (a tuple of keys and indexes) to its 1-based line and column; ``load_documents`` returns the
data alone (snapshots, where positions would cost more than they help).

Every document is checked before it is built into Python objects: a key given twice in one mapping is
refused with both lines (YAML says keys are unique; PyYAML would silently keep the last), an alias that
contains itself is refused, and aliases may repeat at most ``MAX_ALIAS_NODES`` nodes in total, so an
alias bomb (a few hundred bytes that expand to billions of nodes) is refused at once instead of eating
the machine's memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fabricguard.userfiles import SourceError, read_text

try:  # the C parser is ~10x faster on big YAML snapshots; fall back to pure Python where it is absent
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

__all__ = [
    "MAX_ALIAS_NODES",
    "PathKey",
    "Positioned",
    "SourceError",
    "YamlSyntaxError",
    "load_documents",
    "load_with_positions",
    "loads_documents",
    "loads_with_positions",
    "read_text",
]

PathKey = tuple[str | int, ...]

# Nodes that aliases may add beyond the document's own: generous for anchors reused across pools, and
# nine orders of magnitude below what a "billion laughs" document asks for.
MAX_ALIAS_NODES = 100_000
_MERGE_TAG = "tag:yaml.org,2002:merge"


class YamlSyntaxError(SourceError):
    """A document that is not valid YAML; carries the file, line and column."""

    def __init__(self, source: str, line: int | None, column: int | None, problem: str) -> None:
        self.column = column
        super().__init__(source, line, f"invalid YAML: {problem}")
        # The problem alone (without the "invalid YAML" prefix) is what callers re-wrap.
        self.problem = problem


def yaml_error_position(exc: yaml.YAMLError) -> tuple[int | None, int | None, str]:
    """1-based line and column of a PyYAML error, and its problem text."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is None:
        return None, None, problem
    return mark.line + 1, mark.column + 1, problem


def _line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


class _Checker:
    """One pass over a composed document: duplicate keys, self-containing aliases, alias expansion."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.size: dict[int, int] = {}  # expanded size of each distinct node, by identity within this pass
        self.open: set[int] = set()
        self.distinct = 0

    def check(self, root: yaml.Node) -> None:
        expanded = self._size(root)
        if expanded - self.distinct > MAX_ALIAS_NODES:
            raise SourceError(
                self.source,
                _line(root),
                f"YAML aliases repeat more than {MAX_ALIAS_NODES:,} nodes in this document ({self.distinct:,} "
                "written), so it is refused as an alias bomb; write the values out instead of nesting aliases",
            )

    def _size(self, node: yaml.Node) -> int:
        key = id(node)
        known = self.size.get(key)
        if known is not None:
            return known
        if key in self.open:
            raise SourceError(self.source, _line(node), "a YAML alias refers to a node that contains it")
        self.distinct += 1
        total = 1
        if isinstance(node, yaml.MappingNode):
            self.open.add(key)
            self._unique_keys(node)
            for k, v in node.value:
                total += self._size(k) + self._size(v)
                if total > MAX_ALIAS_NODES + self.distinct:
                    break  # already too big: stop before walking billions
            self.open.discard(key)
        elif isinstance(node, yaml.SequenceNode):
            self.open.add(key)
            for item in node.value:
                total += self._size(item)
                if total > MAX_ALIAS_NODES + self.distinct:
                    break
            self.open.discard(key)
        self.size[key] = total
        return total

    def _unique_keys(self, node: yaml.MappingNode) -> None:
        seen: dict[tuple[str, str], int] = {}
        for k, _v in node.value:
            if not isinstance(k, yaml.ScalarNode) or k.tag == _MERGE_TAG:
                continue
            ident = (k.tag, k.value)
            if ident in seen:
                raise SourceError(
                    self.source,
                    _line(k),
                    f"duplicate key {k.value!r} (first at line {seen[ident]}); keys must be unique, "
                    "remove one of them",
                )
            seen[ident] = _line(k)


def _documents(text: str, source: str) -> Iterator[tuple[yaml.Node, Any]]:
    """Each document's node and data, checked before it is constructed."""
    loader = _Loader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            _Checker(source).check(node)
            yield node, loader.construct_document(node)
    except yaml.YAMLError as exc:
        line, column, problem = yaml_error_position(exc)
        raise YamlSyntaxError(source, line, column, problem) from None
    except RecursionError:
        raise SourceError(source, None, "YAML nested too deeply to read") from None
    finally:
        loader.dispose()


def loads_documents(text: str, source: str = "<string>") -> list[Any]:
    """The data of every document in ``text`` (empty documents left out)."""
    return [data for _node, data in _documents(text, source)]


def load_documents(path: str | Path) -> list[Any]:
    """Read a YAML file with the safe loader; every error names the file (and line)."""
    p = Path(path)
    return loads_documents(read_text(p), source=str(p))


@dataclass
class Positioned:
    """Data loaded from one YAML document plus the position of each node."""

    data: Any
    source: str
    positions: dict[PathKey, tuple[int, int]] = field(default_factory=dict)

    def line_of(self, path: PathKey) -> int | None:
        """Line of the deepest existing node on ``path`` (a missing key points at its parent)."""
        p = tuple(path)
        while True:
            if p in self.positions:
                return self.positions[p][0]
            if not p:
                return None
            p = p[:-1]


def _walk(node: yaml.Node, path: PathKey, out: dict[PathKey, tuple[int, int]]) -> None:
    out[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            _walk(value_node, (*path, key), out)
            # A key's own line is what a reader looks for when the value is a nested block.
            out.setdefault((*path, key, "__key__"), (key_node.start_mark.line + 1, 0))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, (*path, i), out)


def loads_with_positions(text: str, source: str = "<string>") -> list[Positioned]:
    """Every document in ``text`` with positions; raises ``YamlSyntaxError`` naming the line."""
    docs: list[Positioned] = []
    for node, data in _documents(text, source):
        positions: dict[PathKey, tuple[int, int]] = {}
        try:
            _walk(node, (), positions)
        except RecursionError:
            raise SourceError(source, None, "YAML nested too deeply to read") from None
        docs.append(Positioned(data=data, source=source, positions=positions))
    return docs


def load_with_positions(path: str | Path) -> list[Positioned]:
    """Read a YAML file; errors name the file."""
    p = Path(path)
    return loads_with_positions(read_text(p), source=str(p))
