"""Modes, config options, commands and usage through the real server (SPEC 4.4).

Each test drives `acp-server serve` over stdio with a fake client and asserts the exact
answers, updates and log events; every frame is also checked against the official ACP models
when the server closes (`PromptServer`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp_process import AcpProcess
from fixtures_builder import Scenario, Step, ToolUse, args
from openai_server import FakeOpenAI, Sse, chunk, text, usage
from prompt_harness import FakeClient, PromptServer, message_chunks, turn_opening
from surface_values import COMMANDS, config_options, modes, session_setup

pytestmark = pytest.mark.process

HELLO = Scenario([("hi", [Step(text="Hello.")])])
WRITE = ToolUse("call_write", "write_file", args(path="notes.txt", content="new\n"))
WRITES = Scenario([("go", [Step(calls=[WRITE]), Step(text="Done.")])])


def updates_of(server: PromptServer) -> list[dict[str, Any]]:
    """The setup updates the server sent so far, normalized, and forgets them."""
    seen = [server.normalize(p["update"]) for p in server.process.setup_updates]
    server.process.setup_updates.clear()
    return seen


def new_session(server: PromptServer) -> tuple[str, dict[str, Any]]:
    request_id = server.send_request(
        "session/new", {"cwd": str(server.workspace), "mcpServers": []}
    )
    result = server.read_until_response(request_id).result
    session_id = result["sessionId"]
    server.session_ids[session_id] = "<session>"
    return session_id, result


def log_tail(server: PromptServer, session_id: str, after: int) -> list[dict[str, Any]]:
    return server.log(session_id)[after:]


# ---------------------------------------------------------------------------------------------
# session/new, set_mode, set_config_option.


def test_a_new_session_answers_its_modes_and_options_then_lists_the_commands(
    tmp_path: Path,
) -> None:
    with PromptServer(tmp_path, HELLO) as server:
        session_id, result = new_session(server)
        assert result == {"sessionId": session_id, **session_setup()}
        server.request("session/list", {})  # answered after the commands, which are set aside
        assert updates_of(server) == [
            {"sessionUpdate": "available_commands_update", "availableCommands": COMMANDS}
        ]


def test_the_mode_flag_sets_the_mode_of_new_sessions(tmp_path: Path) -> None:
    with PromptServer(tmp_path, HELLO, "--mode", "plan") as server:
        _, result = new_session(server)
        assert result["modes"] == modes("plan")
        assert result["configOptions"] == config_options("plan")


def test_set_mode_logs_the_change_and_keeps_the_mode_option_in_step(tmp_path: Path) -> None:
    with PromptServer(tmp_path, HELLO) as server:
        session_id, _ = new_session(server)
        answered = server.request("session/set_mode", {"sessionId": session_id, "modeId": "plan"})
        assert answered.result == {}
        assert updates_of(server)[1:] == [
            {"sessionUpdate": "config_option_update", "configOptions": config_options("plan")}
        ]
        assert server.log(session_id) == [{"type": "session/mode", "data": {"modeId": "plan"}}]


def test_set_mode_to_an_unknown_mode_is_invalid_params_naming_it(tmp_path: Path) -> None:
    with PromptServer(tmp_path, HELLO) as server:
        session_id, _ = new_session(server)
        error = server.request(
            "session/set_mode", {"sessionId": session_id, "modeId": "yolo"}
        ).error
        assert error == {
            "code": -32602,
            "message": "Invalid params: unknown mode 'yolo'; the modes are: default, "
            "accept-edits, plan, full-access - at `$.modeId`",
            "data": {"path": "$.modeId"},
        }
        assert server.log(session_id) == []


def test_set_config_option_answers_the_complete_list_and_shows_the_new_mode(
    tmp_path: Path,
) -> None:
    with PromptServer(tmp_path, HELLO) as server:
        session_id, _ = new_session(server)
        answered = server.request(
            "session/set_config_option",
            {"sessionId": session_id, "configId": "mode", "value": "accept-edits"},
        )
        assert answered.result == {"configOptions": config_options("accept-edits")}
        assert updates_of(server)[1:] == [
            {"sessionUpdate": "current_mode_update", "currentModeId": "accept-edits"}
        ]
        assert server.log(session_id) == [
            {"type": "session/mode", "data": {"modeId": "accept-edits"}}
        ]


def test_set_config_option_names_a_bad_id_or_value(tmp_path: Path) -> None:
    with PromptServer(tmp_path, HELLO) as server:
        session_id, _ = new_session(server)
        bad_id = server.request(
            "session/set_config_option",
            {"sessionId": session_id, "configId": "reasoning", "value": "high"},
        ).error
        bad_value = server.request(
            "session/set_config_option",
            {"sessionId": session_id, "configId": "model", "value": "gpt-9"},
        ).error
        assert (bad_id["code"], bad_id["data"]) == (-32602, {"path": "$.configId"})
        assert bad_id["message"] == (
            "Invalid params: unknown config option 'reasoning'; offered: mode, model "
            "- at `$.configId`"
        )
        assert (bad_value["code"], bad_value["data"]) == (-32602, {"path": "$.value"})
        assert bad_value["message"] == (
            "Invalid params: 'gpt-9' is not a value of 'model'; one of: llm-replay - at `$.value`"
        )


# ---------------------------------------------------------------------------------------------
# Tools under a mode.


def test_in_plan_mode_a_write_is_refused_without_asking(tmp_path: Path) -> None:
    client = FakeClient()  # no permission answers: a request would fail the test
    with PromptServer(tmp_path, WRITES, client=client) as server:
        session_id, _ = new_session(server)
        server.request("session/set_mode", {"sessionId": session_id, "modeId": "plan"})
        answered = server.prompt(session_id, "go")
        assert answered.stop_reason == "end_turn"
        assert answered.requests == []
        result = [e for e in server.log(session_id) if e["type"] == "tool/result"]
        assert result[0]["data"]["isError"] is True
        assert result[0]["data"]["content"][0]["text"].startswith(
            "write_file was not run: the session is in plan mode"
        )
        assert not (server.workspace / "notes.txt").exists()


def test_in_accept_edits_mode_a_write_goes_ahead_without_asking(tmp_path: Path) -> None:
    with PromptServer(tmp_path, WRITES, "--mode", "accept-edits") as server:
        session_id, _ = new_session(server)
        answered = server.prompt(session_id, "go")
        assert answered.stop_reason == "end_turn"
        assert answered.requests == []
        assert (server.workspace / "notes.txt").read_text() == "new\n"


# ---------------------------------------------------------------------------------------------
# Load and resume restore the settings.


def test_a_mode_survives_a_load_in_a_fresh_process(tmp_path: Path) -> None:
    with PromptServer(tmp_path / "one", HELLO) as first:
        session_id, _ = new_session(first)
        first.request("session/set_mode", {"sessionId": session_id, "modeId": "full-access"})
    fixture = tmp_path / "one" / "fixture"
    with PromptServer(tmp_path / "one", fixture) as second:
        second.session_ids[session_id] = "<session>"
        loaded = second.request(
            "session/load",
            {"sessionId": session_id, "cwd": str(second.workspace), "mcpServers": []},
        )
        assert loaded.result == session_setup("full-access")
        assert updates_of(second) == [
            {"sessionUpdate": "current_mode_update", "currentModeId": "full-access"},
            {
                "sessionUpdate": "config_option_update",
                "configOptions": config_options("full-access"),
            },
            {"sessionUpdate": "available_commands_update", "availableCommands": COMMANDS},
        ]


def test_resume_answers_and_shows_the_restored_mode(tmp_path: Path) -> None:
    with PromptServer(tmp_path / "one", HELLO) as first:
        session_id, _ = new_session(first)
        first.request("session/set_mode", {"sessionId": session_id, "modeId": "plan"})
    with PromptServer(tmp_path / "one", tmp_path / "one" / "fixture") as second:
        second.session_ids[session_id] = "<session>"
        resumed = second.request(
            "session/resume", {"sessionId": session_id, "cwd": str(second.workspace)}
        )
        assert resumed.result == session_setup("plan")
        assert [u["sessionUpdate"] for u in updates_of(second)] == [
            "current_mode_update",
            "config_option_update",
            "available_commands_update",
        ]


# ---------------------------------------------------------------------------------------------
# Commands.


def test_title_runs_as_a_turn_of_its_own_without_the_model(tmp_path: Path) -> None:
    with PromptServer(tmp_path, HELLO) as server:
        session_id, _ = new_session(server)
        answered = server.prompt(session_id, "/title Fix the greeting")
        assert answered.stop_reason == "end_turn"
        assert answered.updates == [
            {"sessionUpdate": "session_info_update", "title": "Fix the greeting"},
            {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "Title set to: Fix the greeting"},
                "messageId": "command-0",
            },
        ]
        assert server.log(session_id) == [
            *turn_opening(0, "/title Fix the greeting"),
            {"type": "session/title", "data": {"title": "Fix the greeting"}},
            {
                "type": "command/result",
                "data": {
                    "turn": 0,
                    "command": "title",
                    "content": [{"type": "text", "text": "Title set to: Fix the greeting"}],
                },
            },
            {"type": "turn/end", "data": {"turn": 0, "reason": {"kind": "completed"}}},
        ]
        # The recording's only model call is still there for the next prompt.
        answered = server.prompt(session_id, "hi")
        assert answered.updates[:2] == message_chunks(["Hel", "l"], "assistant-1-0")


def test_stats_answers_the_logs_figures(tmp_path: Path) -> None:
    with PromptServer(tmp_path, HELLO) as server:
        session_id, _ = new_session(server)
        server.prompt(session_id, "hi")
        answered = server.prompt(session_id, "/stats")
        assert answered.text() == "\n".join(
            [
                "Events: 14",
                "Turns: 2",
                "Messages: 3",
                "Model calls: 1",
                "Tool calls: 0",
                "Tokens: 0 in, 0 out",
                "By type: assistant/chunk 6, assistant/message 1, step/end 1, step/start 1, "
                "turn/end 1, turn/start 2, user/message 2",
            ]
        )


def test_mode_command_changes_the_mode_and_shows_it(tmp_path: Path) -> None:
    with PromptServer(tmp_path, HELLO) as server:
        session_id, _ = new_session(server)
        answered = server.prompt(session_id, "/mode plan")
        assert updates_of(server)[1:] == [
            {"sessionUpdate": "current_mode_update", "currentModeId": "plan"},
            {"sessionUpdate": "config_option_update", "configOptions": config_options("plan")},
        ]
        assert answered.updates == [
            {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "Mode set to plan"},
                "messageId": "command-0",
            },
        ]
        assert server.log(session_id)[2] == {"type": "session/mode", "data": {"modeId": "plan"}}


def test_a_bad_mode_command_is_an_error_result_that_changes_nothing(tmp_path: Path) -> None:
    with PromptServer(tmp_path, HELLO) as server:
        session_id, _ = new_session(server)
        server.prompt(session_id, "/mode yolo")
        assert server.log(session_id)[2] == {
            "type": "command/result",
            "data": {
                "turn": 0,
                "command": "mode",
                "content": [
                    {
                        "type": "text",
                        "text": "'yolo' is not a value of 'mode'; one of: default, "
                        "accept-edits, plan, full-access",
                    }
                ],
                "isError": True,
            },
        }


def test_a_load_shows_a_command_turn_as_the_user_message_and_an_agent_message(
    tmp_path: Path,
) -> None:
    with PromptServer(tmp_path / "one", HELLO) as first:
        session_id, _ = new_session(first)
        first.prompt(session_id, "/title Named")
    with PromptServer(tmp_path / "one", tmp_path / "one" / "fixture") as second:
        second.session_ids[session_id] = "<session>"
        loaded = second.request(
            "session/load",
            {"sessionId": session_id, "cwd": str(second.workspace), "mcpServers": []},
        )
        assert loaded.updates == [
            {
                "sessionUpdate": "user_message_chunk",
                "content": {"type": "text", "text": "/title Named"},
                "messageId": "user-0",
            },
            {"sessionUpdate": "session_info_update", "title": "Named"},
            {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "Title set to: Named"},
                "messageId": "command-0",
            },
        ]


# ---------------------------------------------------------------------------------------------
# Usage.


def test_usage_update_carries_the_window_and_cost_given_on_the_command_line(
    tmp_path: Path,
) -> None:
    scenario = Scenario([("hi", [Step(text="Hello.", usage=(600_000, 200_000))])])
    flags = ("--context-window", "1000000", "--price-input", "2", "--price-output", "10")
    with PromptServer(tmp_path, scenario, *flags) as server:
        session_id, _ = new_session(server)
        answered = server.prompt(session_id, "hi")
        assert answered.updates[-1] == {
            "sessionUpdate": "usage_update",
            "used": 800_000,
            "size": 1_000_000,
            "cost": {"amount": 3.2, "currency": "USD"},
        }


# ---------------------------------------------------------------------------------------------
# Rich prompts.

IMAGE = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
AUDIO = {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"}
RESOURCE = {
    "type": "resource",
    "resource": {"uri": "file:///notes/todo.md", "text": "- milk\n", "mimeType": "text/markdown"},
}


def test_initialize_advertises_images_audio_and_embedded_context(tmp_path: Path) -> None:
    with PromptServer(tmp_path, HELLO) as server:
        answered = server.request("initialize", {"protocolVersion": 1})
        assert answered.result["agentCapabilities"]["promptCapabilities"] == {
            "image": True,
            "audio": True,
            "embeddedContext": True,
        }


def test_image_audio_and_resource_blocks_are_kept_exactly_in_the_log(tmp_path: Path) -> None:
    prompt = [{"type": "text", "text": "hi"}, IMAGE, AUDIO, RESOURCE]
    with PromptServer(tmp_path, HELLO) as server:
        session_id, _ = new_session(server)
        answered = server.request("session/prompt", {"sessionId": session_id, "prompt": prompt})
        assert answered.stop_reason == "end_turn"
        assert server.log(session_id)[1] == {
            "type": "user/message",
            "data": {"turn": 0, "message": {"id": "user-0", "content": prompt}},
        }


def test_a_block_over_20_mib_is_refused_naming_it(tmp_path: Path) -> None:
    big = {"type": "image", "data": "A" * (20 * 1024 * 1024 + 4), "mimeType": "image/png"}
    with PromptServer(tmp_path, HELLO) as server:
        session_id, _ = new_session(server)
        error = server.request(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": "look"}, big]},
        ).error
        assert error == {
            "code": -32602,
            "message": "Invalid params: the image block is 20971524 bytes; a prompt block may "
            "hold at most 20971520 bytes (20 MiB) - at `$.prompt[1]`",
            "data": {"path": "$.prompt[1]"},
        }
        assert server.log(session_id) == []


# ---------------------------------------------------------------------------------------------
# The model and reasoning options of the OpenAI-compatible provider.


def test_the_chosen_model_and_reasoning_effort_go_with_the_next_request(tmp_path: Path) -> None:
    answer = Sse([chunk(text("Hi.")), chunk(finish="stop"), chunk(usage=usage(30, 3))])
    with FakeOpenAI([answer]) as model:
        flags = ("--provider", "openai", "--model", "gpt-4o", "--models", "gpt-4o-mini,o3")
        flags += ("--reasoning", "low", "--base-url", model.base_url)
        with AcpProcess(tmp_path / "sessions", *flags) as server:
            server.initialize()
            created = server.result("session/new", {"cwd": str(tmp_path), "mcpServers": []})
            options = {o["id"]: o for o in created["configOptions"]}
            assert [o["value"] for o in options["model"]["options"]] == [
                "gpt-4o",
                "gpt-4o-mini",
                "o3",
            ]
            assert options["reasoning"]["currentValue"] == "low"
            assert [o["value"] for o in options["reasoning"]["options"]] == [
                "low",
                "medium",
                "high",
            ]
            session_id = created["sessionId"]
            for config_id, value in (("model", "o3"), ("reasoning", "high")):
                server.result(
                    "session/set_config_option",
                    {"sessionId": session_id, "configId": config_id, "value": value},
                )
            response, _ = server.exchange(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]},
            )
            assert response["result"] == {"stopReason": "end_turn"}
    body = model.requests[0].body
    assert (body["model"], body["reasoning_effort"]) == ("o3", "high")


def test_without_the_reasoning_flag_no_effort_is_sent(tmp_path: Path) -> None:
    answer = Sse([chunk(text("Hi.")), chunk(finish="stop")])
    with FakeOpenAI([answer]) as model:
        flags = ("--provider", "openai", "--model", "gpt-4o", "--base-url", model.base_url)
        with AcpProcess(tmp_path / "sessions", *flags) as server:
            server.initialize()
            created = server.result("session/new", {"cwd": str(tmp_path), "mcpServers": []})
            assert [o["id"] for o in created["configOptions"]] == ["mode", "model"]
            server.exchange(
                "session/prompt",
                {"sessionId": created["sessionId"], "prompt": [{"type": "text", "text": "hi"}]},
            )
    assert "reasoning_effort" not in model.requests[0].body
    assert model.requests[0].body["model"] == "gpt-4o"
