// The prompt box's `/` completion (acp_server/web/commands.js).
//
//   node --test tests/js/commands.test.mjs

import assert from "node:assert/strict";
import { test } from "node:test";

import { commandHint, completed, completions, typedCommand } from "../../acp_server/web/commands.js";

const COMMANDS = [
  { name: "mode", description: "Switch the session's mode", input: { hint: "mode id" } },
  { name: "model", description: "Switch the session's model", input: { hint: "model id" } },
  { name: "stats", description: "Show the session log's figures" },
  { name: "compact", description: "Summarise the conversation" },
];
const names = (commands) => commands.map((c) => c.name);

test("a lone slash offers every command, in the session's order", () => {
  assert.deepEqual(names(completions(COMMANDS, "/")), ["mode", "model", "stats", "compact"]);
});

test("the word typed keeps the commands it starts, then those it is inside of", () => {
  assert.deepEqual(names(completions(COMMANDS, "/mo")), ["mode", "model"]);
  assert.deepEqual(names(completions(COMMANDS, "/m")), ["mode", "model", "compact"]);
  assert.deepEqual(names(completions(COMMANDS, "/ST")), ["stats"]);
});

test("no completion once the arguments start, or for text that is not a command", () => {
  assert.deepEqual(completions(COMMANDS, "/mode plan"), []);
  assert.deepEqual(completions(COMMANDS, "mode"), []);
  assert.deepEqual(completions(COMMANDS, "/usr/bin"), []);
  assert.equal(typedCommand("/mode "), null);
});

test("a chosen command leaves its name and a space; its hint is its input's", () => {
  assert.equal(completed(COMMANDS[0]), "/mode ");
  assert.equal(commandHint(COMMANDS[0]), "mode id");
  assert.equal(commandHint(COMMANDS[2]), "");
});
