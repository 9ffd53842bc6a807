"""Run a snapshot scenario through the real server, and compare or refresh its expected files.

`run_scenario(directory)` spawns `acp-server serve --replay DIRECTORY` with a fresh sessions
directory and a fresh workspace (a copy of the scenario's `workspace/`), plays the client from
`input.json` (answering the server's requests as its `answers` say: `client_side.py`), and
returns the normalized transcript and the normalized, re-persisted logs (`compare.py` compares
them with the committed files or refreshes those). The server process is `process.py`'s.

The transcript (`stdout.expected.jsonl`) holds one JSON value a line: `{"process": N}` when a
server process starts, every frame the server wrote (as is, normalized), and the client's own
frames wrapped as `{"client": frame}`, in the order the client saw and sent them.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import anyio
import msgspec
from msgspec import UNSET

from ..client.process import SERVE_COMMAND
from ..core.events import SubagentStart
from ..core.json_values import map_strings
from ..core.replay_script import FIXTURE_NAME, child_fixture_name
from ..jsonrpc.errors import ErrorObject
from ..jsonrpc.peer import ErrorResponse, Notification, Request, Response
from ..storage.api import StoredLog
from ..storage.errors import LogError
from ..storage.url import open_store, parse_store_url, store_url_for_dir, store_url_in
from .client_side import PromptContext, answer_request
from .normalize import Normalizer
from .process import ScenarioProcess, encode_line
from .scenario import (
    INPUT_NAME,
    FollowStep,
    InitializeStep,
    LoadStep,
    NewStep,
    PageAllStep,
    PageStep,
    PromptStep,
    RequestStep,
    RestartStep,
    ScenarioError,
    ScenarioInput,
    UnfollowStep,
    load_input,
    step_name,
)

TRANSCRIPT_NAME: Final = "stdout.expected.jsonl"
WORKSPACE_NAME: Final = "workspace"
DEFAULT_COMMAND: Final = SERVE_COMMAND
FRAME_TIMEOUT: Final = 60.0
"""Seconds to wait for any one frame (generous: CI machines are busy)."""
Engine = Literal["jsonl", "sqlite"]
"""Which store the scenario's server keeps its sessions in."""


@dataclass
class RunResult:
    transcript: bytes
    """`stdout.expected.jsonl` as this run wrote it."""
    logs: dict[str, bytes]
    """`session.jsonl` and each `session.N.jsonl`, as this run re-persisted them, normalized."""
    stderr: str


class _Run:
    def __init__(
        self,
        directory: Path,
        scenario: ScenarioInput,
        work: Path,
        command: Sequence[str],
        timeout: float,
        model_args: Sequence[str] | None = None,
        engine: Engine = "jsonl",
        store: str | None = None,
    ) -> None:
        self.directory = directory
        self.scenario = scenario
        self.command = list(command)
        self.timeout = timeout
        self.model_args = list(model_args) if model_args is not None else None
        self.sessions = work / "sessions"
        self.workspace = work / WORKSPACE_NAME
        self.sessions.mkdir()
        self.store = (
            parse_store_url(store) if store is not None else store_url_in(engine, self.sessions)
        )
        seed = directory / WORKSPACE_NAME
        if seed.is_dir():
            shutil.copytree(seed, self.workspace, symlinks=True)
        else:
            self.workspace.mkdir()
        self.records: list[tuple[str, Any]] = []
        self.process: ScenarioProcess | None = None
        self.processes = 0
        self.stderr: list[str] = []
        self.session_id: str | None = None
        self.subscriptions: list[str] = []
        self.all_subscriptions: list[str] = []
        self.held_events: list[dict[str, Any]] = []

    # -- processes -----------------------------------------------------------------------------

    def start(self) -> None:
        options = self.scenario.server
        argv = [*self.command, "--sessions-dir", str(self.sessions)]
        if self.store != store_url_for_dir(self.sessions):
            argv = [*self.command, "--store", self.store.text]
        if self.model_args is not None:
            argv += self.model_args
        else:
            argv += ["--replay", str(self.directory)]
            if options.pace_ms:
                argv += ["--pace-ms", str(options.pace_ms)]
        if options.max_steps is not UNSET:
            argv += ["--max-steps", str(options.max_steps)]
        if options.context_window is not UNSET:
            argv += ["--context-window", str(options.context_window)]
        if options.compact_at is not UNSET:
            argv += ["--compact-at", str(options.compact_at)]
        self.process = ScenarioProcess(argv)
        self.processes += 1
        self.subscriptions = []
        self.records.append(("process", self.processes))

    def stop(self) -> None:
        """End the current process as an editor would: close its input, read what is left."""
        process = self.process
        assert process is not None
        self.process = None
        process.close_input()
        try:
            while (incoming := process.read(self.timeout)) is not None:
                self._keep_server(incoming.frame)
            code = process.wait(self.timeout)
        finally:
            process.kill()
            self.stderr.append(process.stderr)
        self._release_held()
        if code != 0:
            raise ScenarioError(
                f"server process {self.processes} exited with status {code}; stderr:\n{process.stderr}"
            )
        if process.stdout_tail:
            raise ScenarioError(
                f"server process {self.processes} left an unterminated line: {process.stdout_tail[:200]!r}"
            )

    def abort(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.stderr.append(self.process.stderr)
            self.process = None

    # -- frames --------------------------------------------------------------------------------

    def send(self, frame: bytes) -> None:
        assert self.process is not None
        self.records.append(("client", json.loads(frame)))  # as sent, not as mutated later
        self.process.send(frame)

    def _keep_server(self, frame: dict[str, Any]) -> None:
        if frame.get("method") in ("session.event", "session.followEnded"):
            self.held_events.append(frame)
        else:
            self.records.append(("server", frame))

    def _release_held(self) -> None:
        self.records.extend(("server", frame) for frame in self.held_events)
        self.held_events = []

    def request(
        self, method: str, params: Any, context: PromptContext | None = None
    ) -> dict[str, Any]:
        """Send a request and play the client until its response; the response frame."""
        assert self.process is not None
        request_id, frame = self.process.peer.request(method, params)
        self.send(frame)
        if context is not None:
            self._maybe_cancel(context)
        while True:
            incoming = self.process.read(self.timeout)
            if incoming is None:
                raise ScenarioError(
                    f"the server's output ended while waiting for the answer to {method}; stderr:\n{self.process.stderr}"
                )
            frame_in, event = incoming
            if isinstance(event, (Request, Notification)):
                self._keep_server(frame_in)
                if isinstance(event, Request):
                    self._answer(frame_in, context)
                elif context is not None:
                    self._notification(frame_in, context)
                continue
            self.records.append(("server", frame_in))
            if not isinstance(event, (Response, ErrorResponse)) or event.id != request_id:
                raise ScenarioError(
                    f"the server answered request id {frame_in.get('id')!r}, which was never sent"
                )
            return frame_in

    def _notification(self, frame: dict[str, Any], context: PromptContext) -> None:
        method = frame["method"]
        if method == "session/update":
            context.updates += 1
            self._maybe_cancel(context)
        elif method == "session.event":
            params = frame.get("params") or {}
            if (params.get("event") or {}).get("type") == "turn/end":
                context.turn_ends.add(str(params.get("subscriptionId")))

    def _maybe_cancel(self, context: PromptContext) -> None:
        when = context.step.cancel
        if when is UNSET or context.cancel_sent or context.updates < when.after_updates:
            return
        if when.when_file is not UNSET:
            ready = self.workspace / when.when_file
            deadline = time.monotonic() + self.timeout
            while not ready.exists():
                if time.monotonic() > deadline:
                    raise ScenarioError(
                        f"{context.where}: {when.when_file} did not appear in the workspace within {self.timeout}s"
                    )
                time.sleep(0.005)
        context.cancel_sent = True
        assert self.process is not None
        self.send(self.process.peer.notify("session/cancel", {"sessionId": self.session_id}))

    # -- answering the server's requests -------------------------------------------------------

    def _answer(self, frame: dict[str, Any], context: PromptContext | None) -> None:
        reply = answer_request(frame, context, self.workspace)
        assert self.process is not None
        peer = self.process.peer
        if "error" in reply:
            self.send(peer.fail(frame["id"], ErrorObject(**reply["error"])))
        else:
            self.send(peer.answer(frame["id"], reply["result"]))

    # -- steps ---------------------------------------------------------------------------------

    def run(self) -> None:
        self.start()
        for index, step in enumerate(self.scenario.steps):
            where = f"steps[{index}] ({step_name(step)})"
            if isinstance(step, RestartStep):
                self.stop()
                self.start()
            elif isinstance(step, InitializeStep):
                self.request(
                    "initialize",
                    {
                        "protocolVersion": 1,
                        "clientCapabilities": step.client_capabilities,
                        "clientInfo": {"name": "acp-server-snapshots", "version": "1"},
                    },
                )
            elif isinstance(step, NewStep):
                result = self._result(
                    where,
                    self.request("session/new", {"cwd": str(self.workspace), "mcpServers": []}),
                )
                self.session_id = result["sessionId"]
            elif isinstance(step, PromptStep):
                self._prompt(step, where)
            elif isinstance(step, LoadStep):
                params: dict[str, Any] = {
                    "sessionId": self.session_id,
                    "cwd": str(self.workspace),
                    "mcpServers": [],
                }
                if step.max_messages is not UNSET:
                    params["_meta"] = {"acp-server": {"replay": {"maxMessages": step.max_messages}}}
                self._result(where, self.request("session/load", params))
            elif isinstance(step, PageStep):
                self._page(step, where)
            elif isinstance(step, PageAllStep):
                self._page_all(step, where)
            elif isinstance(step, FollowStep):
                params = {"address": self._address(None, where)}
                if step.max_messages is not UNSET:
                    params["maxMessages"] = step.max_messages
                result = self._result(where, self.request("session.follow", params))
                self.subscriptions.append(result["subscriptionId"])
                self.all_subscriptions.append(result["subscriptionId"])
            elif isinstance(step, UnfollowStep):
                if not self.subscriptions:
                    raise ScenarioError(f"{where}: no subscription is open")
                self.request("session.unfollow", {"subscriptionId": self.subscriptions.pop()})
            elif isinstance(step, RequestStep):
                self.request(step.method, self._substitute(step.params))
        self.stop()

    def _result(self, where: str, response: dict[str, Any]) -> Any:
        if "result" not in response:
            raise ScenarioError(
                f"{where}: the server answered with an error: {encode_line(response)[:500]}"
            )
        return response["result"]

    def _prompt(self, step: PromptStep, where: str) -> None:
        prompt = (
            [{"type": "text", "text": step.prompt}]
            if isinstance(step.prompt, str)
            else msgspec.to_builtins(step.prompt)
        )
        context = PromptContext(step, where, list(step.answers))
        params = {"sessionId": self.session_id, "prompt": self._substitute(prompt)}
        self.request("session/prompt", params, context)
        if context.used < len(context.answers):
            unused = ", ".join(f"answers[{i}]" for i in range(context.used, len(context.answers)))
            raise ScenarioError(
                f"{where}: the server made fewer requests than scripted: {unused} never used"
            )
        if step.cancel is not UNSET and not context.cancel_sent:
            raise ScenarioError(
                f"{where}: the prompt ended before its cancel was sent ({context.updates} updates)"
            )
        assert self.process is not None
        while any(s not in context.turn_ends for s in self.subscriptions):
            incoming = self.process.read(self.timeout)
            if incoming is None:
                raise ScenarioError(
                    f"{where}: the server's output ended before the followed turn/end"
                )
            frame, event = incoming
            self._keep_server(frame)
            if isinstance(event, Request):
                self._answer(frame, context)
            else:
                self._notification(frame, context)
        self._release_held()

    def _address(self, child: int | None, where: str) -> dict[str, Any]:
        if child is None:
            return {"kind": "session", "sessionId": self.session_id}
        children = self._children()
        if not 1 <= child <= len(children):
            raise ScenarioError(
                f"{where}: child {child} does not exist ({len(children)} subagents started)"
            )
        return {
            "kind": "subagent",
            "parentSessionId": self.session_id,
            "childSessionId": children[child - 1],
        }

    def _children(self) -> list[str]:
        if self.session_id is None:
            raise ScenarioError("the scenario's session was never created")
        events = self._read(self.session_id).events
        return [e.data.child_session_id for e in events if type(e) is SubagentStart]

    def _last_seq(self, address: dict[str, Any]) -> int:
        session_id = str(address.get("childSessionId", address.get("sessionId")))
        return self._read(session_id).event_count - 1

    def _read(self, session_id: str) -> StoredLog:
        """A session as the store holds it now (read as any other process would)."""

        async def read() -> StoredLog:
            store = open_store(self.store)
            try:
                return await store.read(session_id)
            finally:
                await store.aclose()

        return anyio.run(read)

    def _session_ids(self) -> list[str]:
        async def listed() -> list[str]:
            store = open_store(self.store)
            try:
                return sorted(item.header.id for item in await store.list_sessions())
            finally:
                await store.aclose()

        return anyio.run(listed)

    def _page(self, step: PageStep, where: str) -> None:
        address = self._address(step.child if step.child is not UNSET else None, where)
        through = step.through_seq if step.through_seq is not UNSET else self._last_seq(address)
        params: dict[str, Any] = {"address": address, "throughSeq": through}
        if step.before_seq is not UNSET:
            params["beforeSeq"] = step.before_seq
        if step.max_messages is not UNSET:
            params["maxMessages"] = step.max_messages
        self.request("session.page", params)

    def _page_all(self, step: PageAllStep, where: str) -> None:
        address = self._address(step.child if step.child is not UNSET else None, where)
        params: dict[str, Any] = {"address": address, "throughSeq": self._last_seq(address)}
        if step.max_messages is not UNSET:
            params["maxMessages"] = step.max_messages
        for _ in range(10_000):
            page = self._result(where, self.request("session.page", params))
            if not page["hasMore"]:
                return
            if not page["records"]:
                raise ScenarioError(f"{where}: an empty page says hasMore")
            first = page["records"][0]
            params["beforeSeq"] = (
                first["event"]["seq"] if "event" in first else first["chunks"]["seq0"]
            )
        raise ScenarioError(f"{where}: paging did not reach the start")

    def _substitute(self, value: Any) -> Any:
        """`<workspace>` and `<session-1>` in a value the script gives, made real."""

        def text(value: str) -> str:
            value = value.replace("<workspace>", str(self.workspace))
            if self.session_id is not None:
                value = value.replace("<session-1>", self.session_id)
            return value

        return map_strings(value, text)

    # -- results -------------------------------------------------------------------------------

    def logs(self) -> list[tuple[str, str]]:
        """(fixture name, session id) of every session the run created: the top-level one as
        `session.jsonl`, the subagents' in the order they started."""
        found = set(self._session_ids())
        if self.session_id is None or self.session_id not in found:
            raise ScenarioError("the scenario's session has no log in the sessions directory")
        found.discard(self.session_id)
        named = [(FIXTURE_NAME, self.session_id)]
        for number, child in enumerate(self._children(), start=1):
            if child not in found:
                raise ScenarioError(
                    f"subagent {number} ({child}) has no log in the sessions directory"
                )
            found.discard(child)
            named.append((child_fixture_name(number), child))
        if found:
            raise ScenarioError(
                f"sessions nobody started as a subagent of the scenario's session: {sorted(found)}"
            )
        return named

    def result(self) -> RunResult:
        named = self.logs()
        normalizer = Normalizer(
            [(str(self.workspace), "<workspace>"), (str(self.sessions), "<sessions>")],
            [session_id for _, session_id in named],
            self.all_subscriptions,
        )
        lines = []
        for kind, value in self.records:
            if kind == "process":
                lines.append(encode_line({"process": value}))
            elif kind == "client":
                lines.append(encode_line({"client": normalizer.value(value)}))
            else:
                lines.append(encode_line(normalizer.value(value)))
        logs = {}
        for name, session_id in named:
            try:
                contents = self._read(session_id)
            except LogError as exc:
                raise ScenarioError(f"{name}: the re-persisted log cannot be read: {exc}") from None
            logs[name] = normalizer.log(contents.header, contents.events)
        transcript = ("\n".join(lines) + "\n").encode()
        return RunResult(transcript, logs, "".join(self.stderr))

    def partial_transcript(self) -> str:
        return "\n".join(
            encode_line(value) if kind != "process" else f"(process {value})"
            for kind, value in self.records[-40:]
        )


def run_scenario(
    directory: Path | str,
    *,
    work_dir: Path | str | None = None,
    command: Sequence[str] = DEFAULT_COMMAND,
    timeout: float = FRAME_TIMEOUT,
    model_args: Sequence[str] | None = None,
    engine: Engine = "jsonl",
    store: str | None = None,
) -> RunResult:
    """Run the scenario in `directory` (replaying its own fixtures) and return what it produced.

    `model_args` (record mode) replace `--replay DIRECTORY` and the pacing: the server flags of a
    live model provider, e.g. `--provider openai --model NAME --base-url URL`.

    `work_dir` (default: a temporary directory, removed afterwards) receives the sessions
    directory (with `engine="sqlite"`, the database in it) and the workspace; `store`, a store
    URL (a PostgreSQL database), holds the sessions instead. `command` is the server command line before its flags. A run
    that does not follow the script raises `ScenarioError` with the last frames exchanged.
    """
    directory = Path(directory).resolve()
    scenario = load_input(directory / INPUT_NAME)
    with tempfile.TemporaryDirectory(prefix="acp-snapshot-") as scratch:
        work = Path(work_dir if work_dir is not None else scratch).resolve()
        work.mkdir(parents=True, exist_ok=True)
        run = _Run(directory, scenario, work, command, timeout, model_args, engine, store)
        try:
            run.run()
        except ScenarioError as exc:
            run.abort()
            raise ScenarioError(
                f"{directory.name}: {exc}\n\nlast frames (raw):\n{run.partial_transcript()}"
            ) from None
        except BaseException:
            run.abort()
            raise
        return run.result()


__all__ = ["DEFAULT_COMMAND", "RunResult", "ScenarioError", "run_scenario"]
