"""A snapshot scenario's `input.json` (SPEC 6): the client's side of a recorded conversation.

    {"description": "...", "steps": [
        {"op": "initialize", "clientCapabilities": {"fs": {"readTextFile": true}}},
        {"op": "new"},
        {"op": "prompt", "prompt": "Fix the failing test", "answers": [
            {"kind": "read"}, {"kind": "permission", "optionId": "allow_once"}, {"kind": "write"}]},
        {"op": "restart"},
        {"op": "initialize"},
        {"op": "load", "maxMessages": 4},
        {"op": "pageAll", "maxMessages": 2}]}

Steps run in order on one server process; `restart` ends it and starts a fresh one on the same
sessions directory and workspace. A scenario has exactly one top-level session (its one `new`),
which every later step addresses. `answers` script the server's requests during a prompt, in
the order the server makes them. Strings in prompts and in `request` params may name
`<workspace>` and `<session-1>`: they are replaced by the real values before sending.

Its JSON Schema, `schemas/snapshot-input.schema.json`, is written with the others by
`python -m acp_server.schemas`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Final, cast

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from ..core.content import ContentBlock

INPUT_NAME: Final = "input.json"


class _Spec(Struct, rename="camel", forbid_unknown_fields=True, omit_defaults=True):
    """Base of every input type: camelCase keys; a misspelt key is an error, not ignored."""


Positive = Annotated[int, Meta(ge=1)]

# ---------------------------------------------------------------------------------------------
# Answers to the server's requests during a prompt.


class PermissionAnswer(_Spec, tag="permission", tag_field="kind"):
    """Answers `session/request_permission`: select `optionId` (`allow_once`, `allow_always`,
    `reject_once`), or, with `cancelled: true`, answer the `cancelled` outcome."""

    option_id: str | UnsetType = UNSET
    cancelled: bool = False


class ReadAnswer(_Spec, tag="read", tag_field="kind"):
    """Answers `fs/read_text_file` with `content`; without it, with the file's text in the
    scenario's workspace (the lines the request's `line`/`limit` select), or, when the file
    does not exist, with a -32002 "Resource not found" error."""

    content: str | UnsetType = UNSET


class WriteAnswer(_Spec, tag="write", tag_field="kind"):
    """Answers `fs/write_text_file`: the content is written into the workspace, so that later
    reads see it, and the answer is `{}`."""


class TerminalAnswer(_Spec, tag="terminal", tag_field="kind"):
    """Answers `terminal/create` and every later `terminal/*` request for that terminal
    (`wait_for_exit`, `output`, `kill`, `release`) as a terminal that ran and printed `output`."""

    output: str = ""
    exit_code: int | None = 0
    signal: str | None = None
    truncated: bool = False


class ErrorAnswer(_Spec, tag="error", tag_field="kind"):
    """Answers any request with a JSON-RPC error."""

    code: int
    message: str


Answer = PermissionAnswer | ReadAnswer | WriteAnswer | TerminalAnswer | ErrorAnswer


class CancelWhen(_Spec):
    """When to send `session/cancel` during a prompt: after the prompt's `afterUpdates`-th
    `session/update`, and then (if named) once `whenFile` exists in the workspace, e.g. the
    `readyFile` of a `hang` override entry. The transcript puts the cancel right after that
    update, so the scenario is deterministic when the server is idle by then (a hang)."""

    after_updates: Annotated[int, Meta(ge=0)] = 0
    when_file: str | UnsetType = UNSET


# ---------------------------------------------------------------------------------------------
# Steps.


class InitializeStep(_Spec, tag="initialize", tag_field="op"):
    """`initialize` with these client capabilities (ACP `ClientCapabilities`: `fs.readTextFile`,
    `fs.writeTextFile`, `terminal`); without them the server reads and writes files and runs
    commands itself. Each server process needs one before anything else."""

    client_capabilities: dict[str, Any] = {}


class NewStep(_Spec, tag="new", tag_field="op"):
    """`session/new` in the workspace: the scenario's session, `<session-1>`."""


class PromptStep(_Spec, tag="prompt", tag_field="op"):
    """`session/prompt` with `prompt` (a string is one text block); the server's requests are
    answered with `answers`, in order, and every answer must be used."""

    prompt: str | list[ContentBlock]
    answers: list[Answer] = []
    cancel: CancelWhen | UnsetType = UNSET


class LoadStep(_Spec, tag="load", tag_field="op"):
    """`session/load` of the scenario's session; with `maxMessages`, a tail replay
    (`_meta["acp-server"].replay.maxMessages`)."""

    max_messages: Positive | UnsetType = UNSET


class PageStep(_Spec, tag="page", tag_field="op"):
    """One `session.page` of the scenario's session, or of its `child`-th subagent (1-based,
    in the order the subagents started). `throughSeq` defaults to the log's last seq."""

    through_seq: Annotated[int, Meta(ge=-1)] | UnsetType = UNSET
    before_seq: Annotated[int, Meta(ge=0)] | UnsetType = UNSET
    max_messages: Positive | UnsetType = UNSET
    child: Positive | UnsetType = UNSET


class PageAllStep(_Spec, tag="pageAll", tag_field="op"):
    """`session.page` from the log's end back to its start: each request asks for the pages
    before the previous one (`beforeSeq`) until `hasMore` is false."""

    max_messages: Positive | UnsetType = UNSET
    child: Positive | UnsetType = UNSET


class FollowStep(_Spec, tag="follow", tag_field="op"):
    """`session.follow` of the scenario's session. The `session.event` notifications that
    follow are listed in the transcript after the response of the prompt they belong to (their
    interleaving with `session/update` frames depends on task scheduling, their order does not);
    the runner waits for each prompt's `turn/end` event before going on."""

    max_messages: Positive | UnsetType = UNSET


class UnfollowStep(_Spec, tag="unfollow", tag_field="op"):
    """`session.unfollow` of the most recent subscription still open."""


class RestartStep(_Spec, tag="restart", tag_field="op"):
    """End this server process (close its stdin; it must exit 0) and start a fresh one on the
    same sessions directory and workspace."""


class RequestStep(_Spec, tag="request", tag_field="op"):
    """Any other request, e.g. `session/list`; `<workspace>` and `<session-N>` in `params` are
    replaced by the real values."""

    method: str
    params: Any = UNSET


Step = (
    InitializeStep
    | NewStep
    | PromptStep
    | LoadStep
    | PageStep
    | PageAllStep
    | FollowStep
    | UnfollowStep
    | RestartStep
    | RequestStep
)


class ServerOptions(_Spec):
    """Flags for `acp-server serve`: `--pace-ms` (tests must not depend on it), `--max-steps`,
    and `--context-window` with `--compact-at` for a scenario that compacts by itself."""

    pace_ms: Annotated[int, Meta(ge=0)] = 0
    max_steps: Positive | UnsetType = UNSET
    context_window: Positive | UnsetType = UNSET
    compact_at: Annotated[float, Meta(ge=0, le=1)] | UnsetType = UNSET


class ScenarioInput(_Spec):
    """A snapshot scenario's input.json: what the conversation shows, and the client's steps."""

    description: str
    steps: list[Step]
    server: ServerOptions = msgspec.field(default_factory=ServerOptions)


class ScenarioError(Exception):
    """An input.json that cannot be used, or a run that did not follow it."""


def load_input(path: Path) -> ScenarioInput:
    """Decode and check `input.json`: types, one `new` before any step that needs a session,
    an `initialize` first in each process."""
    try:
        scenario = msgspec.json.decode(path.read_bytes(), type=ScenarioInput)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ScenarioError(f"{path}: {exc}") from None
    problems = check_steps(scenario.steps)
    if problems:
        raise ScenarioError(f"{path}: " + "; ".join(problems))
    return scenario


def check_steps(steps: Sequence[Step]) -> list[str]:
    """What is wrong with the order of `steps` (nothing: an empty list)."""
    problems = []
    initialized = has_session = False
    for index, step in enumerate(steps):
        where = f"steps[{index}] ({step_name(step)})"
        if isinstance(step, RestartStep):
            initialized = False
            continue
        if isinstance(step, InitializeStep):
            initialized = True
            continue
        if not initialized:
            problems.append(f"{where}: each server process starts with an initialize step")
        if isinstance(step, NewStep):
            if has_session:
                problems.append(f"{where}: a scenario has one top-level session (one new step)")
            has_session = True
        elif not isinstance(step, RequestStep) and not has_session:
            problems.append(f"{where}: comes before the new step that creates the session")
        if isinstance(step, PromptStep):
            for number, answer in enumerate(step.answers):
                if isinstance(answer, PermissionAnswer) and (answer.option_id is UNSET) == (
                    not answer.cancelled
                ):
                    problems.append(
                        f"{where}: answers[{number}]: give exactly one of optionId and cancelled: true"
                    )
    if not has_session:
        problems.append("no new step: a scenario needs its session")
    return problems


def step_name(step: Step) -> str:
    return cast(str, type(step).__struct_config__.tag)  # every step class has a string tag
