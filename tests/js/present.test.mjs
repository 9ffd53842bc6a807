// The viewer's presentation of the fold (acp_server/web/present.js): tool calls under their
// ACP titles, command replies, and turns that did not complete.
//
//   node --test tests/js/present.test.mjs

import assert from "node:assert/strict";
import { test } from "node:test";

import { ConversationFold } from "../../acp_server/web/fold.js";
import { clipTitle, presentTool, turnEnding, viewerDefinitions } from "../../acp_server/web/present.js";

const turn = (seq, type, data) => ({ type, seq, time: 1000 + seq, data });

test("a built-in tool is titled from its arguments, with its ACP kind", () => {
  assert.deepEqual(presentTool("write_file", { path: "a.txt", content: "A" }), {
    title: "Write a.txt",
    kind: "edit",
    locations: [],
  });
  assert.equal(presentTool("run_command", { command: "ls", args: ["-l", "src"] }).title, "Run ls -l src");
  assert.equal(presentTool("grep", { pattern: "TODO", path: "src" }).title, "Search TODO in src");
});

test("a built-in tool without the arguments its title needs is titled by its name", () => {
  assert.equal(presentTool("read_file", "not an object").title, "read_file");
});

test("an MCP tool is titled by its server and tool", () => {
  assert.equal(presentTool("mcp__github__create_issue", {}).title, "github: create_issue");
});

test("a title is one line of at most 80 characters", () => {
  assert.equal(clipTitle("a\n  b"), "a b");
  assert.equal(clipTitle("x".repeat(100)), `${"x".repeat(79)}…`);
});

test("a completed turn says nothing; others say how they ended", () => {
  assert.equal(turnEnding({ kind: "completed" }), null);
  assert.equal(turnEnding({ kind: "cancelled" }), "Cancelled");
  assert.equal(turnEnding({ kind: "error", error: { message: "rate limited" } }), "Failed: rate limited");
});

test("the viewer's fold shows a command's reply and a cancelled turn's end", () => {
  const fold = new ConversationFold(viewerDefinitions());
  fold.feedAll([
    turn(0, "turn/start", { turn: 0 }),
    turn(1, "user/message", { turn: 0, message: { id: "u0", content: [{ type: "text", text: "/stats" }] } }),
    turn(2, "command/result", { turn: 0, command: "stats", content: [{ type: "text", text: "3 events" }] }),
    turn(3, "turn/end", { turn: 0, reason: { kind: "completed" } }),
    turn(4, "turn/start", { turn: 1 }),
    turn(5, "turn/end", { turn: 1, reason: { kind: "cancelled" } }),
  ]);
  const shown = fold.nodes().filter((n) => n.kind !== "user");
  assert.deepEqual(shown, [
    { id: "reply/2", kind: "reply", seq: 2, lastSeq: 2, turn: 0, command: "stats", content: [{ type: "text", text: "3 events" }], isError: false },
    { id: "ending/5", kind: "ending", seq: 5, lastSeq: 5, turn: 1, reason: "cancelled", text: "Cancelled" },
  ]);
});

test("the viewer's fold titles a tool call as ACP does", () => {
  const fold = new ConversationFold(viewerDefinitions());
  fold.feedAll([
    turn(0, "turn/start", { turn: 0 }),
    turn(1, "step/start", { turn: 0, step: 0 }),
    turn(2, "tool/call", { turn: 0, step: 0, callId: "c1", name: "edit_file", arguments: '{"path":"b.py","oldText":"a","newText":"b"}' }),
  ]);
  const node = fold.node("tool/c1");
  assert.deepEqual([node.name, node.title, node.toolKind], ["edit_file", "Edit b.py", "edit"]);
});

test("the viewer's fold shows a notice where it happened", () => {
  const fold = new ConversationFold(viewerDefinitions());
  fold.feed(turn(0, "session/notice", { severity: "warning", title: "MCP server failed", description: "github: exited" }));
  assert.deepEqual(fold.nodes(), [
    { id: "notice/0", kind: "notice", seq: 0, lastSeq: 0, severity: "warning", title: "MCP server failed", description: "github: exited" },
  ]);
});
