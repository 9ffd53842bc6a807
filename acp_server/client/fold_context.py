"""The seam between the conversation fold and its node definitions: what a node and a change
are, the `NodeDefinition` protocol a definition implements, and the `FoldContext` it folds
through (`fold` has the fold itself, `fold_definitions` the definitions).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

Node = dict[str, Any]
Change = dict[str, Any]
Presenter = Callable[[str, Any], Mapping[str, Any]]
"""A tool call's presentation from its name and parsed input: `{title, kind, locations?}`."""


class FoldNodes(Protocol):
    """What a `FoldContext` needs of the fold: its nodes, and the two changes."""

    _nodes: dict[str, Node]

    def node(self, node_id: str) -> Node | None: ...

    def _start(self, node: Node) -> None: ...

    def _update(self, node_id: str, set_: dict[str, Any], append: dict[str, str]) -> None: ...


class FoldError(ValueError):
    """The events are not one session's, in seq order, each once; or a definition misbehaved."""


class FoldContext:
    """What one definition sees of the fold: its own state, the nodes, and the two changes."""

    def __init__(self, fold: FoldNodes) -> None:
        self._fold = fold
        self.state: dict[Any, Any] = {}
        """The definition's memory between events (the fold never reads it)."""

    def node(self, node_id: str) -> Node | None:
        """The node's current form (read it, do not change it), or None."""
        return self._fold.node(node_id)

    def has(self, node_id: str) -> bool:
        return node_id in self._fold._nodes

    def start(self, node: Node) -> None:
        self._fold._start(node)

    def update(
        self,
        node_id: str,
        set: Mapping[str, Any] | None = None,
        append: Mapping[str, str] | None = None,
    ) -> None:
        self._fold._update(node_id, dict(set or {}), dict(append or {}))


class NodeDefinition(Protocol):
    """One kind of node: the event types it claims, and how it folds one of them."""

    @property
    def name(self) -> str: ...

    @property
    def claims(self) -> Sequence[str]: ...

    def fold(self, event: dict[str, Any], ctx: FoldContext) -> None: ...
