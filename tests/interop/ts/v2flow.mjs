// Drives acp-server over ACP v2 with the TypeScript SDK's v2 client
// (`@agentclientprotocol/sdk/experimental/v2`: `client().onRequest(...).connect(stream)`, then
// `agent.request(method, params)`), and prints a JSON summary on stdout. Run by
// tests/test_interop_typescript_sdk_v2.py:
//
//   node v2flow.mjs '{"python": ..., "sessionsDir": ..., "fixture": ..., "workspace": ...,
//                     "out": ..., "prompt": ..., "hangPrompt": ..., "hangText": ...}'
//
// One server process: initialize (v2), session/new, a prompt (its receipt, then the turn until
// idle `end_turn`), a second prompt whose model call hangs until session/cancel (idle
// `cancelled`), session/close. A fresh process: session/resume from the start, from a message
// (`replayFrom: {type: "_after_message", messageId}`) and with no replayFrom, session/close.
//
// Both directions are teed byte for byte (server.mjs), and every frame the server wrote is
// validated here with the SDK's v2 zod models (the unstable ones, a superset of the stable):
// params by method, results by the method they answer. Failures are listed under `violations`.

import { readFileSync } from "node:fs";

import * as acp from "@agentclientprotocol/sdk/experimental/v2";
import * as models from "./node_modules/@agentclientprotocol/sdk/dist/v2/unstable/schema/zod.gen.js";

import { startServer } from "./server.mjs";

const config = JSON.parse(process.argv[2]);
const TIMEOUT_MS = 60_000;
const { methods } = acp;

const RESULT_MODELS = {
  initialize: models.zInitializeResponse,
  "session/new": models.zNewSessionResponse,
  "session/prompt": models.zPromptResponse,
  "session/resume": models.zResumeSessionResponse,
  "session/close": models.zCloseSessionResponse,
};
const PARAMS_MODELS = {
  "session/update": models.zUpdateSessionNotification,
  "session/request_permission": models.zRequestPermissionRequest,
};
const MESSAGE_KINDS = new Set(["user_message", "agent_message", "agent_thought"]);

const violations = [];

function lines(buffer) {
  const text = buffer.toString("utf8");
  if (text && !text.endsWith("\n")) violations.push("the last line is not newline-terminated");
  return text.split("\n").filter((line) => line.length > 0);
}

/** The server's run: its exit code, each line it wrote and each line it was sent, parsed. */
async function finish(server) {
  const { code, stdout, stdin } = await server.stop();
  return {
    code,
    frames: lines(stdout).map((l) => JSON.parse(l)),
    requests: lines(stdin).map((l) => JSON.parse(l)),
  };
}

/** Validate the server's frames with the SDK's v2 models; returns the method of each request id. */
function validate(name, { frames, requests }) {
  const sent = new Map(requests.filter((m) => "method" in m && "id" in m).map((m) => [m.id, m.method]));
  frames.forEach((frame, index) => {
    const where = `${name} frame ${index}`;
    if (Array.isArray(frame) || frame.jsonrpc !== "2.0") {
      violations.push(`${where}: not one JSON-RPC 2.0 message`);
      return;
    }
    let model;
    let value;
    if ("method" in frame) {
      [model, value] = [PARAMS_MODELS[frame.method], frame.params];
    } else if ("error" in frame) {
      [model, value] = [models.zError, frame.error];
    } else {
      [model, value] = [RESULT_MODELS[sent.get(frame.id)], frame.result];
    }
    if (!model) {
      violations.push(`${where}: nothing a v2 client expects: ${JSON.stringify(frame)}`);
      return;
    }
    const parsed = model.safeParse(value);
    if (!parsed.success) {
      violations.push(`${where}: violates ACP v2: ${JSON.stringify(value)}: ${parsed.error.message}`);
    }
  });
  return sent;
}

/** A message update as [kind, messageId, its text] (whole messages and chunks alike). */
function message(update) {
  const blocks = Array.isArray(update.content) ? update.content : [update.content];
  const text = blocks.filter((b) => b && b.type === "text").map((b) => b.text).join("");
  return [update.sessionUpdate, update.messageId, text];
}

/**
 * The client's side: every update kept in order; a permission allowed once; waiters on
 * updates (`until(predicate)` resolves with the first update, past or future, that matches).
 */
function makeClient() {
  const state = { updates: [], permissions: [], waiters: [] };
  state.until = (predicate) =>
    new Promise((resolve) => {
      const seen = state.updates.find(predicate);
      if (seen) resolve(seen);
      else state.waiters.push({ predicate, resolve });
    });
  const app = acp
    .client({ name: "interop-typescript-sdk-v2" })
    .onRequest(methods.client.session.requestPermission, ({ params }) => {
      state.permissions.push(params.title);
      const allow = params.options.find((o) => o.kind === "allow_once") ?? params.options[0];
      return { outcome: { outcome: "selected", optionId: allow.optionId } };
    })
    .onNotification(methods.client.session.update, ({ params }) => {
      const update = { ...params.update, sessionId: params.sessionId };
      state.updates.push(update);
      state.waiters = state.waiters.filter((w) => (w.predicate(update) ? (w.resolve(update), false) : true));
    });
  return { app, state };
}

const isState = (sessionId, state, stopReason) => (u) =>
  u.sessionId === sessionId &&
  u.sessionUpdate === "state_update" &&
  u.state === state &&
  (stopReason === undefined || u.stopReason === stopReason);

/** A resume's replay as the raw frames show it: the message updates and states of `sessionId`. */
function replayOf(updates) {
  return {
    messages: updates.filter((u) => MESSAGE_KINDS.has(u.sessionUpdate) || u.sessionUpdate.endsWith("_chunk")).map(message),
    states: updates.filter((u) => u.sessionUpdate === "state_update").map((u) => [u.state, u.stopReason ?? null]),
  };
}

async function main() {
  const sdkVersion = JSON.parse(
    readFileSync(new URL("./node_modules/@agentclientprotocol/sdk/package.json", import.meta.url), "utf8"),
  ).version;
  const cwd = config.workspace;
  const initParams = {
    protocolVersion: acp.PROTOCOL_VERSION,
    info: { name: "interop-typescript-sdk-v2", version: "1" },
    capabilities: {},
  };

  // -- first process: new, prompt, a cancelled prompt, close ---------------------------------
  let { app, state } = makeClient();
  let server = startServer(config, acp.ndJsonStream, "v2-first");
  let connection = app.connect(server.stream);
  let { agent } = connection;
  const init = await agent.request(methods.agent.initialize, initParams);
  const { sessionId } = await agent.request(methods.agent.session.new, { cwd });

  const first = await agent.request(methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: config.prompt }],
  });
  await state.until(isState(sessionId, "idle", "end_turn"));
  const firstTurn = state.updates.filter((u) => u.sessionId === sessionId);

  const mark = state.updates.length;
  const second = await agent.request(methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: config.hangPrompt }],
  });
  await state.until(
    (u) => u.sessionId === sessionId && u.sessionUpdate === "agent_message_chunk" && u.content.text === config.hangText,
  );
  await agent.notify(methods.agent.session.cancel, { sessionId });
  const cancelledIdle = await state.until(
    (u) => state.updates.indexOf(u) >= mark && isState(sessionId, "idle")(u) && u.stopReason !== undefined,
  );
  const secondTurn = state.updates.slice(mark).filter((u) => u.sessionId === sessionId);
  const closedFirst = await agent.request(methods.agent.session.close, { sessionId });
  let ended = await finish(server);
  validate("v2-first", ended);
  const live = {
    exitCode: ended.code,
    protocolVersion: init.protocolVersion,
    agentName: init.info?.name,
    history: init.capabilities?._meta?.["acp-server"]?.history ?? null,
    receipts: [first.messageId, second.messageId],
    firstStates: firstTurn.filter((u) => u.sessionUpdate === "state_update").map((u) => [u.state, u.stopReason ?? null]),
    secondStates: secondTurn.filter((u) => u.sessionUpdate === "state_update").map((u) => [u.state, u.stopReason ?? null]),
    cancelledStopReason: cancelledIdle.stopReason,
    messages: [...firstTurn, ...secondTurn]
      .filter((u) => MESSAGE_KINDS.has(u.sessionUpdate) || u.sessionUpdate.endsWith("_chunk"))
      .map(message),
    permissions: state.permissions,
    closed: closedFirst,
  };

  // -- a fresh process: resume from the start, from a message, without replay; close ---------
  ({ app, state } = makeClient());
  server = startServer(config, acp.ndJsonStream, "v2-second");
  connection = app.connect(server.stream);
  ({ agent } = connection);
  await agent.request(methods.agent.initialize, initParams);
  const replays = [{ type: "start" }, { type: "_after_message", messageId: first.messageId }, undefined];
  for (const replayFrom of replays) {
    const params = { sessionId, cwd };
    if (replayFrom !== undefined) params.replayFrom = replayFrom;
    await agent.request(methods.agent.session.resume, params);
  }
  const closed = await agent.request(methods.agent.session.close, { sessionId });
  ended = await finish(server);
  const sent = validate("v2-second", ended);

  // Each replay on the raw frames (handlers may run after the answer resolved): the session's
  // updates between the previous resume's answer and its own; after the last, nothing but a
  // notice.
  const answers = [...sent].filter(([, m]) => m === "session/resume").map(([id]) => id);
  const answeredAt = answers.map((id) => ended.frames.findIndex((f) => !("method" in f) && f.id === id));
  const updatesBetween = (from, to) =>
    ended.frames
      .slice(from, to)
      .filter((f) => f.method === "session/update" && f.params.sessionId === sessionId)
      .map((f) => f.params.update);
  const [fromStart, fromMessage, plain] = answeredAt.map((at, k) =>
    replayOf(updatesBetween(k === 0 ? 0 : answeredAt[k - 1] + 1, at)),
  );
  const afterAnswers = updatesBetween(answeredAt[answeredAt.length - 1] + 1)
    .filter((u) => u.sessionUpdate !== "notice")
    .map((u) => u.sessionUpdate);

  console.log(
    JSON.stringify({
      sdkVersion,
      sessionId,
      live,
      resumed: { exitCode: ended.code, fromStart, fromMessage, plain, closed, afterAnswers },
      violations,
    }),
  );
}

const timer = setTimeout(() => {
  console.error(`v2flow.mjs: no result within ${TIMEOUT_MS} ms`);
  process.exit(1);
}, TIMEOUT_MS);

main().then(
  () => clearTimeout(timer),
  (error) => {
    console.error(`v2flow.mjs: ${error?.stack ?? JSON.stringify(error)}`);
    process.exit(1);
  },
);
