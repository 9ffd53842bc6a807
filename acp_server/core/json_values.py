"""One walk over a JSON value (dicts, lists, strings, numbers) that rewrites its strings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def map_strings(
    value: Any,
    replace: Callable[[str], str],
    *,
    on_object: Callable[[dict[str, Any]], None] | None = None,
) -> Any:
    """A copy of `value` with `replace` applied to every string in it, object keys included.

    `on_object`, when given, may change each new object in place once its members are done.
    """
    if isinstance(value, str):
        return replace(value)
    if isinstance(value, list):
        return [map_strings(item, replace, on_object=on_object) for item in value]
    if isinstance(value, dict):
        out = {
            replace(key): map_strings(item, replace, on_object=on_object)
            for key, item in value.items()
        }
        if on_object is not None:
            on_object(out)
        return out
    return value
