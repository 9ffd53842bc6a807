// The browser's conversation fold (acp_server/web/fold.js) on the shared vectors
// (tests/vectors/fold/*.json, made by tests/fold_vectors.py with the Python fold): the same
// changes and the same nodes, from the events one by one as live frames and from the packed
// history records expanded to events.
//
//   node --test tests/js/fold.test.mjs

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { test } from "node:test";

import {
  ConversationFold,
  FoldError,
  applyChange,
  defaultDefinitions,
  foldEvents,
} from "../../acp_server/web/fold.js";

const VECTORS = new URL("../vectors/fold/", import.meta.url);
const vectors = readdirSync(VECTORS)
  .filter((name) => name.endsWith(".json"))
  .sort()
  .map((name) => JSON.parse(readFileSync(new URL(name, VECTORS), "utf8")));

// The packed rows of SPEC 2.1, expanded here so that this test needs no other module.
function expand(record) {
  if (record.event !== undefined) return [record.event];
  const { type, seq0, time0, data } = record.chunks;
  const pieces = type === "tool-call-chunks" ? data.args : data.texts;
  let time = time0;
  return pieces.map((piece, k) => {
    if (k > 0) time += data.dt[k - 1];
    let chunk;
    if (type === "tool-call-chunks") {
      chunk = { type: "tool-call-delta", index: data.index, id: data.id, argumentsDelta: piece };
      if (data.name !== undefined) chunk.name = data.name;
    } else {
      const delta = type === "text-chunks" ? "text-delta" : "reasoning-delta";
      chunk = { type: delta, index: data.index, text: piece };
    }
    return {
      type: "assistant/chunk",
      seq: seq0 + k,
      time,
      data: { turn: data.turn, step: data.step, chunk },
    };
  });
}

test("the vectors are there", () => {
  assert.ok(vectors.length >= 2);
  assert.ok(vectors.some((v) => v.name === "every-node-kind"));
});

for (const vector of vectors) {
  test(`${vector.name}: live events fold to the vector's changes and nodes`, () => {
    const fold = new ConversationFold();
    const changes = [];
    for (const event of vector.events) changes.push(...fold.feed(event));
    assert.deepEqual(changes, vector.changes);
    assert.deepEqual(fold.nodes(), vector.nodes);
  });

  test(`${vector.name}: packed history records fold the same as live events`, () => {
    const events = vector.records.flatMap(expand);
    assert.deepEqual(events, vector.events);
    const { changes, nodes } = foldEvents(events);
    assert.deepEqual(changes, vector.changes);
    assert.deepEqual(nodes, vector.nodes);
  });

  test(`${vector.name}: applying the changes gives the nodes`, () => {
    const nodes = new Map();
    for (const change of vector.changes) applyChange(nodes, change);
    assert.deepEqual([...nodes.values()], vector.nodes);
  });
}

test("an event out of seq order is refused", () => {
  const fold = new ConversationFold();
  fold.feed({ type: "session/title", seq: 4, time: 0, data: { title: "a" } });
  assert.throws(
    () => fold.feed({ type: "session/title", seq: 4, time: 0, data: { title: "b" } }),
    (error) => error instanceof FoldError && error.message === "seq 4 after seq 4: events are folded in seq order, each once",
  );
});

test("a presenter gives a called tool its title, kind and locations", () => {
  const present = (name, input) => ({
    title: `Read ${input.path}`,
    kind: "read",
    locations: [{ path: `/w/${input.path}` }],
  });
  const fold = new ConversationFold(defaultDefinitions({ present }));
  const changes = fold.feed({
    type: "tool/call",
    seq: 0,
    time: 0,
    data: { turn: 0, step: 0, callId: "c", name: "read_file", arguments: '{"path": "a"}' },
  });
  assert.deepEqual(changes, [
    {
      op: "start",
      seq: 0,
      node: {
        id: "tool/c",
        kind: "tool",
        seq: 0,
        lastSeq: 0,
        turn: 0,
        step: 0,
        callId: "c",
        name: "read_file",
        title: "Read a",
        toolKind: "read",
        status: "in_progress",
        arguments: '{"path": "a"}',
        input: { path: "a" },
        output: null,
        rawOutput: null,
        locations: [{ path: "/w/a" }],
        childSessionId: null,
      },
    },
  ]);
});
