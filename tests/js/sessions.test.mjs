// The live session list's pure parts (acp_server/web/sessions.js): `session.listChanged`
// changes applied, the order shown, the directories offered for a new session.
//
//   node --test tests/js/sessions.test.mjs

import assert from "node:assert/strict";
import { test } from "node:test";

import { applyListChange, knownDirectories, newestFirst } from "../../acp_server/web/sessions.js";

const A = { sessionId: "a", cwd: "/p", updatedAt: "2026-01-01T00:00:00Z", running: false };
const B = { sessionId: "b", cwd: "/q", updatedAt: "2026-01-02T00:00:00Z", running: false };

test("a created session is added, an updated one replaced, a deleted one removed", () => {
  const created = applyListChange([A], "created", B);
  assert.deepEqual(created, [A, B]);
  const running = { ...A, running: true };
  assert.deepEqual(applyListChange(created, "updated", running), [B, running]);
  assert.deepEqual(applyListChange(created, "deleted", A), [B]);
});

test("the most recently active session comes first", () => {
  assert.deepEqual(newestFirst([A, B]), [B, A]);
});

test("the directories offered are the known ones, the most recently active first, once each", () => {
  assert.deepEqual(knownDirectories([A, B, { ...A, sessionId: "c" }]), ["/q", "/p"]);
});
