"""The server's own system prompt rendered from its inputs (`core.prompt_render`), the order and
cap of the project instruction files, and the `session/context` data that keeps the inputs
(`core.system_prompt.inputs_change`)."""

from __future__ import annotations

from msgspec import UNSET

from acp_server.core.content import TextContent
from acp_server.core.events import InstructionFile, PromptSettings, SessionContextData
from acp_server.core.messages import ToolDefinition
from acp_server.core.prompt_render import (
    CappedInstructions,
    InstructionSource,
    InstructionText,
    PromptBase,
    PromptContext,
    cap_instructions,
    cut_description,
    mode_rule,
    render_system_prompt,
    tool_purpose,
)
from acp_server.core.system_prompt import context_change, inputs_change

READ = ToolDefinition("read_file", "Read a text file. Long ones are cut.", {})
GREP = ToolDefinition("grep", "Search files\nwith a regular expression", {})


def context(**changes: object) -> PromptContext:
    values: dict[str, object] = {
        "cwd": "/work/app",
        "platform": "Linux",
        "date": "2026-12-03",
        "mode": "accept-edits",
    }
    values.update(changes)
    return PromptContext(**values)  # type: ignore[arg-type]


def test_the_prompt_is_the_fixed_text_then_environment_mode_tools_and_instructions() -> None:
    rendered = render_system_prompt(
        "You are an agent.\n",
        context(
            additional_directories=["/work/lib", "/work/docs"],
            shell="zsh",
            tools=[READ, GREP],
            instructions=[
                InstructionText("/work/AGENTS.md", "Use tabs.\n"),
                InstructionText("/work/app/AGENTS.md", "Use spaces.", cut=True),
            ],
        ),
    )
    assert rendered == (
        "You are an agent.\n\n"
        "# Environment\n\n"
        "- Working directory: /work/app\n"
        "- Additional directories: /work/lib, /work/docs\n"
        "- Platform: Linux\n"
        "- Shell: zsh\n"
        "- Date: 2026-12-03\n\n"
        "# Mode\n\n"
        "The session is in accept-edits mode: writes and edits inside the session's "
        "directories go ahead without asking; commands ask the user for permission first.\n\n"
        "# Tools\n\n"
        "- read_file: Read a text file.\n"
        "- grep: Search files\n\n"
        "# Project instructions\n\n"
        "The project's instruction files follow, the farthest from the working directory "
        "first. Follow them; where two disagree, the later one (nearer the working directory) "
        "takes precedence. The user's own requests take precedence over all of them.\n\n"
        "## /work/AGENTS.md\n\nUse tabs.\n\n"
        "## /work/app/AGENTS.md (cut: only its beginning fits)\n\nUse spaces.\n"
    )


def test_without_directories_shell_tools_or_instructions_their_lines_are_left_out() -> None:
    assert render_system_prompt("Base.", context(mode="full-access")) == (
        "Base.\n\n"
        "# Environment\n\n"
        "- Working directory: /work/app\n"
        "- Platform: Linux\n"
        "- Date: 2026-12-03\n\n"
        "# Mode\n\n"
        "The session is in full-access mode: every tool goes ahead without asking. Take "
        "particular care with commands that delete or overwrite.\n"
    )


def test_the_same_inputs_render_the_same_text() -> None:
    value = context(tools=[READ], instructions=[InstructionText("/a/AGENTS.md", "x")])
    assert render_system_prompt("B", value) == render_system_prompt("B", value)


def test_a_mode_without_its_own_rule_is_told_by_its_description() -> None:
    assert mode_rule("plan").startswith("writes, edits and commands are refused.")
    assert mode_rule("unheard-of") == "its tools ask the user for permission as the user set it."


def test_a_tools_purpose_is_its_first_sentence_cut_at_200_characters() -> None:
    assert tool_purpose("Read a file. Then more.") == "Read a file."
    assert tool_purpose("One line\nand another. Yes.") == "One line"
    assert tool_purpose("Find files, e.g. `*.py` or src. Then more.") == (
        "Find files, e.g. `*.py` or src."
    )
    long = "a" * 300
    assert tool_purpose(long) == "a" * 199 + "…"


def source(path: str, text: str) -> InstructionSource:
    data = text.encode()
    return InstructionSource(path, data, len(data))


def test_under_the_cap_every_file_is_kept_whole_in_order() -> None:
    capped = cap_instructions([source("/a", "far"), source("/a/b", "near")], cap=100)
    assert capped == CappedInstructions(
        [InstructionText("/a", "far"), InstructionText("/a/b", "near")], []
    )


def test_over_the_cap_the_nearest_is_kept_and_the_farthest_cut_then_left_out() -> None:
    files = [source("/u", "user"), source("/a", "0123456789"), source("/a/b", "nearest")]
    capped = cap_instructions(files, cap=11)
    assert capped == CappedInstructions(
        [InstructionText("/a", "0123", cut=True), InstructionText("/a/b", "nearest")],
        [("/u", 0, 4), ("/a", 4, 10)],
    )


def test_a_cut_never_splits_a_character() -> None:
    capped = cap_instructions([source("/a", "ééé")], cap=3)
    assert capped.texts == [InstructionText("/a", "é", cut=True)]
    assert capped.cut == [("/a", 2, 6)]


def test_an_empty_file_says_nothing_and_a_file_too_large_to_read_is_left_out() -> None:
    capped = cap_instructions(
        [source("/a", " \n"), InstructionSource("/big", None, 2_000_000)], cap=100
    )
    assert capped == CappedInstructions([], [("/big", 0, 2_000_000)])


def test_the_cut_notice_names_each_file_and_what_was_kept() -> None:
    assert cut_description([("/u", 0, 4), ("/a", 4, 10)], cap=32768) == (
        "The project instructions hold at most 32 KiB in all, the files nearest the working "
        "directory first: /u was left out (4 bytes); /a was cut to 4 of its 10 bytes."
    )


def test_a_prompt_base_is_identified_by_the_digest_of_its_text() -> None:
    assert PromptBase("abc", "x").sha256 == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )


SETTINGS = PromptSettings("acp-server:default", "d", "Linux", "2026-12-03", "zsh")
FILES = [InstructionFile("/a/AGENTS.md", "s", 3)]


def test_new_inputs_make_a_context_that_keeps_the_clients_prompt() -> None:
    current = SessionContextData([], "append", [TextContent("Be brief.")])
    assert inputs_change(current, FILES, SETTINGS) == SessionContextData(
        FILES, "append", [TextContent("Be brief.")], SETTINGS
    )
    assert inputs_change(None, FILES, SETTINGS) == SessionContextData(FILES, settings=SETTINGS)


def test_the_same_inputs_again_are_nothing_new() -> None:
    assert inputs_change(SessionContextData(FILES, settings=SETTINGS), FILES, SETTINGS) is None


def test_another_date_is_a_new_context() -> None:
    later = PromptSettings("acp-server:default", "d", "Linux", "2026-12-04", "zsh")
    changed = inputs_change(SessionContextData(FILES, settings=SETTINGS), FILES, later)
    assert changed == SessionContextData(FILES, settings=later)


def test_a_clients_new_prompt_keeps_the_inputs() -> None:
    current = SessionContextData(FILES, settings=SETTINGS)
    assert context_change(current, "override", [TextContent("Poet.")]) == SessionContextData(
        FILES, "override", [TextContent("Poet.")], SETTINGS
    )
    assert SessionContextData(FILES).settings is UNSET
