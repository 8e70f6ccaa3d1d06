"""YAML loading that remembers where every value came from.

Users edit profiles and snapshots by hand; an error that says ``spec.pools[1].fabric.type`` is only half
useful without ``line 23``. ``load_with_positions`` returns the plain Python data and a map from the path
of every node (a tuple of keys and indexes) to its 1-based line and column.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

PathKey = tuple[str | int, ...]


class SourceError(ValueError):
    """Input that cannot be used, with the file (and line, where known) a person must open to fix it."""

    def __init__(self, source: str, line: int | None, problem: str) -> None:
        self.source = source
        self.line = line
        self.problem = problem
        where = f"{source}:{line}" if line else source
        super().__init__(f"{where}: {problem}")


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


def read_text(path: Path) -> str:
    """A file's text; raises ``SourceError`` naming the file when it is missing or not UTF-8 text."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SourceError(str(path), None, "no such file") from None
    except IsADirectoryError:
        raise SourceError(str(path), None, "is a directory, not a file") from None
    except UnicodeDecodeError as exc:
        raise SourceError(str(path), None, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


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


def _syntax_error(source: str, exc: yaml.YAMLError) -> YamlSyntaxError:
    line, column, problem = yaml_error_position(exc)
    return YamlSyntaxError(source, line, column, problem)


def loads_with_positions(text: str, source: str = "<string>") -> list[Positioned]:
    """Every document in ``text`` with positions; raises ``YamlSyntaxError`` naming the line."""
    docs: list[Positioned] = []
    try:
        for node in yaml.compose_all(text, Loader=yaml.SafeLoader):
            if node is None:
                continue
            positions: dict[PathKey, tuple[int, int]] = {}
            _walk(node, (), positions)
            data = yaml.SafeLoader(text).construct_document(node)
            docs.append(Positioned(data=data, source=source, positions=positions))
    except yaml.YAMLError as exc:
        raise _syntax_error(source, exc) from exc
    return docs


def load_with_positions(path: str | Path) -> list[Positioned]:
    """Read a YAML file; errors name the file."""
    p = Path(path)
    return loads_with_positions(read_text(p), source=str(p))
