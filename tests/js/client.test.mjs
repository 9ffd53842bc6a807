// The browser client's entry point, /client.js: exactly the exports of the four modules it is
// made of, the same bindings, and those modules importing one another without a cycle
// (decode <- journal <- follow, connection <- follow).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import * as client from "../../acp_server/web/client.js";
import * as connection from "../../acp_server/web/connection.js";
import * as decode from "../../acp_server/web/decode.js";
import * as follow from "../../acp_server/web/follow.js";
import * as journal from "../../acp_server/web/journal.js";

const MODULES = { decode, journal, connection, follow };

/** What each module may import, of the client's modules. */
const IMPORTS = {
  "decode.js": [],
  "journal.js": ["./decode.js"],
  "connection.js": [],
  "follow.js": ["./connection.js", "./decode.js", "./journal.js"],
  "client.js": ["./connection.js", "./decode.js", "./follow.js", "./journal.js"],
};

test("client.js re-exports exactly the names of its four modules, each once", () => {
  const owners = new Map();
  for (const [name, module] of Object.entries(MODULES)) {
    for (const key of Object.keys(module)) {
      assert.ok(!owners.has(key), `${key} is exported by both ${owners.get(key)} and ${name}`);
      owners.set(key, name);
    }
  }
  assert.deepEqual(Object.keys(client).sort(), [...owners.keys()].sort());
  for (const [key, name] of owners) assert.equal(client[key], MODULES[name][key], key);
});

test("client.js keeps the names it had as one file", () => {
  assert.deepEqual(Object.keys(client).sort(), [
    "AcpConnection",
    "ConnectionClosed",
    "DEFAULT_MAX_MESSAGES",
    "Follow",
    "Gap",
    "HistoryProtocolError",
    "INVALID_PARAMS",
    "Journal",
    "KNOWN_EVENT_TYPES",
    "MAX_SAFE_INTEGER",
    "METHOD_NOT_FOUND",
    "RpcError",
    "decodeEvent",
    "decodeRecord",
    "decodeRecords",
  ]);
});

test("the modules import one another one way only", () => {
  for (const [file, allowed] of Object.entries(IMPORTS)) {
    const source = readFileSync(new URL(`../../acp_server/web/${file}`, import.meta.url), "utf-8");
    const imported = [...source.matchAll(/^(?:import|export)\b[^;]*?\bfrom\s+"([^"]+)"/gm)].map(
      (match) => match[1],
    );
    assert.deepEqual([...new Set(imported)].sort(), allowed, file);
  }
});
