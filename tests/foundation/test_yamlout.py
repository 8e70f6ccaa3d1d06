"""The one YAML writer: what it writes reads back as the same data, in the order given."""

from __future__ import annotations

import yaml

from fabricguard import yamlout


def test_documents_read_back_equal_and_keep_key_order() -> None:
    docs = [
        {"kind": "ConfigMap", "data": {"profile.yaml": "# a comment § with a non-ASCII sign\nspec:\n  x: 1   \n" * 40}},
        {"z": [1, 2.5, None, True, "0777", "yes", "1e3", ""], "a": {"nested": ["- not a list", "key: value"]}},
    ]
    text = yamlout.dump_all(docs, default_flow_style=False, width=120)
    assert list(yaml.safe_load_all(text)) == docs
    assert text.index("kind") < text.index("data") and text.index("\nz:") < text.index("\na:")
    assert yaml.safe_load(yamlout.dump(docs[1])) == docs[1]


def test_sorting_is_asked_for_not_assumed() -> None:
    assert yamlout.dump({"b": 1, "a": 2}).startswith("b:")
    assert yamlout.dump({"b": 1, "a": 2}, sort_keys=True).startswith("a:")
