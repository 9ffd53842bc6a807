"""The clients attached to one live session, without a process: which updates each is sent
(`shown_to`), and a permission request asked of all of them (`ask_attached`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import anyio
import pytest

from acp_server.agent.ports import ClientCapabilities, RequestTimedOut
from acp_server.core.acp_updates import (
    AgentMessageChunk,
    NoticeShown,
    PlanUpdated,
    SessionNotification,
    ToolCallStarted,
    ToolCallUpdated,
)
from acp_server.core.content import TextContent
from acp_server.server.attached import Attached, ask_attached, shown_to
from acp_server.server.errors import ConnectionClosed

PARAMS = {"sessionId": "s"}


class FakePort:
    """A client that answers a request with `answer` once `release` is set (never: None)."""

    def __init__(self, answer: Any = None) -> None:
        self.answer = answer
        self.release = anyio.Event()
        self.asked = anyio.Event()
        self.withdrawn = False
        self.capabilities = ClientCapabilities()
        self.sent = []

    async def request(self, method: str, params: Any) -> Any:
        self.asked.set()
        try:
            await self.release.wait()
        except anyio.get_cancelled_exc_class():
            self.withdrawn = True
            raise
        return self.answer

    async def notify(self, method: str, params: Any) -> None:
        pass

    async def notify_all(self, method: str, params: Iterable[Any]) -> None:
        self.sent.extend(params)

    sent: list[SessionNotification]


class FakeSession:
    """What `ask_attached` reads of a live session."""

    id = "s"

    def __init__(self) -> None:
        self.clients: dict[Any, Attached] = {}
        self.attached = anyio.Event()

    def attach(self, port: FakePort) -> None:
        self.clients[port] = Attached(port, lambda task: None)
        self.attached.set()
        self.attached = anyio.Event()


def test_a_notice_goes_only_to_a_client_that_advertised_notices() -> None:
    note = SessionNotification("s", NoticeShown("info", "Prompt queued"))
    assert (
        shown_to(ClientCapabilities(), note, "s"),
        shown_to(ClientCapabilities(notices=True), note, "s"),
    ) == (False, True)


def test_plan_operations_go_only_to_a_client_that_advertised_them() -> None:
    note = SessionNotification("s", PlanUpdated([]))
    assert (
        shown_to(ClientCapabilities(), note, "s"),
        shown_to(ClientCapabilities(plan_operations=True), note, "s"),
    ) == (False, True)


def test_a_childs_update_goes_only_to_a_client_that_advertised_subagents() -> None:
    note = SessionNotification("child", AgentMessageChunk(TextContent("hi")))
    assert (
        shown_to(ClientCapabilities(), note, "s"),
        shown_to(ClientCapabilities(subagents=True), note, "s"),
    ) == (False, True)


@pytest.mark.anyio
async def test_the_first_answer_wins_and_the_other_clients_request_is_withdrawn() -> None:
    session = FakeSession()
    slow, quick = FakePort("slow"), FakePort("quick")
    session.attach(slow)
    session.attach(quick)
    quick.release.set()
    answer = await ask_attached(session, "session/request_permission", PARAMS, 600)  # type: ignore[arg-type]
    assert (answer, slow.withdrawn) == ("quick", True)


class GonePort(FakePort):
    async def request(self, method: str, params: Any) -> Any:
        raise ConnectionClosed(f"{method}: the client has closed the connection")


@pytest.mark.anyio
async def test_a_client_that_went_before_answering_leaves_the_request_waiting_for_another() -> None:
    session = FakeSession()
    session.attach(GonePort())
    with pytest.raises(RequestTimedOut):
        await ask_attached(session, "session/request_permission", PARAMS, 0.01)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_with_no_client_attached_the_request_times_out() -> None:
    with pytest.raises(RequestTimedOut) as timed_out:
        await ask_attached(FakeSession(), "session/request_permission", PARAMS, 0.01)  # type: ignore[arg-type]
    assert timed_out.value.seconds == 0.01


@pytest.mark.anyio
async def test_a_client_that_attaches_while_the_request_waits_is_asked() -> None:
    session = FakeSession()
    late = FakePort("late")
    late.release.set()
    answers: list[Any] = []

    async def ask() -> None:
        answers.append(await ask_attached(session, "session/request_permission", PARAMS, 600))  # type: ignore[arg-type]

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(ask)
        await anyio.wait_all_tasks_blocked()
        session.attach(late)
    assert answers == ["late"]


def started(call_id: str) -> SessionNotification:
    return SessionNotification("s", ToolCallStarted(call_id, "Write a.txt", "edit", "pending"))


@pytest.mark.anyio
async def test_a_loading_client_gets_what_came_after_its_replay_less_calls_it_replayed() -> None:
    port = FakePort()
    text = SessionNotification("s", AgentMessageChunk(TextContent("after")))
    async with anyio.create_task_group() as tasks:
        link = Attached(port, tasks.start_soon)
        link.hold()
        link.post([SessionNotification("s", AgentMessageChunk(TextContent("before")))], "s")
        link.restart()  # the replay reads the log now
        link.post([started("c1"), text, started("c2")], "s")
        link.replayed([started("c1").update])
        assert port.sent == []
        link.release()
    assert port.sent == [text, started("c2")]


@pytest.mark.anyio
async def test_a_replayed_call_id_is_left_out_once_and_a_finished_one_not_at_all() -> None:
    port = FakePort()
    finished = ToolCallUpdated("done", "completed")
    async with anyio.create_task_group() as tasks:
        link = Attached(port, tasks.start_soon)
        link.hold()
        link.restart()
        link.post([started("open"), started("open"), started("done")], "s")
        link.replayed([started("open").update, started("done").update, finished])
        link.release()
    assert port.sent == [started("open"), started("done")]
