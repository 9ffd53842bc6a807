"""The session viewer in headless Chromium, against `acp-server serve --listen` (SPEC 3.4).

One server per module, on the llm-replay demo recording: a prompt in a new session replays it
(a user message, thoughts, text, four tool calls, a plan), paced so that a live follow sees it
stream. What the page shows is compared with the session's log, read over the same server by
a Python client.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from browser import (
    artifacts_dir,
    fresh_page,
    launched_browser,
    save_screenshot,
    status,
    wait_for_state,
)
from ws_server import Listening, Peer, listening

from acp_server.agent.tools.builtin import BUILTIN_TOOLS

pytestmark = pytest.mark.process

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

PACE_MS = "10"


@dataclass
class Recorded:
    session_id: str
    cwd: Path
    events: list[dict[str, Any]]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Listening]:
    with listening(tmp_path_factory.mktemp("sessions"), "--pace-ms", PACE_MS) as started:
        yield started


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launched_browser() as launched:
        yield launched


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    with fresh_page(browser) as opened:
        yield opened


Screenshot = Callable[["Page"], Path]


@pytest.fixture
def screenshot(request: pytest.FixtureRequest, tmp_path: Path) -> Screenshot:
    """Saves a page as `<test name>.png` among the test artifacts."""
    directory = artifacts_dir(tmp_path)
    return lambda page: save_screenshot(page, directory, request.node.name)


@pytest.fixture(scope="module")
def client(server: Listening) -> Peer:
    peer = server.connect()
    peer.initialize()
    return peer


@pytest.fixture(scope="module")
def recorded(client: Peer, tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """A session whose turn has ended: the whole demo recording, replayed once."""
    cwd = tmp_path_factory.mktemp("recorded")
    session_id = client.new_session(cwd)
    assert client.prompt_demo(session_id) == {"stopReason": "end_turn"}
    return Recorded(session_id, cwd, client.events(session_id))


def shown_nodes(page: Page) -> list[dict[str, Any]]:
    """Every node the page shows, in order: its kind, seq, status and texts."""
    nodes: list[dict[str, Any]] = page.evaluate(
        """() => [...document.querySelectorAll('.nodes > [data-kind]')].map((e) => ({
            kind: e.dataset.kind,
            seq: Number(e.dataset.seq),
            status: e.dataset.status ?? null,
            body: e.querySelector(':scope > .body, :scope .body')?.textContent ?? null,
            title: e.querySelector('.tool-title')?.textContent ?? null,
            output: e.querySelector('.output')?.textContent ?? null,
            diffs: [...e.querySelectorAll('.diff')].map((d) => d.dataset.path),
            entries: [...e.querySelectorAll('.plan-entry .content')].map((c) => c.textContent),
        }))"""
    )
    return nodes


def of_kind(nodes: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [node for node in nodes if node["kind"] == kind]


def texts(content: list[dict[str, Any]]) -> str:
    return "\n".join(block["text"] for block in content if block["type"] == "text")


def message_blocks(events: list[dict[str, Any]], block_type: str) -> list[str]:
    return [
        block["text"]
        for event in events
        if event["type"] == "assistant/message"
        for block in event["data"]["message"]["content"]
        if block["type"] == block_type
    ]


def user_texts(events: list[dict[str, Any]]) -> list[str]:
    return [texts(e["data"]["message"]["content"]) for e in events if e["type"] == "user/message"]


def page_starts(client: Peer, session_id: str, last_seq: int, per_page: int) -> list[int]:
    """The first seq of each `session.page` of `per_page` messages, newest page first."""
    address = {"kind": "session", "sessionId": session_id}
    params: dict[str, Any] = {"address": address, "throughSeq": last_seq, "maxMessages": per_page}
    starts = []
    while True:
        result = client.request("session.page", params)
        first = result["records"][0]
        starts.append(first["event"]["seq"] if "event" in first else first["chunks"]["seq0"])
        if not result["hasMore"]:
            return starts
        params["beforeSeq"] = starts[-1]


def test_lists_the_stores_sessions_newest_first_each_linking_to_its_page(
    page: Page,
    server: Listening,
    client: Peer,
    recorded: Recorded,
    screenshot: Screenshot,
) -> None:
    listed = client.request("session/list", {})["sessions"]
    newest_first = sorted(listed, key=lambda s: s["updatedAt"], reverse=True)

    page.goto(server.viewer_url("/"))
    wait_for_state(page, "listed")
    screenshot(page)

    assert page.url == f"{server.base_url}/"  # the token left the address bar
    items = page.locator(".session-item")
    assert [items.nth(i).get_attribute("data-session-id") for i in range(items.count())] == [
        s["sessionId"] for s in newest_first
    ]
    item = page.locator(f'.session-item[data-session-id="{recorded.session_id}"]')
    assert item.locator(".cwd").text_content() == str(recorded.cwd)
    assert item.locator("a").get_attribute("href") == f"/sessions/{recorded.session_id}"

    item.locator("a").click()
    wait_for_state(page, "following")  # the token was kept for the next page
    assert page.url == f"{server.base_url}/sessions/{recorded.session_id}"


def test_shows_a_recorded_conversation_as_its_log_holds_it(
    page: Page,
    server: Listening,
    recorded: Recorded,
    screenshot: Screenshot,
) -> None:
    events = recorded.events
    page.goto(server.viewer_url(f"/sessions/{recorded.session_id}"))
    wait_for_state(page, "following")
    page.locator(".node.tool").first.locator("summary").click()
    screenshot(page)
    nodes = shown_nodes(page)

    assert [n["body"] for n in of_kind(nodes, "user")] == user_texts(events)
    assert [n["body"] for n in of_kind(nodes, "text")] == message_blocks(events, "text")
    assert [n["body"] for n in of_kind(nodes, "thought")] == message_blocks(events, "reasoning")
    calls = [e["data"] for e in events if e["type"] == "tool/call"]
    results = {e["data"]["callId"]: e["data"] for e in events if e["type"] == "tool/result"}
    assert [(n["title"], n["status"], n["output"], n["diffs"]) for n in of_kind(nodes, "tool")] == [
        (
            BUILTIN_TOOLS.present(call["name"], json.loads(call["arguments"])).title,
            "failed" if results[call["callId"]].get("isError") else "completed",
            texts(results[call["callId"]]["content"]),
            [b["path"] for b in results[call["callId"]]["content"] if b["type"] == "diff"],
        )
        for call in calls
    ]
    plans = [e["data"]["entries"] for e in events if e["type"] == "plan/update"]
    assert [n["entries"] for n in of_kind(nodes, "plan")] == [[e["content"] for e in plans[-1]]]
    assert status(page, "firstSeq") == 0
    assert status(page, "lastSeq") == events[-1]["seq"]
    assert page.locator('[data-figure="events"]').text_content() == str(len(events))
    assert page.locator('[data-figure="tool-calls"]').text_content() == str(len(calls))


def test_follows_a_live_session_gaplessly_while_it_streams(
    page: Page,
    server: Listening,
    client: Peer,
    tmp_path: Path,
    screenshot: Screenshot,
) -> None:
    session_id = client.new_session(tmp_path)
    page.goto(server.viewer_url(f"/sessions/{session_id}"))
    wait_for_state(page, "following")
    assert status(page, "events") == 0

    assert client.prompt_demo(session_id) == {"stopReason": "end_turn"}
    events = client.events(session_id)
    last_seq = events[-1]["seq"]
    page.wait_for_function("last => window.acpViewer?.lastSeq === last", arg=last_seq)
    screenshot(page)

    assert status(page, "lastSeq") == last_seq

    assert status(page, "events") == len(events)
    assert status(page, "liveEvents") == len(events)  # every event came as it was appended
    shown = of_kind(shown_nodes(page), "text")
    assert [n["body"] for n in shown] == message_blocks(events, "text")
    assert {n["status"] for n in shown} == {"done"}


def test_pages_older_history_in_when_scrolled_to_the_top(
    page: Page,
    server: Listening,
    client: Peer,
    recorded: Recorded,
    screenshot: Screenshot,
) -> None:
    events = recorded.events
    per_page = 2
    pages = page_starts(client, recorded.session_id, events[-1]["seq"], per_page)
    assert len(pages) > 2
    page.set_viewport_size({"width": 1100, "height": 420})
    page.goto(server.viewer_url(f"/sessions/{recorded.session_id}", messages=per_page))
    wait_for_state(page, "following")
    assert status(page, "hasOlder") is True
    assert status(page, "firstSeq") > 0

    while status(page, "hasOlder"):
        first = status(page, "firstSeq")
        page.locator("#conversation").evaluate("e => { e.scrollTop = 0; }")
        page.wait_for_function("first => window.acpViewer?.firstSeq < first", arg=first)
    page.locator("#conversation").evaluate("e => { e.scrollTop = 0; }")
    screenshot(page)

    assert status(page, "pagesLoaded") == len(pages) - 1
    assert status(page, "firstSeq") == 0
    assert status(page, "events") == len(events)
    nodes = shown_nodes(page)
    assert [n["seq"] for n in nodes] == sorted({n["seq"] for n in nodes})
    assert [n["body"] for n in of_kind(nodes, "user")] == user_texts(events)
    assert [n["body"] for n in of_kind(nodes, "text")] == message_blocks(events, "text")


def test_shows_the_title_and_the_mode_changes_and_lists_the_title(
    page: Page, server: Listening, client: Peer, tmp_path: Path, screenshot: Screenshot
) -> None:
    session_id = client.new_session(tmp_path)
    title = "Fix the greeting"
    prompt = [{"type": "text", "text": f"/title {title}"}]
    client.request("session/prompt", {"sessionId": session_id, "prompt": prompt})
    client.request("session/set_mode", {"sessionId": session_id, "modeId": "plan"})

    page.goto(server.viewer_url("/"))
    wait_for_state(page, "listed")
    item = page.locator(f'.session-item[data-session-id="{session_id}"]')
    assert item.locator(".title").text_content() == title

    item.locator("a").click()
    wait_for_state(page, "following")
    screenshot(page)
    assert page.locator(".session-title").text_content() == title
    nodes = shown_nodes(page)
    assert [(n["kind"], n["body"]) for n in nodes if n["kind"] in ("title", "mode")] == [
        ("title", title),
        ("mode", "plan"),
    ]


def test_says_so_when_the_token_is_refused(
    page: Page,
    server: Listening,
    screenshot: Screenshot,
) -> None:
    page.goto(server.viewer_url("/", token="not-the-token"))
    page.wait_for_function("() => window.acpViewer?.state === 'error'")
    screenshot(page)

    assert status(page, "error")["kind"] == "token-refused"
    alert = page.get_by_role("alert")
    assert alert.locator("h2").text_content() == "The server refused the access token"


def test_says_so_when_the_session_is_unknown(
    page: Page,
    server: Listening,
    screenshot: Screenshot,
) -> None:
    unknown = "0" * 32
    page.goto(server.viewer_url(f"/sessions/{unknown}"))
    page.wait_for_function("() => window.acpViewer?.state === 'error'")
    screenshot(page)

    assert status(page, "error")["kind"] == "unknown-session"
    assert page.get_by_role("alert").text_content() == (
        f"No such sessionThis store holds no session {unknown}."
    )


def test_says_so_when_the_connection_is_lost_and_keeps_what_it_shows(
    page: Page, tmp_path: Path, screenshot: Screenshot
) -> None:
    with listening(tmp_path / "sessions") as own:
        other = own.connect()
        other.initialize()
        session_id = other.new_session(tmp_path)
        other.prompt_demo(session_id)
        events = other.events(session_id)
        page.goto(own.viewer_url(f"/sessions/{session_id}"))
        wait_for_state(page, "following")
        own.terminate()
    page.wait_for_function("() => window.acpViewer?.state === 'error'")
    screenshot(page)

    assert status(page, "error")["kind"] == "connection-lost"
    alert = page.get_by_role("alert")
    assert alert.locator("h2").text_content() == "Connection to the server lost"
    shown = of_kind(shown_nodes(page), "text")
    assert [n["body"] for n in shown] == message_blocks(events, "text")
