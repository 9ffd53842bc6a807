// The server under an interop script (flow.mjs, admin.mjs): spawned over stdio, its two streams
// teed so that every byte either way is kept and written out when it stops.

import { spawn } from "node:child_process";
import { openSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";

/**
 * Spawn `python -m acp_server serve` over `config.fixture`; `ndJsonStream` is the SDK's own.
 * Returns the SDK's `stream` and `stop()`, which ends the server's input, waits for its exit,
 * writes `<name>.stdout.jsonl` and `<name>.stdin.jsonl` into `config.out` and returns
 * `{ code, stdout, stdin }` (the bytes as Buffers).
 */
export function startServer(config, ndJsonStream, name) {
  const stderr = openSync(join(config.out, `${name}.stderr.log`), "w");
  const child = spawn(
    config.python,
    ["-m", "acp_server", "serve", "--sessions-dir", config.sessionsDir, "--replay", config.fixture],
    { stdio: ["pipe", "pipe", stderr] },
  );
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve(code ?? signal)));

  const [forSdk, forLog] = Readable.toWeb(child.stdout).tee();
  const received = [];
  const reading = (async () => {
    for await (const chunk of forLog) received.push(Buffer.from(chunk));
  })();

  const sent = [];
  const outgoing = new TransformStream({
    transform(chunk, controller) {
      sent.push(Buffer.from(chunk));
      controller.enqueue(chunk);
    },
  });
  const writing = outgoing.readable.pipeTo(Writable.toWeb(child.stdin)).catch(() => {});

  const stream = ndJsonStream(outgoing.writable, forSdk);

  async function stop() {
    await outgoing.writable.close().catch(() => {}); // end of input: the server exits 0
    await writing;
    const code = await exited;
    await reading;
    const stdout = Buffer.concat(received);
    const stdin = Buffer.concat(sent);
    writeFileSync(join(config.out, `${name}.stdout.jsonl`), stdout);
    writeFileSync(join(config.out, `${name}.stdin.jsonl`), stdin);
    return { code, stdout, stdin };
  }
  return { stream, stop };
}
