// Drives acp-server through the official ACP TypeScript SDK (`@agentclientprotocol/sdk`) over
// `ndJsonStream`, and prints a JSON summary on stdout. Two releases are installed side by side
// (package.json): the current one, whose client is the app API (`client().onRequest(...)`,
// `connect(stream).agent.request(...)`), and the last 1.x, whose client is the
// `ClientSideConnection` class that 2.0 removed (installed under the alias `acp-sdk-1`).
// Run by tests/test_interop_typescript_sdk.py, once for each:
//
//   node flow.mjs '{"sdk": "@agentclientprotocol/sdk" | "acp-sdk-1", "python": ..., "sessionsDir": ...,
//                   "fixture": ..., "workspace": ..., "out": ..., "prompt": ..., "hangText": ...}'
//
// One server process: initialize, session/new, a prompt whose tool calls this client serves
// (fs/read_text_file, session/request_permission, fs/write_text_file), then a second prompt whose
// model call hangs until session/cancel. A fresh process: session/load, session/list,
// session/close, session/resume, session/close.
//
// Both directions are teed byte for byte: `<out>/<name>.stdout.jsonl` (what the server wrote) and
// `<out>/<name>.stdin.jsonl` (what we sent), so the Python side can check the raw frames too.
// Every frame the server wrote is validated here with the SDK's own zod models (results by the
// method they answer, params by method); failures are listed under `violations`.

import { readFileSync } from "node:fs";
import { join } from "node:path";

import { startServer } from "./server.mjs";

const config = JSON.parse(process.argv[2]);
const TIMEOUT_MS = 30_000;

// Where each release keeps its generated zod models: they are not exported by name, so they are
// imported by path (the versions are pinned in package.json).
const ZOD_MODELS = {
  "@agentclientprotocol/sdk": "dist/v1/schema/zod.gen.js",
  "acp-sdk-1": "dist/schema/zod.gen.js",
};
const acp = await import(config.sdk);
const models = await import(`./node_modules/${config.sdk}/${ZOD_MODELS[config.sdk]}`);

const RESULT_MODELS = {
  initialize: models.zInitializeResponse,
  "session/new": models.zNewSessionResponse,
  "session/load": models.zLoadSessionResponse,
  "session/list": models.zListSessionsResponse,
  "session/resume": models.zResumeSessionResponse,
  "session/close": models.zCloseSessionResponse,
  "session/prompt": models.zPromptResponse,
};
const PARAMS_MODELS = {
  "session/update": models.zSessionNotification,
  "session/request_permission": models.zRequestPermissionRequest,
  "fs/read_text_file": models.zReadTextFileRequest,
  "fs/write_text_file": models.zWriteTextFileRequest,
};

/**
 * A connection to the agent with one method per ACP request the flow sends, whichever API the
 * release has; `handlers` answers the agent's requests and notifications.
 */
function connect(handlers, stream) {
  if (acp.ClientSideConnection) return new acp.ClientSideConnection(() => handlers, stream);
  const { methods } = acp;
  const { agent } = acp
    .client({ name: "interop-typescript-sdk" })
    .onRequest(methods.client.session.requestPermission, ({ params }) => handlers.requestPermission(params))
    .onRequest(methods.client.fs.readTextFile, ({ params }) => handlers.readTextFile(params))
    .onRequest(methods.client.fs.writeTextFile, ({ params }) => handlers.writeTextFile(params))
    .onNotification(methods.client.session.update, ({ params }) => handlers.sessionUpdate(params))
    .connect(stream);
  return {
    initialize: (params) => agent.request(methods.agent.initialize, params),
    newSession: (params) => agent.request(methods.agent.session.new, params),
    prompt: (params) => agent.request(methods.agent.session.prompt, params),
    cancel: (params) => agent.notify(methods.agent.session.cancel, params),
    loadSession: (params) => agent.request(methods.agent.session.load, params),
    listSessions: (params) => agent.request(methods.agent.session.list, params),
    closeSession: (params) => agent.request(methods.agent.session.close, params),
    resumeSession: (params) => agent.request(methods.agent.session.resume, params),
  };
}

const violations = [];

function lines(chunks) {
  const text = Buffer.concat(chunks).toString("utf8");
  if (text && !text.endsWith("\n")) violations.push("the last line is not newline-terminated");
  return text.split("\n").filter((line) => line.length > 0);
}

/** The server's run as `{ code, frames, requests }`: its stop, each line parsed. */
async function finish(server) {
  const { code, stdout, stdin } = await server.stop();
  const frames = lines([stdout]);
  const requests = lines([stdin]);
  return { code, frames: frames.map((l) => JSON.parse(l)), requests: requests.map((l) => JSON.parse(l)) };
}

/** Validate the server's frames with the SDK's models; returns the method of each request id. */
function validate(name, frames, requests) {
  const methods = new Map(requests.filter((m) => "method" in m && "id" in m).map((m) => [m.id, m.method]));
  frames.forEach((frame, index) => {
    const where = `${name} frame ${index}`;
    if (frame.jsonrpc !== "2.0") violations.push(`${where}: not JSON-RPC 2.0`);
    let model;
    let value;
    let what;
    if ("method" in frame) {
      model = PARAMS_MODELS[frame.method];
      value = frame.params;
      what = `the params of ${frame.method}`;
    } else if ("error" in frame) {
      model = models.zError;
      value = frame.error;
      what = "an error";
    } else {
      const method = methods.get(frame.id);
      model = RESULT_MODELS[method];
      value = frame.result;
      what = `the result of ${method}`;
    }
    if (!model) {
      violations.push(`${where}: nothing the client expects: ${JSON.stringify(frame)}`);
      return;
    }
    const parsed = model.safeParse(value);
    if (!parsed.success) {
      violations.push(`${where}: ${what} violates ACP: ${JSON.stringify(value)}: ${parsed.error.message}`);
    }
  });
  return methods;
}

// The session's setup (its mode, options and commands) is sent again by resume: not replay.
const SETUP_UPDATES = new Set(["available_commands_update", "current_mode_update", "config_option_update"]);

function updatesOf(frames, sessionId) {
  return frames
    .map((frame, index) => ({ frame, index }))
    .filter(
      ({ frame }) =>
        frame.method === "session/update" &&
        frame.params.sessionId === sessionId &&
        !SETUP_UPDATES.has(frame.params.update.sessionUpdate),
    );
}

function toolCalls(updates) {
  return updates
    .filter((u) => u.sessionUpdate === "tool_call")
    .map((u) => [u.toolCallId, u.kind, u.title]);
}

function finalStatuses(updates) {
  const statuses = {};
  for (const u of updates) {
    if ((u.sessionUpdate === "tool_call" || u.sessionUpdate === "tool_call_update") && u.status) {
      statuses[u.toolCallId] = u.status;
    }
  }
  return statuses;
}

function textOf(updates) {
  return updates
    .filter((u) => u.sessionUpdate === "agent_message_chunk" && u.content.type === "text")
    .map((u) => u.content.text)
    .join("");
}

/** The editor's side: an in-memory file system, and every permission allowed once. */
function makeClient() {
  const hello = join(config.workspace, "hello.py");
  let hung;
  const client = {
    hello,
    files: { [hello]: readFileSync(hello, "utf8") },
    requests: [],
    hanging: new Promise((resolve) => {
      hung = resolve;
    }),
    async requestPermission(params) {
      client.requests.push(["session/request_permission", params.toolCall.toolCallId]);
      return { outcome: { outcome: "selected", optionId: "allow_once" } };
    },
    async sessionUpdate(params) {
      const { update } = params;
      if (update.sessionUpdate === "agent_message_chunk" && update.content.text === config.hangText) hung();
    },
    async readTextFile(params) {
      client.requests.push(["fs/read_text_file", params.path]);
      return { content: client.files[params.path] };
    },
    async writeTextFile(params) {
      client.requests.push(["fs/write_text_file", params.path]);
      client.files[params.path] = params.content;
      return {};
    },
  };
  return client;
}

async function main() {
  const sdkVersion = JSON.parse(
    readFileSync(new URL(`./node_modules/${config.sdk}/package.json`, import.meta.url), "utf8"),
  ).version;
  const cwd = config.workspace;

  // -- first process --------------------------------------------------------------------------
  let client = makeClient();
  let server = startServer(config, acp.ndJsonStream, "first");
  let conn = connect(client, server.stream);
  const init = await conn.initialize({
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: true, writeTextFile: true } },
    clientInfo: { name: "interop-typescript-sdk", version: "1" },
  });
  const { sessionId } = await conn.newSession({ cwd, mcpServers: [] });
  const first = await conn.prompt({ sessionId, prompt: [{ type: "text", text: config.prompt }] });
  const second = conn.prompt({ sessionId, prompt: [{ type: "text", text: "Check it again." }] });
  await client.hanging; // the model call is streaming, then waits
  await conn.cancel({ sessionId });
  const cancelled = await second;
  let ended = await finish(server);
  validate("first", ended.frames, ended.requests);
  const live = updatesOf(ended.frames, sessionId).map(({ frame }) => frame.params.update);
  const firstProcess = {
    exitCode: ended.code,
    clientRequests: client.requests,
    fileAfter: client.files[client.hello],
    toolCalls: toolCalls(live),
    finalStatuses: finalStatuses(live),
    text: textOf(live),
  };

  // -- a fresh process ------------------------------------------------------------------------
  client = makeClient();
  server = startServer(config, acp.ndJsonStream, "second");
  conn = connect(client, server.stream);
  await conn.initialize({ protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
  const loaded = await conn.loadSession({ sessionId, cwd, mcpServers: [] });
  const listed = await conn.listSessions({ cwd });
  await conn.closeSession({ sessionId });
  await conn.resumeSession({ sessionId, cwd, mcpServers: [] });
  await conn.closeSession({ sessionId });
  ended = await finish(server);
  const methods = validate("second", ended.frames, ended.requests);

  // Replay order, on the raw frames: every update of the session before the load response.
  const loadIds = [...methods].filter(([, m]) => m === "session/load").map(([id]) => id);
  const answeredAt = ended.frames.findIndex((f) => !("method" in f) && f.id === loadIds[0]);
  const replay = updatesOf(ended.frames, sessionId);
  const replayed = replay.map(({ frame }) => frame.params.update);

  console.log(
    JSON.stringify({
      sdkVersion,
      protocolVersion: init.protocolVersion,
      loadSessionCapability: init.agentCapabilities?.loadSession ?? false,
      agentName: init.agentInfo?.name,
      sessionId,
      firstStopReason: first.stopReason,
      cancelledStopReason: cancelled.stopReason,
      first: firstProcess,
      second: {
        exitCode: ended.code,
        loadResult: loaded,
        loadResponseIndex: answeredAt,
        replayed: replay.length,
        replayedAfterResponse: replay.filter(({ index }) => index > answeredAt).length,
        userTexts: replayed.filter((u) => u.sessionUpdate === "user_message_chunk").map((u) => u.content.text),
        toolCalls: toolCalls(replayed),
        finalStatuses: finalStatuses(replayed),
        text: textOf(replayed),
        listed: listed.sessions.map((s) => s.sessionId),
        clientRequests: client.requests,
      },
      violations,
    }),
  );
}

const timer = setTimeout(() => {
  console.error(`flow.mjs: no result within ${TIMEOUT_MS} ms`);
  process.exit(1);
}, TIMEOUT_MS);

main().then(
  () => clearTimeout(timer),
  (error) => {
    console.error(`flow.mjs: ${error?.stack ?? JSON.stringify(error)}`);
    process.exit(1);
  },
);
