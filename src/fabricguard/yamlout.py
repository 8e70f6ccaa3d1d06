"""YAML writing: one dumper for every manifest, fragment and report we print or write.

The install tree alone is ~150 KiB of YAML per profile; PyYAML's pure-Python emitter spent more than half of
``render install`` producing it. libyaml's emitter (``CSafeDumper``) writes the same documents (the same data
when read back; only how long quoted strings are folded differs) ten times faster. Both are safe dumpers: only
plain data, never a Python tag.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml

try:
    from yaml import CSafeDumper as _Dumper
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml import SafeDumper as _Dumper  # type: ignore[assignment]

__all__ = ["dump", "dump_all"]


def dump_all(docs: Iterable[Any], **options: Any) -> str:
    """Documents separated by ``---``, keys in the order given unless ``sort_keys=True`` is passed."""
    options.setdefault("sort_keys", False)
    return str(yaml.dump_all(list(docs), Dumper=_Dumper, **options))


def dump(doc: Any, **options: Any) -> str:
    """One document, keys in the order given unless ``sort_keys=True`` is passed."""
    options.setdefault("sort_keys", False)
    return str(yaml.dump(doc, Dumper=_Dumper, **options))
