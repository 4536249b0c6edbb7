"""A YAML loader for sweep specs that refuses duplicate keys: plain YAML keeps the last of two equal
keys, so a variant listed twice would silently replace the first."""
from __future__ import annotations

from typing import Any

import yaml


class DuplicateKeyError(ValueError):
    """Two equal keys in one mapping; the message names the key and its line."""


class _StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, (str, int, float, bool, type(None))):
                continue  # an unhashable key: the base class reports it
            if key in seen:
                raise DuplicateKeyError(f"duplicate key {key!r} (line {key_node.start_mark.line + 1})")
            seen.add(key)
        return super().construct_mapping(node, deep)


def strict_load(text: str) -> Any:
    """``yaml.safe_load`` that raises ``DuplicateKeyError`` on a repeated key."""
    return yaml.load(text, Loader=_StrictLoader)
