// Drives acp-server's unstable session methods through the official ACP TypeScript SDK 2.4.0
// (`@agentclientprotocol/sdk`, its app API `client()`): fork, set_title, status, archive,
// unarchive and the archive filter of session/list. The SDK has no typed helper for them on the
// client side, so they go through `agent.request` with the method constants of its unstable
// entry point (`methods.agent.session.fork`, ...). Run by
// tests/test_interop_typescript_sdk_admin.py:
//
//   node admin.mjs '{"python": ..., "sessionsDir": ..., "fixture": ..., "workspace": ..., "out": ...}'
//
// One server process: initialize, session/new, two prompts, a fork at the default point and one
// at the first answer (`_meta["acp-server"].forkAt.messageId`), a title, statuses, an archive
// with each list filter, an unarchive. Each answer is held to the SDK's unstable zod model of its
// method (failures under `violations`); the server's bytes are teed to `<out>/admin.stdout.jsonl`
// and what we sent to `<out>/admin.stdin.jsonl`, for the Python side's schema checks.

import { readFileSync } from "node:fs";

import { startServer } from "./server.mjs";

// The unstable entry point: the stable one has no constants for these methods.
import * as acp from "@agentclientprotocol/sdk/unstable";

const config = JSON.parse(process.argv[2]);
const TIMEOUT_MS = 30_000;

// The unstable zod models are not exported by name: imported by path (the version is pinned).
const models = await import("./node_modules/@agentclientprotocol/sdk/dist/v1/unstable/schema/zod.gen.js");
const { methods } = acp;
const RESULT_MODELS = {
  [methods.agent.initialize]: models.zInitializeResponse,
  [methods.agent.session.new]: models.zNewSessionResponse,
  [methods.agent.session.prompt]: models.zPromptResponse,
  [methods.agent.session.fork]: models.zForkSessionResponse,
  [methods.agent.session.setTitle]: models.zSetSessionTitleResponse,
  [methods.agent.session.status]: models.zSessionStatusResponse,
  [methods.agent.session.archive]: models.zArchiveSessionResponse,
  [methods.agent.session.unarchive]: models.zUnarchiveSessionResponse,
  [methods.agent.session.list]: models.zListSessionsResponse,
};

const violations = [];
const updates = [];

async function main() {
  const server = startServer(config, acp.ndJsonStream, "admin");
  const { agent } = acp
    .client({ name: "interop-typescript-sdk-admin" })
    .onNotification(methods.client.session.update, ({ params }) => {
      updates.push(params);
    })
    .connect(server.stream);

  /** A request through the SDK, its answer held to the SDK's zod model of the method. */
  async function request(method, params) {
    const result = await agent.request(method, params);
    const parsed = RESULT_MODELS[method].safeParse(result);
    if (!parsed.success) {
      violations.push(`the result of ${method} violates ACP: ${JSON.stringify(result)}: ${parsed.error.message}`);
    }
    return result;
  }

  const cwd = config.workspace;
  const init = await request(methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: {},
    clientInfo: { name: "interop-typescript-sdk-admin", version: "1" },
  });
  const { sessionId } = await request(methods.agent.session.new, { cwd, mcpServers: [] });
  const stopReasons = [];
  for (const text of ["First?", "Second?"]) {
    const answer = await request(methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] });
    stopReasons.push(answer.stopReason);
  }
  const forkedDefault = await request(methods.agent.session.fork, { sessionId, cwd, mcpServers: [] });
  const forkedAt = await request(methods.agent.session.fork, {
    sessionId,
    cwd,
    mcpServers: [],
    _meta: { "acp-server": { forkAt: { messageId: "assistant-0-0" } } },
  });
  const titled = await request(methods.agent.session.setTitle, { sessionId, title: "The parent" });
  const statusOpen = await request(methods.agent.session.status, { sessionId });
  const archived = await request(methods.agent.session.archive, { sessionId: forkedAt.sessionId });
  const statusArchived = await request(methods.agent.session.status, { sessionId: forkedAt.sessionId });
  const listDefault = await request(methods.agent.session.list, {});
  const listInclude = await request(methods.agent.session.list, { archived: "include" });
  const listOnly = await request(methods.agent.session.list, { archived: "only" });
  const unarchived = await request(methods.agent.session.unarchive, { sessionId: forkedAt.sessionId });
  const listAfter = await request(methods.agent.session.list, {});
  const exitCode = (await server.stop()).code;

  const sessions = (list) => list.sessions.map((s) => [s.sessionId, s.archived ?? null, s.title ?? null]);
  console.log(
    JSON.stringify({
      sdkVersion: JSON.parse(
        readFileSync(new URL("./node_modules/@agentclientprotocol/sdk/package.json", import.meta.url), "utf8"),
      ).version,
      exitCode,
      sessionCapabilities: init.agentCapabilities?.sessionCapabilities ?? null,
      sessionId,
      stopReasons,
      forkedDefault,
      forkedAt,
      titled,
      titleUpdates: updates
        .filter((p) => p.update.sessionUpdate === "session_info_update")
        .map((p) => [p.sessionId, p.update]),
      statusOpen,
      archived,
      statusArchived,
      listDefault: sessions(listDefault),
      listInclude: sessions(listInclude),
      listOnly: sessions(listOnly),
      unarchived,
      listAfter: sessions(listAfter),
      violations,
    }),
  );
}

const timer = setTimeout(() => {
  console.error(`admin.mjs: no result within ${TIMEOUT_MS} ms`);
  process.exit(1);
}, TIMEOUT_MS);

main().then(
  () => clearTimeout(timer),
  (error) => {
    console.error(`admin.mjs: ${error?.stack ?? JSON.stringify(error)}`);
    process.exit(1);
  },
);
