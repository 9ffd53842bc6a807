// How the viewer shows what the shared fold (fold.js) leaves plain: a tool call under the title
// an ACP client is sent for it (`tool_call.title`, SPEC 4.1), not the tool's internal name; a
// command's reply (`command/result`); a turn that did not complete (`turn/end` cancelled,
// failed, cut); a notice (`session/notice`). No dependencies beyond fold.js, no DOM, no I/O.
//
// The titles are the server's (`acp_server/agent/tools/builtin.py`), computed again here from
// the call's arguments because the log keeps the name and arguments, not the title;
// tests/test_js_present.py holds the two to the same answers.

import { defaultDefinitions } from "./fold.js";

const TITLE_LIMIT = 80;

/** A title on one line, at most 80 characters (cut with an ellipsis), as `clip_title`. */
export function clipTitle(text) {
  const line = String(text).split(/\s+/).filter(Boolean).join(" ");
  return line.length <= TITLE_LIMIT ? line : `${line.slice(0, TITLE_LIMIT - 1)}…`;
}

const get = (input, key) =>
  input !== null && typeof input === "object" && !Array.isArray(input) ? input[key] : undefined;
const isText = (value) => typeof value === "string";

function pathTitle(verb) {
  return (input) => (isText(get(input, "path")) ? `${verb} ${get(input, "path")}` : null);
}

function searchTitle(verb) {
  return (input) => {
    const pattern = get(input, "pattern");
    if (!isText(pattern)) return null;
    const path = get(input, "path");
    return isText(path) ? `${verb} ${pattern} in ${path}` : `${verb} ${pattern}`;
  };
}

/** The built-in tools (SPEC 4.3): their ACP kind and title. */
const TOOLS = {
  read_file: ["read", pathTitle("Read")],
  write_file: ["edit", pathTitle("Write")],
  edit_file: ["edit", pathTitle("Edit")],
  list_directory: ["read", pathTitle("List")],
  glob: ["search", searchTitle("Find")],
  grep: ["search", searchTitle("Search")],
  todo_write: ["think", () => "Update the plan"],
  run_command: [
    "execute",
    (input) => {
      const command = get(input, "command");
      if (!isText(command)) return null;
      const extra = get(input, "args");
      return ["Run", command, ...(Array.isArray(extra) ? extra : [])].map(String).join(" ");
    },
  ],
  task: ["other", (input) => (isText(get(input, "prompt")) ? `Subagent: ${get(input, "prompt")}` : null)],
  search_history: [
    "search",
    (input) => (isText(get(input, "pattern")) ? `Search history: ${get(input, "pattern")}` : null),
  ],
};

/** A call's `{title, kind, locations}` from its tool's name and parsed input. An MCP tool
 * (`mcp__<server>__<tool>`) shows as `<server>: <tool>`: its own title is not in the log. */
export function presentTool(name, input) {
  const known = TOOLS[name];
  if (known) {
    const [kind, title] = known;
    return { title: clipTitle(title(input) ?? name), kind, locations: [] };
  }
  const mcp = /^mcp__(.+?)__(.+)$/.exec(name);
  if (mcp) return { title: clipTitle(`${mcp[1]}: ${mcp[2]}`), kind: "other", locations: [] };
  return { title: clipTitle(name), kind: "other", locations: [] };
}

/** A command's reply (`command/result`): a node of kind "reply" where it happened. */
export const COMMAND_REPLY = {
  name: "reply",
  claims: ["command/result"],
  fold(event, ctx) {
    const { data, seq } = event;
    ctx.start({
      id: `reply/${seq}`,
      kind: "reply",
      seq,
      lastSeq: seq,
      turn: data.turn,
      command: data.command,
      content: data.content,
      isError: data.isError === true,
    });
  },
};

const ENDINGS = {
  cancelled: "Cancelled",
  error: "Failed",
  "max-tokens": "Stopped: the reply reached the model's output limit",
  refusal: "Stopped: the model refused",
  "max-steps": "Stopped: the turn reached its step limit",
  interrupted: "Interrupted: the server stopped during this turn",
};

/** What a turn's end says, or null for a turn that completed. */
export function turnEnding(reason) {
  const kind = reason?.kind;
  if (kind === "completed" || kind === undefined) return null;
  const said = ENDINGS[kind] ?? `Ended (${kind})`;
  return kind === "error" && reason.error?.message ? `${said}: ${reason.error.message}` : said;
}

/** A turn that did not complete: a node of kind "ending" saying how it ended. */
export const TURN_ENDING = {
  name: "ending",
  claims: ["turn/end"],
  fold(event, ctx) {
    const { data, seq } = event;
    const text = turnEnding(data.reason);
    if (text === null) return;
    ctx.start({ id: `ending/${seq}`, kind: "ending", seq, lastSeq: seq, turn: data.turn, reason: data.reason.kind, text });
  },
};

/** A notice to the user (`session/notice`): a node of kind "notice" where it happened. */
export const NOTICE = {
  name: "notice",
  claims: ["session/notice"],
  fold(event, ctx) {
    const { data, seq } = event;
    ctx.start({
      id: `notice/${seq}`,
      kind: "notice",
      seq,
      lastSeq: seq,
      severity: data.severity,
      title: data.title,
      description: data.description ?? null,
    });
  },
};

/** The viewer's fold: the shared definitions with ACP titles, then replies, endings and
 * notices. */
export function viewerDefinitions() {
  return [...defaultDefinitions({ present: presentTool }), COMMAND_REPLY, TURN_ENDING, NOTICE];
}
