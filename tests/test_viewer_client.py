"""The session viewer as a full ACP client, in headless Chromium at 1280 and 390 px wide,
against `acp-server serve --listen` over llm-replay fixtures (SPEC 3.4, 3.5, 4).

The page attaches to a session with `session/resume`, prompts it, answers its permission
requests, cancels, completes `/` commands, changes the mode, starts new sessions, searches
(`session.search`) and keeps the session list live (`session.list.follow`). What it shows is
compared with the session's log, read over the same server by a Python client.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack
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
from fixtures_builder import Scenario, Step, ToolUse, args, step_chunks, write_fixture
from prompt_harness import decision
from ws_server import Listening, Peer, listening

pytestmark = pytest.mark.process

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, WebSocketRoute

WIDTHS = [1280, 390]
HEIGHT = {1280: 800, 390: 844}

WRITE = ToolUse("call_write", "write_file", args(path="hello.txt", content="Hello\n"))
WROTE = "I wrote hello.txt."
WORKING = "Working on it"


def writing_scenario() -> Scenario:
    """A first prompt that writes a file (asking permission in the default mode), then says so."""
    return Scenario([("write hello", [Step(calls=[WRITE]), Step(text=WROTE, usage=(1200, 34))])])


EDIT = ToolUse("call_edit", "edit_file", args(path="a.txt", oldText="Hi", newText="Hello"))


def editing_scenario() -> Scenario:
    """A first prompt that edits a file (asking permission in the default mode), then stops."""
    return Scenario([("edit a", [Step(calls=[EDIT]), Step(text="Not edited.")])])


def hanging_scenario() -> Scenario:
    """A first prompt whose model streams a few words, then waits until cancelled."""
    prefix = [c for c in step_chunks(Step(text=WORKING)) if c["type"] != "finish"][:-1]
    return Scenario(
        [("wait", [Step(text="never streamed")])],
        override={"patches": [{"at": 0, "entry": {"kind": "hang", "chunks": prefix}}]},
    )


def serve(tmp: Path, scenario: Scenario) -> Any:
    fixture = write_fixture(tmp / "fixture", scenario)
    return listening(
        tmp / "sessions",
        *("--replay", str(fixture), "--titles", "off", "--context-window", "200000"),
        *("--price-input", "3", "--price-output", "15"),
    )


@pytest.fixture(scope="module")
def writer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Listening]:
    with serve(tmp_path_factory.mktemp("writer"), writing_scenario()) as started:
        yield started


@pytest.fixture(scope="module")
def editing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Listening]:
    with serve(tmp_path_factory.mktemp("editing"), editing_scenario()) as started:
        yield started


@pytest.fixture(scope="module")
def hanging(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Listening]:
    with serve(tmp_path_factory.mktemp("hanging"), hanging_scenario()) as started:
        yield started


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launched_browser() as launched:
        yield launched


Screenshot = Callable[["Page"], Path]
Pages = Callable[[int, int], "Page"]


@pytest.fixture
def screenshot(request: pytest.FixtureRequest, tmp_path: Path) -> Screenshot:
    """Saves a page as `<test name>.png` among the test artifacts."""
    directory = artifacts_dir(tmp_path)
    return lambda page: save_screenshot(page, directory, request.node.name)


def peer(server: Listening) -> Peer:
    connected = server.connect()
    connected.initialize()
    return connected


def closed_session(server: Listening, cwd: Path) -> tuple[Peer, str]:
    """A new session in `cwd`, closed again so that the page can resume it; the peer that made
    it (to read its log)."""
    client = peer(server)
    session_id: str = client.request("session/new", {"cwd": str(cwd), "mcpServers": []})[
        "sessionId"
    ]
    client.request("session/close", {"sessionId": session_id})
    return client, session_id


@pytest.fixture
def pages(browser: Browser) -> Iterator[Pages]:
    """Opens pages `width` by `height` px, each in a context of its own, closed at the end."""
    with ExitStack() as stack:
        yield lambda width, height: stack.enter_context(fresh_page(browser, width, height))


def open_session(pages: Pages, server: Listening, session_id: str, width: int) -> Page:
    """The session's page, attached (resumed) and following."""
    page = pages(width, HEIGHT[width])
    page.goto(server.viewer_url(f"/sessions/{session_id}"))
    wait_for_state(page, "following")
    page.wait_for_function("() => window.acpViewer.attached || window.acpViewer.readOnly")
    assert status(page, "attached") is True
    return page


def send(page: Page, text: str) -> None:
    page.locator("#prompt").fill(text)
    page.locator(".composer .send").click()


def wait_for_stop(page: Page, reason: str) -> None:
    page.wait_for_function(
        "reason => window.acpViewer.lastStopReason === reason && !window.acpViewer.running",
        arg=reason,
    )


def node_texts(page: Page, kind: str) -> list[str]:
    texts: list[str] = page.locator(f'.nodes > [data-kind="{kind}"] .body').all_text_contents()
    return texts


def in_view(page: Page, selector: str) -> bool:
    """Whether the element is shown wholly within the viewport's width and height."""
    shown: bool = page.locator(selector).evaluate(
        """e => { const r = e.getBoundingClientRect();
            return r.width > 0 && r.left >= 0 && r.right <= innerWidth
                && r.top >= 0 && r.bottom <= innerHeight; }"""
    )
    return shown


@pytest.mark.parametrize("width", WIDTHS)
def test_a_prompt_asks_permission_in_a_dialog_and_the_write_shows_under_its_acp_title(
    pages: Pages, writer: Listening, tmp_path: Path, screenshot: Screenshot, width: int
) -> None:
    client, session_id = closed_session(writer, tmp_path)
    page = open_session(pages, writer, session_id, width)

    send(page, "write hello")
    dialog = page.locator("dialog.permission")
    dialog.wait_for(state="visible")
    screenshot(page)
    assert dialog.locator(".permission-title").text_content() == "Write hello.txt"
    assert dialog.locator("button").all_text_contents() == ["Allow once", "Always allow", "Reject"]
    dialog.locator('[data-option="allow_once"]').click()
    wait_for_stop(page, "end_turn")
    page.wait_for_function(
        f"() => window.acpViewer.lastSeq === {client.events(session_id)[-1]['seq']}"
    )

    assert (tmp_path / "hello.txt").read_text() == "Hello\n"
    assert status(page, "permissions") == 0
    tool = page.locator('.nodes > [data-kind="tool"]')
    assert tool.locator(".tool-title").text_content() == "Write hello.txt"
    assert tool.get_attribute("data-status") == "completed"
    assert tool.evaluate("e => e.open") is True  # a diff is open from the start
    assert tool.locator(".diff").get_attribute("data-path") == str(tmp_path / "hello.txt")
    # The diff is shown; the call's input, the same text as JSON, is folded away.
    assert tool.locator(".diff").is_visible()
    assert tool.locator(".input-folded").evaluate("e => e.open") is False
    assert not tool.locator("pre.input").is_visible()
    assert node_texts(page, "user") == ["write hello"]
    assert node_texts(page, "text") == [WROTE]
    assert status(page, "usage") == {
        "used": 1234,
        "size": 200_000,
        "cost": {"amount": 0.00411, "currency": "USD"},
    }
    assert page.locator('[data-figure="context"]').text_content() == "1,234 of 200,000 (1%)"
    assert page.locator('[data-figure="cost"]').text_content() == "$0.0041"
    decisions = [e["data"] for e in client.events(session_id) if e["type"] == "permission/decision"]
    assert decisions == [decision(WRITE.id, "allow_once")["data"]]


def test_the_permission_dialog_shows_an_edit_as_a_diff_and_a_rejection_fails_the_call(
    pages: Pages, editing: Listening, tmp_path: Path, screenshot: Screenshot
) -> None:
    (tmp_path / "a.txt").write_text("Hi\n")
    client, session_id = closed_session(editing, tmp_path)
    page = open_session(pages, editing, session_id, 390)

    send(page, "edit a")
    dialog = page.locator("dialog.permission")
    dialog.wait_for(state="visible")
    screenshot(page)
    assert dialog.locator(".permission-title").text_content() == "Edit a.txt"
    assert dialog.locator(".diff-lines span").all_text_contents() == ["- Hi", "+ Hello"]
    dialog.locator('[data-option="reject_once"]').click()
    wait_for_stop(page, "end_turn")
    page.wait_for_function(
        f"() => window.acpViewer.lastSeq === {client.events(session_id)[-1]['seq']}"
    )

    assert (tmp_path / "a.txt").read_text() == "Hi\n"
    tool = page.locator('.nodes > [data-kind="tool"]')
    assert tool.get_attribute("data-status") == "failed"
    assert tool.locator(".output").text_content() == "the user rejected this tool call"


@pytest.mark.parametrize("width", WIDTHS)
def test_stop_cancels_the_streaming_turn_and_the_conversation_says_it_was_cancelled(
    pages: Pages, hanging: Listening, tmp_path: Path, screenshot: Screenshot, width: int
) -> None:
    client, session_id = closed_session(hanging, tmp_path)
    page = open_session(pages, hanging, session_id, width)

    send(page, "wait")
    page.wait_for_function(
        "text => [...document.querySelectorAll('.nodes > [data-kind=text]')].some("
        "(e) => e.dataset.status === 'streaming' && e.querySelector('.body').textContent === text)",
        arg=WORKING,
    )
    stop = page.locator(".composer .cancel")
    assert stop.is_visible()
    stop.click()
    wait_for_stop(page, "cancelled")
    page.wait_for_selector('.nodes > [data-kind="ending"]')
    screenshot(page)

    assert page.locator('.nodes > [data-kind="ending"]').get_attribute("data-reason") == "cancelled"
    assert node_texts(page, "ending") == ["Cancelled"]
    text = page.locator('.nodes > [data-kind="text"]')
    assert (text.get_attribute("data-status"), text.locator(".body").text_content()) == (
        "interrupted",
        WORKING,
    )
    assert not stop.is_visible()
    ends = [e["data"]["reason"] for e in client.events(session_id) if e["type"] == "turn/end"]
    assert ends == [{"kind": "cancelled"}]


@pytest.mark.parametrize("width", WIDTHS)
def test_slash_completes_the_sessions_commands_and_the_reply_is_shown(
    pages: Pages, writer: Listening, tmp_path: Path, screenshot: Screenshot, width: int
) -> None:
    client, session_id = closed_session(writer, tmp_path)
    page = open_session(pages, writer, session_id, width)
    page.wait_for_function("() => window.acpViewer.commands.length > 0")

    page.locator("#prompt").fill("/st")
    options = page.locator("#completions [role=option]")
    options.first.wait_for(state="visible")
    screenshot(page)
    assert [options.nth(i).get_attribute("data-command") for i in range(options.count())] == [
        "stats"
    ]
    page.locator("#prompt").press("Tab")
    assert page.locator("#prompt").input_value() == "/stats "
    assert not page.locator("#completions").is_visible()
    page.locator("#prompt").press("Enter")
    wait_for_stop(page, "end_turn")
    page.wait_for_selector('.nodes > [data-kind="reply"]')

    results = [e["data"] for e in client.events(session_id) if e["type"] == "command/result"]
    reply = page.locator('.nodes > [data-kind="reply"]')
    assert reply.locator(".who").text_content() == "/stats"
    assert reply.locator(".body").text_content() == "\n".join(
        b["text"] for b in results[0]["content"] if b["type"] == "text"
    )
    assert node_texts(page, "user") == ["/stats "]


PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
"""A 1x1 PNG, base64."""


def test_an_image_in_a_prompt_is_shown_inline(
    pages: Pages, writer: Listening, tmp_path: Path, screenshot: Screenshot
) -> None:
    client, session_id = closed_session(writer, tmp_path)
    resume = {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []}
    client.request("session/resume", resume)
    prompt = [
        {"type": "text", "text": "/stats"},
        {"type": "image", "mimeType": "image/png", "data": PIXEL},
    ]
    client.request("session/prompt", {"sessionId": session_id, "prompt": prompt})
    client.request("session/close", {"sessionId": session_id})

    page = open_session(pages, writer, session_id, 1280)
    image = page.locator('.nodes > [data-kind="user"] img.inline-image')
    image.wait_for()
    page.wait_for_function("() => document.querySelector('img.inline-image')?.complete")
    screenshot(page)

    assert image.get_attribute("src") == f"data:image/png;base64,{PIXEL}"
    assert image.evaluate("e => [e.naturalWidth, e.naturalHeight]") == [1, 1]


def test_the_mode_picker_changes_the_sessions_mode(
    pages: Pages, writer: Listening, tmp_path: Path, screenshot: Screenshot
) -> None:
    client, session_id = closed_session(writer, tmp_path)
    page = open_session(pages, writer, session_id, 1280)
    assert page.locator("#mode").input_value() == "default"
    assert page.locator("#model").input_value() == "llm-replay"

    page.locator("#mode").select_option("plan")
    page.wait_for_function("() => window.acpViewer.modeId === 'plan'")
    page.wait_for_selector('.nodes > [data-kind="mode"]')
    screenshot(page)

    modes = [e["data"]["modeId"] for e in client.events(session_id) if e["type"] == "session/mode"]
    assert modes == ["plan"]
    assert node_texts(page, "mode") == ["plan"]


@pytest.mark.parametrize("width", WIDTHS)
def test_the_new_session_button_starts_a_session_in_the_directory_given_and_opens_it(
    browser: Browser, writer: Listening, tmp_path: Path, screenshot: Screenshot, width: int
) -> None:
    with fresh_page(browser, width, HEIGHT[width]) as page:
        page.goto(writer.viewer_url("/"))
        wait_for_state(page, "listed")
        page.locator("#new-cwd").fill(str(tmp_path))
        screenshot(page)
        page.locator(".new-session .new").click()
        page.wait_for_url(f"{writer.base_url}/sessions/*")
        wait_for_state(page, "following")
        page.wait_for_function("() => window.acpViewer.attached")

        session_id = status(page, "sessionId")
        assert page.url == f"{writer.base_url}/sessions/{session_id}"
        listed = peer(writer).request("session/list", {"cwd": str(tmp_path)})["sessions"]
        assert [s["sessionId"] for s in listed] == [session_id]


@pytest.mark.parametrize("path", ["/", "session"])
def test_at_390_px_nothing_overflows_sideways_and_the_controls_are_in_view(
    browser: Browser, writer: Listening, tmp_path: Path, screenshot: Screenshot, path: str
) -> None:
    _client, session_id = closed_session(writer, tmp_path)
    with fresh_page(browser, 390, HEIGHT[390]) as page:
        if path == "/":
            page.goto(writer.viewer_url("/"))
            wait_for_state(page, "listed")
            controls = ["#new-cwd", ".new-session .new", ".session-item:first-child"]
        else:
            page.goto(writer.viewer_url(f"/sessions/{session_id}"))
            wait_for_state(page, "following")
            page.wait_for_function("() => window.acpViewer.attached")
            controls = ["#prompt", ".composer .send", ".search-toggle", ".session-title"]
        screenshot(page)

        assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")
        assert [c for c in controls if not in_view(page, c)] == []


def without_methods(page: Page, methods: set[str]) -> None:
    """Make the page's server answer `methods` -32601, as a server without them does: the
    page's WebSocket goes through a route that answers those requests itself."""

    def route(ws: WebSocketRoute) -> None:
        server = ws.connect_to_server()

        def from_page(message: str | bytes) -> None:
            frame = json.loads(message)
            if frame.get("method") in methods:
                error = {"code": -32601, "message": f"Method not found: {frame['method']}"}
                ws.send(json.dumps({"jsonrpc": "2.0", "id": frame["id"], "error": error}))
            else:
                server.send(message)

        ws.on_message(from_page)

    page.route_web_socket(re.compile(r"/acp"), route)


def test_without_the_live_list_the_sessions_are_listed_once(
    pages: Pages, writer: Listening, tmp_path: Path
) -> None:
    _client, session_id = closed_session(writer, tmp_path)
    page = pages(1280, HEIGHT[1280])
    without_methods(page, {"session.list.follow"})
    page.goto(writer.viewer_url("/"))
    wait_for_state(page, "listed")

    assert status(page, "listLive") is False
    listed = peer(writer).request("session/list", {})["sessions"]
    assert sorted(s["sessionId"] for s in status(page, "sessions")) == sorted(
        s["sessionId"] for s in listed
    )
    assert page.locator(f'.session-item[data-session-id="{session_id}"]').count() == 1


def test_without_session_search_the_page_says_it_cannot_search(
    pages: Pages, writer: Listening, tmp_path: Path, screenshot: Screenshot
) -> None:
    _client, session_id = closed_session(writer, tmp_path)
    page = pages(1280, HEIGHT[1280])
    without_methods(page, {"session.search"})
    page.goto(writer.viewer_url(f"/sessions/{session_id}"))
    wait_for_state(page, "following")

    page.locator(".search-toggle").click()
    page.locator("#search").fill("hello")
    page.locator("#search").press("Enter")
    page.wait_for_function("() => window.acpViewer.searchSupported === false")
    screenshot(page)

    assert page.locator(".search-unsupported").text_content() == (
        "This server cannot search sessions."
    )
    assert page.locator("#search").count() == 0


# These need the server's session.list.follow and session.search (SPEC 3.5), and the last one
# sessions shared by many connections (a permission request goes to every attached client).


def test_the_session_list_shows_a_session_created_elsewhere_without_a_reload(
    browser: Browser, writer: Listening, tmp_path: Path, screenshot: Screenshot
) -> None:
    with fresh_page(browser, 1280, HEIGHT[1280]) as page:
        page.goto(writer.viewer_url("/"))
        wait_for_state(page, "listed")
        assert status(page, "listLive") is True

        _client, session_id = closed_session(writer, tmp_path)
        page.locator(f'.session-item[data-session-id="{session_id}"]').wait_for()
        screenshot(page)

        assert status(page, "sessions")[0]["sessionId"] == session_id
        assert status(page, "sessions")[0]["cwd"] == str(tmp_path)


def test_search_jumps_to_a_hit_in_history_not_loaded_yet(
    pages: Pages, writer: Listening, tmp_path: Path, screenshot: Screenshot
) -> None:
    client, session_id = closed_session(writer, tmp_path)
    for word in ["alpha", "bravo", "charlie", "delta"]:
        resume = {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []}
        client.request("session/resume", resume)
        prompt = [{"type": "text", "text": f"/title {word}"}]
        client.request("session/prompt", {"sessionId": session_id, "prompt": prompt})
        client.request("session/close", {"sessionId": session_id})
    page = pages(1280, 500)
    page.goto(writer.viewer_url(f"/sessions/{session_id}", messages=1))
    wait_for_state(page, "following")
    assert status(page, "hasOlder") is True

    page.locator(".search-toggle").click()
    # Open, the panel's own button searches; the toggle only closes it.
    assert page.locator(".search-toggle").text_content() == "Close search"
    page.locator("#search").fill("alpha")
    page.locator("#search").press("Enter")
    page.wait_for_function("() => window.acpViewer.search?.hits.length > 0")
    hit_seq = status(page, "search")["hits"][-1]
    page.locator(f'.hit[data-seq="{hit_seq}"]').click()
    page.wait_for_function("() => window.acpViewer.jumpedTo !== null")
    screenshot(page)

    assert status(page, "firstSeq") <= hit_seq
    target = page.locator(".hit-target")
    assert int(target.get_attribute("data-seq") or -1) <= hit_seq
    assert "alpha" in (target.locator(".body").text_content() or "")
    assert in_view(page, ".hit-target")


def test_a_permission_asked_by_another_clients_prompt_is_answered_from_the_browser(
    pages: Pages, writer: Listening, tmp_path: Path, screenshot: Screenshot
) -> None:
    editor = peer(writer)
    editor.answer_server = False  # the editor leaves the question to the browser
    session_id: str = editor.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})[
        "sessionId"
    ]
    page = open_session(pages, writer, session_id, 1280)
    prompt = [{"type": "text", "text": "write hello"}]
    asked = editor.start("session/prompt", {"sessionId": session_id, "prompt": prompt})

    dialog = page.locator("dialog.permission")
    dialog.wait_for(state="visible")
    screenshot(page)
    assert dialog.locator(".permission-title").text_content() == "Write hello.txt"
    dialog.locator('[data-option="allow_once"]').click()

    assert editor.answer(asked) == {"stopReason": "end_turn"}
    assert (tmp_path / "hello.txt").read_text() == "Hello\n"
    decisions = [e["data"] for e in editor.events(session_id) if e["type"] == "permission/decision"]
    assert decisions == [decision(WRITE.id, "allow_once")["data"]]


def test_a_prompt_queued_behind_another_clients_turn_is_said_to_be_queued_until_it_ends(
    pages: Pages, hanging: Listening, tmp_path: Path, screenshot: Screenshot
) -> None:
    editor = peer(hanging)
    session_id: str = editor.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})[
        "sessionId"
    ]
    page = open_session(pages, hanging, session_id, 390)
    asked = editor.start(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "wait"}]}
    )
    page.wait_for_function("() => window.acpViewer.running")
    send(page, "me too")
    notice = page.locator(".composer-notice")
    notice.wait_for(state="visible")
    screenshot(page)

    assert notice.text_content() == (
        "Prompt queued. It runs when the running turn ends (1 prompt is waiting)."
    )
    # Stop cancels the editor's running turn and withdraws the page's own queued prompt.
    page.locator(".composer .cancel").click()
    assert editor.answer(asked) == {"stopReason": "cancelled"}
    wait_for_stop(page, "cancelled")
    notice.wait_for(state="hidden")
    users = [e for e in editor.events(session_id) if e["type"] == "user/message"]
    assert [u["data"]["message"]["content"][0]["text"] for u in users] == ["wait"]


def test_a_command_typed_whole_is_sent_by_enter(
    pages: Pages, writer: Listening, tmp_path: Path
) -> None:
    client, session_id = closed_session(writer, tmp_path)
    page = open_session(pages, writer, session_id, 1280)
    page.wait_for_function("() => window.acpViewer.commands.length > 0")

    page.locator("#prompt").fill("/stats")
    page.locator("#completions [role=option]").first.wait_for(state="visible")
    page.locator("#prompt").press("Enter")
    wait_for_stop(page, "end_turn")
    page.wait_for_selector('.nodes > [data-kind="reply"]')

    assert node_texts(page, "user") == ["/stats"]
    assert [
        e["data"]["command"] for e in client.events(session_id) if e["type"] == "command/result"
    ] == ["stats"]
