"""Rewind from the log alone (`core.rewind`): rewound turns, the messages `/rewind` lists, which
files a rewind restores to which content and which were changed outside the agent, and the
model's history without the rewound turns."""

from __future__ import annotations

import msgspec

from acp_server.core.content import TextContent
from acp_server.core.events import (
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
    CommandResult,
    CommandResultData,
    ContextCompaction,
    ContextCompactionData,
    FileCheckpoint,
    RestoredFile,
    SessionEvent,
    SessionRewind,
    SessionRewindData,
    StepData,
    StepEnd,
    StepStart,
    ToolCall,
    ToolCallData,
    ToolResult,
    ToolResultData,
    TurnEnd,
    TurnEndData,
    TurnEndReasonCompleted,
    TurnStart,
    TurnStartData,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from acp_server.core.messages import AssistantTurn, UserTurn, derive_messages
from acp_server.core.rewind import (
    FileRestore,
    RewindPlan,
    RewindPoint,
    live_events,
    plan_rewind,
    rewind_listing,
    rewind_points,
    rewind_summary,
    rewound_turns,
    split_changed,
)
from acp_server.core.stream import AssistantText


class Log:
    """Turns laid out on contiguous seqs, as the loop and the commands write them."""

    def __init__(self) -> None:
        self.events: list[SessionEvent] = []
        self.turn = 0

    def add(self, cls: type, data: object) -> None:
        seq = len(self.events)
        self.events.append(cls(seq, seq, data))

    def prompt(self, text: str, *calls: tuple[str, list[FileCheckpoint]]) -> None:
        """A model turn: the user's text, then one step per call (a tool name and what it
        changed), then the answer."""
        t = self.turn
        self.add(TurnStart, TurnStartData(t))
        self.add(
            UserMessageEvent, UserMessageData(t, UserMessage(f"user-{t}", [TextContent(text)]))
        )
        for step, (name, checkpoints) in enumerate(calls):
            call_id = f"c{t}.{step}"
            self.add(StepStart, StepData(t, step))
            self.add(ToolCall, ToolCallData(t, step, call_id, name, "{}"))
            self.add(
                ToolResult,
                ToolResultData(t, step, call_id, [TextContent("ok")], checkpoints=checkpoints),
            )
            self.add(StepEnd, StepData(t, step))
        step = len(calls)
        self.add(StepStart, StepData(t, step))
        message = AssistantMessage(f"a{t}", [AssistantText(f"answer {t}")])
        self.add(AssistantMessageEvent, AssistantMessageData(t, step, message))
        self.add(StepEnd, StepData(t, step))
        self.add(TurnEnd, TurnEndData(t, TurnEndReasonCompleted()))
        self.turn += 1

    def command(
        self, text: str, rewind: SessionRewindData | None = None, name: str = "rewind"
    ) -> None:
        t = self.turn
        self.add(TurnStart, TurnStartData(t))
        self.add(
            UserMessageEvent, UserMessageData(t, UserMessage(f"user-{t}", [TextContent(text)]))
        )
        if rewind is not None:
            self.add(SessionRewind, rewind)
        self.add(CommandResult, CommandResultData(t, name, [TextContent("done")]))
        self.add(TurnEnd, TurnEndData(t, TurnEndReasonCompleted()))
        self.turn += 1


def write(path: str, before: str | None, after: str) -> tuple[str, list[FileCheckpoint]]:
    return ("write_file", [FileCheckpoint(path, before, after)])


def edit(path: str, before: str, after: str) -> tuple[str, list[FileCheckpoint]]:
    return ("edit_file", [FileCheckpoint(path, before, after)])


def three_turns() -> Log:
    """Turn 0 writes a.txt (new), turn 1 edits b.txt and runs a command, turn 2 edits a.txt and
    writes c.txt (new)."""
    log = Log()
    log.prompt("make a", write("/w/a.txt", None, "A1"))
    log.prompt("fix b\nplease", edit("/w/b.txt", "B0", "B1"), ("run_command", []))
    log.prompt("more", edit("/w/a.txt", "A1", "A2"), write("/w/c.txt", None, "C1"))
    return log


def test_without_a_rewind_no_turn_is_rewound() -> None:
    assert rewound_turns(three_turns().events) == set()


def test_the_user_messages_of_model_turns_are_numbered_from_1_with_their_first_line() -> None:
    log = three_turns()
    log.command("/title x", name="title")
    assert rewind_points(log.events) == [
        RewindPoint(1, 0, "user-0", "make a"),
        RewindPoint(2, 1, "user-1", "fix b"),
        RewindPoint(3, 2, "user-2", "more"),
    ]


def test_a_long_first_line_is_cut_and_an_empty_one_says_so() -> None:
    log = Log()
    log.prompt("x" * 100)
    log.prompt("  \n")
    assert [p.text for p in rewind_points(log.events)] == ["x" * 79 + "…", "(no text)"]


def test_the_listing_numbers_each_message() -> None:
    assert rewind_listing(rewind_points(three_turns().events)) == (
        "Messages to rewind to (`/rewind N` restores the files as they were before N):\n"
        "1. make a\n2. fix b\n3. more"
    )
    assert rewind_listing([]) == "There is no message to rewind to."


def test_rewinding_to_message_2_restores_each_file_to_its_content_before_it() -> None:
    log = three_turns()
    point = rewind_points(log.events)[1]
    assert plan_rewind(log.events, point) == RewindPlan(
        point,
        [
            FileRestore("/w/b.txt", "B0", "B1"),
            FileRestore("/w/a.txt", "A1", "A2"),
            FileRestore("/w/c.txt", None, "C1"),
        ],
        1,
    )


def test_a_file_created_after_the_message_is_restored_as_absent() -> None:
    log = three_turns()
    plan = plan_rewind(log.events, rewind_points(log.events)[0])
    assert [(f.path, f.sha256) for f in plan.files] == [
        ("/w/a.txt", None),
        ("/w/b.txt", "B0"),
        ("/w/c.txt", None),
    ]


def test_a_file_changed_outside_the_agent_is_set_apart() -> None:
    log = three_turns()
    plan = plan_rewind(log.events, rewind_points(log.events)[1])
    current = {"/w/a.txt": "A2", "/w/b.txt": "B0", "/w/c.txt": "someone else's"}
    assert split_changed(plan, current) == (
        [FileRestore("/w/b.txt", "B0", "B1"), FileRestore("/w/a.txt", "A1", "A2")],
        [FileRestore("/w/c.txt", None, "C1")],
    )


def test_a_file_removed_outside_the_agent_is_changed_and_one_the_agent_removed_is_not() -> None:
    log = three_turns()
    plan = plan_rewind(log.events, rewind_points(log.events)[1])
    ours, changed = split_changed(plan, {"/w/a.txt": None, "/w/b.txt": "B1", "/w/c.txt": "C1"})
    assert ([f.path for f in ours], [f.path for f in changed]) == (
        ["/w/b.txt", "/w/c.txt"],
        ["/w/a.txt"],
    )


def rewound_to(
    message_id: str, restored: list[RestoredFile], skipped: list[str]
) -> SessionRewindData:
    return SessionRewindData(message_id, restored, skipped)


def test_a_rewind_rewinds_its_message_s_turn_and_every_later_one_but_its_own() -> None:
    log = three_turns()
    log.command("/rewind 2", rewound_to("user-1", [], []))
    assert rewound_turns(log.events) == {1, 2}


def test_turns_after_a_rewind_are_live_and_listed_again() -> None:
    log = three_turns()
    log.command("/rewind 2", rewound_to("user-1", [], []))
    log.prompt("again")
    assert rewind_points(log.events) == [
        RewindPoint(1, 0, "user-0", "make a"),
        RewindPoint(2, 4, "user-4", "again"),
    ]


def test_a_later_rewind_to_an_earlier_message_rewinds_the_live_turns_since() -> None:
    log = three_turns()
    log.command("/rewind 3", rewound_to("user-2", [], []))
    log.prompt("again")
    log.command("/rewind 1", rewound_to("user-0", [], []))
    assert rewound_turns(log.events) == {0, 1, 2, 3, 4}  # 3: the first /rewind's
    assert rewind_points(log.events) == []


def test_what_a_rewind_restored_is_what_the_agent_last_left_in_the_file() -> None:
    log = three_turns()
    restored = [RestoredFile("/w/a.txt", "A1"), RestoredFile("/w/c.txt", None)]
    log.command("/rewind 3", rewound_to("user-2", restored, []))
    log.prompt("edit a again", edit("/w/a.txt", "A1", "A3"))
    plan = plan_rewind(log.events, rewind_points(log.events)[1])
    assert plan.files == [FileRestore("/w/b.txt", "B0", "B1"), FileRestore("/w/a.txt", "A1", "A3")]


def test_a_file_a_rewind_left_alone_is_still_changed_outside_the_agent() -> None:
    log = three_turns()
    log.command("/rewind 3", rewound_to("user-2", [RestoredFile("/w/a.txt", "A1")], ["/w/c.txt"]))
    plan = plan_rewind(log.events, rewind_points(log.events)[0])
    ours, changed = split_changed(
        plan, {"/w/a.txt": "A1", "/w/b.txt": "B1", "/w/c.txt": "someone else's"}
    )
    # c.txt was created in a turn rewound since: only the live turns' files are restored.
    assert ([f.path for f in ours], changed) == (["/w/a.txt", "/w/b.txt"], [])


def test_the_model_s_history_leaves_the_rewound_turns_out() -> None:
    log = Log()
    log.prompt("one")
    log.prompt("two")
    log.command("/rewind 2", rewound_to("user-1", [], []))
    log.prompt("three")
    assert derive_messages(log.events) == [
        UserTurn([TextContent("one")]),
        AssistantTurn([AssistantText("answer 0")]),
        UserTurn([TextContent("three")]),
        AssistantTurn([AssistantText("answer 3")]),
    ]


def test_live_events_keep_what_lies_between_turns() -> None:
    log = Log()
    log.prompt("one")
    log.command("/rewind 1", rewound_to("user-0", [], []))
    assert [type(e).__name__ for e in live_events(log.events)] == [
        "TurnStart",
        "UserMessageEvent",
        "SessionRewind",
        "CommandResult",
        "TurnEnd",
    ]


def test_the_summary_names_what_was_restored_removed_and_left_alone() -> None:
    point = RewindPoint(2, 1, "user-1", "fix b")
    restored = [FileRestore("/w/b.txt", "B0", "B1"), FileRestore("/w/c.txt", None, "C1")]
    assert rewind_summary(point, restored, ["/w/a.txt"], 1) == (
        "Rewound to message 2: fix b\n"
        "Restored: /w/b.txt\n"
        "Removed (created after that message): /w/c.txt\n"
        "Left alone (changed outside the agent): /w/a.txt\n"
        "Not undone: what the 1 command run since changed."
    )
    assert rewind_summary(point, [], [], 0) == "Rewound to message 2: fix b\nNo file to restore."


def test_a_session_rewind_round_trips_in_the_log_format() -> None:
    event = SessionRewind(
        7, 70, SessionRewindData("user-1", [RestoredFile("/w/a.txt", "A1")], ["/w/c.txt"])
    )
    encoded = msgspec.json.encode(event)
    assert encoded == (
        b'{"type":"session/rewind","seq":7,"time":70,"data":{"toMessageId":"user-1",'
        b'"restored":[{"path":"/w/a.txt","sha256":"A1"}],"skipped":["/w/c.txt"]}}'
    )


def test_a_turn_still_running_is_not_listed() -> None:
    log = three_turns()
    log.add(TurnStart, TurnStartData(3))
    log.add(UserMessageEvent, UserMessageData(3, UserMessage("user-3", [TextContent("/rewind")])))
    assert [p.number for p in rewind_points(log.events)] == [1, 2, 3]


def test_a_compaction_in_a_rewound_turn_no_longer_shapes_the_history() -> None:
    log = Log()
    log.prompt("one")
    log.prompt("two")
    t = log.turn
    log.add(TurnStart, TurnStartData(t))
    compact = UserMessage(f"user-{t}", [TextContent("/compact")])
    log.add(UserMessageEvent, UserMessageData(t, compact))
    log.add(StepStart, StepData(t, 0))
    summary = AssistantMessage(f"a{t}", [AssistantText("summary")])
    log.add(AssistantMessageEvent, AssistantMessageData(t, 0, summary))
    log.add(StepEnd, StepData(t, 0))
    log.add(ContextCompaction, ContextCompactionData(t, 0, len(log.events) - 1))
    log.add(CommandResult, CommandResultData(t, "compact", [TextContent("Compacted.")]))
    log.add(TurnEnd, TurnEndData(t, TurnEndReasonCompleted()))
    log.turn += 1
    log.prompt("three")
    assert derive_messages(log.events)[0] != UserTurn([TextContent("one")])  # compacted
    log.command("/rewind 2", rewound_to("user-1", [], []))
    assert derive_messages(log.events) == [
        UserTurn([TextContent("one")]),
        AssistantTurn([AssistantText("answer 0")]),
    ]
