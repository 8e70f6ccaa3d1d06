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


class YamlSyntaxError(ValueError):
    """A document that is not valid YAML; carries the file and line."""

    def __init__(self, source: str, line: int | None, column: int | None, problem: str) -> None:
        self.source = source
        self.line = line
        self.column = column
        self.problem = problem
        where = f"{source}:{line}:{column}" if line else source
        super().__init__(f"{where}: invalid YAML: {problem}")


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
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is not None:
        return YamlSyntaxError(source, mark.line + 1, mark.column + 1, problem)
    return YamlSyntaxError(source, None, None, problem)


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
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"{p}: no such file") from None
    except UnicodeDecodeError as exc:
        raise YamlSyntaxError(str(p), None, None, f"not UTF-8 text ({exc.reason})") from exc
    return loads_with_positions(text, source=str(p))
