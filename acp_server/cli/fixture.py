"""`acp-server fixture export SESSION_DIR SCENARIO_DIR`: a recorded session as a replay fixture.

Any session, typically one run against a live model (`--provider openai`), becomes what
llm-replay serves (SPEC 5) and what a snapshot scenario commits (SPEC 6):

- `session.jsonl`: the session's log, canonical packed and projected (`render_fixture`);
- `session.1.jsonl`, `session.2.jsonl`, ...: its subagents' logs, found under the same sessions
  root through the `subagent/start` events, in first-call order (depth first: a subagent's own
  subagents follow it), which is the order llm-replay binds children in;
- `replay.override.json`, when a model call has no `finish` (it failed, or was cancelled): a
  `throw` entry with the turn's error (message and code) or a `hang` entry, patched at that
  call's script index, with the chunks the call streamed. llm-replay reads overrides for the
  top-level fixture only, so a failed call in a subagent cannot be exported (an error says so).

Normalization, chosen so that an export reads like a committed snapshot fixture:

- session ids become `<session-1>` (the exported session), `<session-2>`, ... (its subagents, in
  the order above), wherever they appear (headers, `subagent/start`, tool output);
- the sessions' cwd becomes `<workspace>`, and the sessions root `<sessions>`, in every string
  (`--keep-cwd` keeps every path). A model that wrote the absolute cwd into a tool call's
  arguments replays differently once the path is a placeholder (its chunks may split the path, so
  they cannot all be rewritten): the export warns, and `--keep-cwd` is then the honest choice;
- times: `createdAt` becomes 0 and every event's time is made relative to the first event (the
  projected form keeps only the gaps inside chunk rows); `--zero-times` sets them all to 0, as
  the snapshot runner stores them.

What `ACP_SNAPSHOT=record` needs is here too, for the snapshot runner to call:
`record_server_args()` (the live provider's server flags, from `ACP_SNAPSHOT_SERVER_ARGS`) and
`finish_recording()` (the override a freshly recorded fixture needs, and stale files removed).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import msgspec

from ..core.events import (
    AssistantChunk,
    AssistantMessageEvent,
    EventError,
    SessionEvent,
    SubagentStart,
    TurnEnd,
    TurnEndReasonError,
    convert_event,
)
from ..core.header import SessionHeader
from ..core.json_values import map_strings
from ..core.replay_script import (
    FIXTURE_NAME,
    OVERRIDE_NAME,
    HangEntry,
    Patch,
    PatchSet,
    ReplayError,
    ThrowEntry,
    Underivable,
    apply_override,
    child_fixture_name,
    derive_script,
    parse_fixture,
    parse_override,
    render_fixture,
)
from ..core.stream import AssistantText, AssistantToolCall, Finish, StreamChunk
from ..storage.errors import LogError
from ..storage.jsonl.log import read_log
from .log import UsageError, resolve_log_path

WORKSPACE_PLACEHOLDER: Final = "<workspace>"
SESSIONS_PLACEHOLDER: Final = "<sessions>"
SERVER_ARGS_ENV: Final = "ACP_SNAPSHOT_SERVER_ARGS"
"""`ACP_SNAPSHOT=record`: the server flags that select the live model, e.g.
`--provider openai --model gpt-4.1-mini` (the API key stays in its own variable)."""


class ExportError(Exception):
    """The session cannot become a fixture; the message says why."""


# ---------------------------------------------------------------------------------------------
# Finding the logs.


@dataclass
class SessionLog:
    path: Path
    header: SessionHeader
    events: list[SessionEvent]


def collect_logs(session: Path) -> list[SessionLog]:
    """The session's log, then its subagents' logs in first-call order (depth first).

    `session` is a session directory or its log file; children are looked up beside it, under
    the same sessions root. Raises `UsageError` for a path that holds no log, `LogError` for a
    log that cannot be read, `ExportError` for a child that is missing.
    """
    first = _read(resolve_log_path(session))
    root = first.path.parent.parent
    logs: list[SessionLog] = []
    seen: set[str] = set()

    def visit(log: SessionLog) -> None:
        logs.append(log)
        seen.add(log.header.id)
        for event in log.events:
            if type(event) is not SubagentStart:
                continue
            child_id = event.data.child_session_id
            if child_id in seen:
                raise ExportError(f"{log.path}: subagent session {child_id} is started twice")
            try:
                child_path = resolve_log_path(root / child_id)
            except UsageError:
                raise ExportError(
                    f"{log.path}: subagent session {child_id} (subagent/start at seq {event.seq}) has no log in {root}"
                ) from None
            visit(_read(child_path))

    visit(first)
    return logs


def _read(path: Path) -> SessionLog:
    contents = read_log(path)
    return SessionLog(path, contents.header, contents.events)


# ---------------------------------------------------------------------------------------------
# Normalizing (pure).


@dataclass
class FixtureLog:
    name: str
    header: SessionHeader
    events: list[SessionEvent]


def normalize_logs(
    logs: list[SessionLog], *, zero_times: bool = False, keep_cwd: bool = False
) -> list[FixtureLog]:
    """Each log with ids, paths and times normalized (see the module docstring), named
    `session.jsonl`, `session.1.jsonl`, ... in order."""
    replacements: dict[str, str] = {}
    if not keep_cwd and logs:
        replacements[str(logs[0].path.parent.parent)] = SESSIONS_PLACEHOLDER
        for log in logs:
            replacements[log.header.cwd] = WORKSPACE_PLACEHOLDER
    for number, log in enumerate(logs, start=1):
        replacements[log.header.id] = f"<session-{number}>"
    pattern = _whole_names(replacements)

    def text(value: str) -> str:
        return (
            pattern.sub(lambda m: replacements[m.group(0)], value) if pattern is not None else value
        )

    out = []
    for number, log in enumerate(logs):
        header = map_strings(msgspec.to_builtins(log.header), text)
        header["createdAt"] = 0
        start = log.events[0].time if log.events else 0
        events = []
        for event in log.events:
            value = map_strings(msgspec.to_builtins(event), text)
            value["time"] = 0 if zero_times else event.time - start
            events.append(convert_event(value))
        name = FIXTURE_NAME if number == 0 else child_fixture_name(number)
        out.append(FixtureLog(name, msgspec.convert(header, SessionHeader), events))
    return out


_NAME_CHAR: Final = "A-Za-z0-9_-"


def _whole_names(names: Iterable[str]) -> re.Pattern[str] | None:
    """A pattern matching each name as a whole (an id `top` is not found inside `stop`, a cwd
    `/w` not inside `/work` or `/w.txt`, but is in `/w/x` and at the end of a sentence, `/w.`);
    longest first, so that a path inside another is replaced as a whole."""
    alternatives = [
        (rf"(?<![{_NAME_CHAR}])" if name[:1].isalnum() else "")
        + re.escape(name)
        + rf"(?!\.?[{_NAME_CHAR}])"
        for name in sorted(names, key=len, reverse=True)
    ]
    return re.compile("|".join(alternatives)) if alternatives else None


def cwd_in_model_output(log: SessionLog) -> bool:
    """Whether the model wrote the session's cwd in its text or tool-call arguments."""
    cwd = log.header.cwd
    for event in log.events:
        if type(event) is AssistantMessageEvent:
            for block in event.data.message.content:
                if isinstance(block, AssistantText) and cwd in block.text:
                    return True
                if isinstance(block, AssistantToolCall) and cwd in block.arguments:
                    return True
    return False


def fixture_override(events: Iterable[SessionEvent]) -> PatchSet | None:
    """The override a fixture needs: one patch for each model call without `finish`.

    A call that failed (its turn ended `{kind: "error"}`) replays as a `throw` of its chunks and
    the turn's error; one that was cancelled or interrupted, as a `hang` of its chunks. None when
    every call finished.
    """
    events = list(events)
    derived = derive_script(events)
    if not any(isinstance(entry, Underivable) for entry in derived):
        return None
    chunks: dict[tuple[int, int], list[StreamChunk]] = {}
    errors: dict[int, TurnEndReasonError] = {}
    for event in events:
        if type(event) is AssistantChunk:
            d = event.data
            step_chunks = chunks.setdefault((d.turn, d.step), [])
            step_chunks.append(d.chunk)
            if type(d.chunk) is Finish:
                step_chunks.clear()  # a later call in the same step starts after the finish
        elif type(event) is TurnEnd and type(event.data.reason) is TurnEndReasonError:
            errors[event.data.turn] = event.data.reason
    patches = []
    for index, entry in enumerate(derived):
        if not isinstance(entry, Underivable):
            continue
        prefix = list(chunks.get((entry.turn, entry.step), []))
        error = errors.get(entry.turn)
        if error is not None:
            patched: ThrowEntry | HangEntry = ThrowEntry(
                prefix, error.error.message, error.error.code
            )
        else:
            patched = HangEntry(prefix)
        patches.append(Patch(index, patched))
    return PatchSet(patches)


def encode_override(override: PatchSet) -> bytes:
    """The sidecar's bytes: indented JSON, like the committed ones."""
    return msgspec.json.format(msgspec.json.encode(override), indent=2) + b"\n"


def override_for_fixture(name: str, fixture: bytes) -> bytes | None:
    """`replay.override.json` for a fixture's bytes (None: it needs none). For the snapshot
    runner's record mode: call it on the recorded `session.jsonl` (`RunResult.logs`)."""
    try:
        parsed = parse_fixture(name, fixture.splitlines())
    except ReplayError as exc:
        raise ExportError(str(exc)) from None
    override = fixture_override(parsed.events)
    return encode_override(override) if override is not None else None


def finish_recording(scenario: Path | str, logs: Mapping[str, bytes]) -> list[str]:
    """After a record run has written its fixtures (`logs`: file name -> bytes, the snapshot
    runner's `RunResult.logs`), write the override they need, or remove a stale one, and remove
    `session.N.jsonl` files the run did not produce. Returns the names written or removed.
    Raises `ExportError` when a subagent's model call did not finish (no override can say so)."""
    scenario = Path(scenario)
    changed = []
    for name, data in logs.items():
        if name != FIXTURE_NAME and override_for_fixture(name, data) is not None:
            raise ExportError(
                f"{name}: a subagent's model call did not finish, and llm-replay takes an override "
                "for the top-level fixture only"
            )
    override = override_for_fixture(FIXTURE_NAME, logs[FIXTURE_NAME])
    path = scenario / OVERRIDE_NAME
    if override is not None:
        if not path.is_file() or path.read_bytes() != override:
            path.write_bytes(override)
            changed.append(OVERRIDE_NAME)
    elif path.is_file():
        path.unlink()
        changed.append(OVERRIDE_NAME)
    for stale in sorted(scenario.glob("session.*.jsonl")):
        if stale.name not in logs:
            stale.unlink()
            changed.append(stale.name)
    return changed


def record_server_args(environ: Mapping[str, str] | None = None) -> list[str]:
    """The server flags of `ACP_SNAPSHOT=record`, from `ACP_SNAPSHOT_SERVER_ARGS` (shell words).

    The snapshot runner puts them where replay mode puts `--replay DIRECTORY`. Flags the runner
    sets itself are refused, and so is an empty value (nothing to record against). Titles are
    the prompt's (`--titles prompt`, added here): llm-replay makes them so, and a recording
    must replay as it ran (a title's model call is no step a fixture holds)."""
    environ = os.environ if environ is None else environ
    raw = environ.get(SERVER_ARGS_ENV, "")
    try:
        args = shlex.split(raw)
    except ValueError as exc:
        raise ExportError(f"${SERVER_ARGS_ENV}: {exc}") from None
    if "--provider" not in [a.split("=", 1)[0] for a in args]:
        raise ExportError(
            f"${SERVER_ARGS_ENV} must select a live model, e.g. "
            "'--provider openai --model NAME --base-url URL' (the key stays in $OPENAI_API_KEY)"
        )
    for arg in args:
        flag = arg.split("=", 1)[0]
        if flag in ("--replay", "--replay-override", "--sessions-dir", "--titles"):
            raise ExportError(f"${SERVER_ARGS_ENV}: {flag} is set by the snapshot runner itself")
    return [*args, "--titles", "prompt"]


# ---------------------------------------------------------------------------------------------
# Exporting.


@dataclass
class Export:
    files: dict[str, bytes]
    """File name in the scenario directory -> its new bytes."""
    warnings: list[str]


def build_export(session: Path, *, zero_times: bool = False, keep_cwd: bool = False) -> Export:
    """Everything an export writes, computed and checked before anything is written."""
    logs = collect_logs(session)
    warnings = []
    if not keep_cwd and any(cwd_in_model_output(log) for log in logs):
        warnings.append(
            "the model wrote the session's cwd into its output; replayed elsewhere, those paths "
            "point into <workspace> (use --keep-cwd to keep them)"
        )
    try:
        fixtures = normalize_logs(logs, zero_times=zero_times, keep_cwd=keep_cwd)
    except (EventError, msgspec.ValidationError) as exc:
        raise ExportError(f"a normalized event is no longer valid: {exc}") from None
    files: dict[str, bytes] = {}
    for number, fixture in enumerate(fixtures):
        data = render_fixture(fixture.header, fixture.events)
        override = fixture_override(fixture.events)
        if override is not None and number > 0:
            raise ExportError(
                f"{logs[number].path}: subagent {number} has a model call that did not finish, and "
                "llm-replay takes an override for the top-level fixture only"
            )
        files[fixture.name] = data
        if override is not None:
            files[OVERRIDE_NAME] = encode_override(override)
        _check_replayable(fixture.name, data, files.get(OVERRIDE_NAME) if number == 0 else None)
    return Export(files, warnings)


def _check_replayable(name: str, data: bytes, override: bytes | None) -> None:
    """The fixture reads back and llm-replay can derive its script (else a bug here)."""
    try:
        parsed = parse_fixture(name, data.splitlines())
        apply_override(
            name,
            derive_script(parsed.events),
            parse_override(OVERRIDE_NAME, override) if override else None,
        )
    except ReplayError as exc:
        raise ExportError(f"the exported fixture would not replay: {exc}") from None


def write_export(export: Export, scenario: Path) -> tuple[list[str], list[str]]:
    """Write the files; remove fixture files of an earlier export that this one does not have
    (children past the new count, an override no longer needed). Returns (written, removed)."""
    scenario.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in export.files.items():
        (scenario / name).write_bytes(data)
        written.append(name)
    removed = []
    stale = [OVERRIDE_NAME, *(p.name for p in scenario.glob("session.*.jsonl"))]
    for name in stale:
        path = scenario / name
        if name not in export.files and path.is_file():
            path.unlink()
            removed.append(name)
    return written, sorted(removed)


def export_fixture(
    session: Path | str, scenario: Path | str, *, zero_times: bool = False, keep_cwd: bool = False
) -> Export:
    """Export `session` (a session directory) into `scenario`; see the module docstring."""
    export = build_export(Path(session), zero_times=zero_times, keep_cwd=keep_cwd)
    write_export(export, Path(scenario))
    return export


def run_fixture_command(args: argparse.Namespace) -> int:
    """`acp-server fixture export`: status 0, 1 (the session cannot be exported) or 2 (bad paths)."""
    scenario: Path = args.scenario_dir
    if scenario.exists() and not scenario.is_dir():
        sys.stderr.write(f"acp-server fixture export: error: {scenario}: not a directory\n")
        return 2
    try:
        export = build_export(args.session_dir, zero_times=args.zero_times, keep_cwd=args.keep_cwd)
    except UsageError as exc:
        sys.stderr.write(f"acp-server fixture export: error: {exc}\n")
        return 2
    except (LogError, ExportError) as exc:
        sys.stderr.write(f"acp-server fixture export: error: {exc}\n")
        return 1
    for warning in export.warnings:
        sys.stderr.write(f"acp-server fixture export: warning: {warning}\n")
    try:
        written, removed = write_export(export, scenario)
    except OSError as exc:
        sys.stderr.write(
            f"acp-server fixture export: error: cannot write {scenario}: {exc.strerror or exc}\n"
        )
        return 2
    for name in written:
        sys.stdout.write(f"wrote {scenario / name}\n")
    for name in removed:
        sys.stdout.write(f"removed {scenario / name} (not part of this export)\n")
    return 0


__all__ = [
    "SERVER_ARGS_ENV",
    "ExportError",
    "build_export",
    "collect_logs",
    "encode_override",
    "export_fixture",
    "finish_recording",
    "fixture_override",
    "normalize_logs",
    "override_for_fixture",
    "record_server_args",
    "run_fixture_command",
]
