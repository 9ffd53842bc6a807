"""`map_strings`: the one walk that rewrites the strings of a JSON value."""

from __future__ import annotations

from typing import Any

from acp_server.core.json_values import map_strings


def test_every_string_is_replaced_keys_included_and_other_values_kept() -> None:
    value = {"a-x": ["x", {"x": "xx"}], "n": 1, "b": None, "t": True}

    assert map_strings(value, lambda s: s.replace("x", "y")) == {
        "a-y": ["y", {"y": "yy"}],
        "n": 1,
        "b": None,
        "t": True,
    }


def test_the_input_is_not_changed() -> None:
    value = {"k": ["x"]}

    map_strings(value, str.upper)

    assert value == {"k": ["x"]}


def test_on_object_sees_each_object_after_its_members() -> None:
    seen: list[dict[str, Any]] = []

    def on_object(obj: dict[str, Any]) -> None:
        seen.append(dict(obj))
        obj["done"] = True

    result = map_strings({"inner": {"s": "a"}}, str.upper, on_object=on_object)

    assert seen == [{"S": "A"}, {"INNER": {"S": "A", "done": True}}]
    assert result == {"INNER": {"S": "A", "done": True}, "done": True}
