// The conversation fold: a session's events, in seq order, folded into the nodes a client
// shows. The same fold as the Python client's `acp_server/client/fold.py`, node for node: the
// same definitions, the same node JSON, the same change sequence (that module's docstring is
// the full description of the nodes). No dependencies, no I/O: events in, changes out.
//
// A definition is `{name, claims: [eventType...], fold(event, ctx)}`. The fold hands every
// event, exactly once and in seq order, to each definition that claims its type, in registry
// order, as the event's plain JSON, whether it came from a packed history page (expanded to
// exact events first) or from a live follow frame. `ctx.state` is the definition's own memory;
// `ctx.start(node)` and `ctx.update(id, set, append)` are its changes, returned by `feed`:
//
//   {op: "start",  seq, node}
//   {op: "update", seq, id, set: {field: value}, append: {field: string}}
//
// Nodes are plain JSON objects with camelCase keys: `id` (stable), `kind` ("user", "text",
// "thought", "tool", "plan", "title", "mode"), `seq`, `lastSeq`, and the kind's fields; absent
// values are `null`.

export class FoldError extends Error {
  constructor(message) {
    super(message);
    this.name = "FoldError";
  }
}

class FoldContext {
  constructor(fold) {
    this._fold = fold;
    this.state = {};
  }

  node(id) {
    return this._fold.node(id);
  }

  has(id) {
    return this._fold._nodes.has(id);
  }

  start(node) {
    this._fold._start(node);
  }

  update(id, set = {}, append = {}) {
    this._fold._update(id, { ...set }, { ...append });
  }
}

export class ConversationFold {
  constructor(definitions = defaultDefinitions()) {
    this._definitions = [...definitions];
    this._byType = new Map();
    for (const definition of this._definitions) {
      const ctx = new FoldContext(this);
      for (const type of definition.claims) {
        if (!this._byType.has(type)) this._byType.set(type, []);
        this._byType.get(type).push([definition, ctx]);
      }
    }
    this._nodes = new Map();
    this._changes = [];
    this._seq = -1;
    this.lastSeq = null;
  }

  /** Fold one event; the changes it made, in order. */
  feed(event) {
    const seq = event.seq;
    if (!Number.isInteger(seq)) throw new FoldError(`an event without an integer seq: ${seq}`);
    if (this.lastSeq !== null && seq !== this.lastSeq + 1) {
      throw new FoldError(
        `seq ${seq} after seq ${this.lastSeq}: events are folded in seq order, each once`,
      );
    }
    this.lastSeq = this._seq = seq;
    this._changes = [];
    for (const [definition, ctx] of this._byType.get(event.type) ?? []) {
      definition.fold(event, ctx);
    }
    return this._changes;
  }

  /** Fold events in order; every change they made. */
  feedAll(events) {
    const changes = [];
    for (const event of events) changes.push(...this.feed(event));
    return changes;
  }

  node(id) {
    return this._nodes.get(id) ?? null;
  }

  /** Every node, in the order they started (copies). */
  nodes() {
    return [...this._nodes.values()].map((node) => ({ ...node }));
  }

  _start(node) {
    if (typeof node.id !== "string") throw new FoldError("a node needs a string id");
    if (this._nodes.has(node.id)) throw new FoldError(`node ${node.id} started twice`);
    this._nodes.set(node.id, { ...node });
    this._changes.push({ op: "start", seq: this._seq, node: { ...node } });
  }

  _update(id, set, append) {
    const node = this._nodes.get(id);
    if (node === undefined) throw new FoldError(`update of node ${id}, which never started`);
    for (const key of Object.keys(append)) {
      if (Object.hasOwn(set, key)) throw new FoldError(`node ${id}: ${key} both set and appended`);
      node[key] += append[key];
    }
    Object.assign(node, set);
    this._changes.push({ op: "update", seq: this._seq, id, set, append });
  }
}

/** Apply one change to nodes kept by id in a Map (what a client does to show the fold). */
export function applyChange(nodes, change) {
  if (change.op === "start") {
    nodes.set(change.node.id, { ...change.node });
    return;
  }
  const node = nodes.get(change.id);
  Object.assign(node, change.set);
  for (const key of Object.keys(change.append)) node[key] += change.append[key];
}

/** Fold a whole sequence at once: its changes and the final nodes. */
export function foldEvents(events, definitions = defaultDefinitions()) {
  const fold = new ConversationFold(definitions);
  const changes = fold.feedAll(events);
  return { changes, nodes: fold.nodes() };
}

// ---------------------------------------------------------------------------------------------
// The definitions.

const stepKey = (data) => `${data.turn}/${data.step}`;

function getOrSet(object, key, make) {
  if (!Object.hasOwn(object, key)) object[key] = make();
  return object[key];
}

export const USER_MESSAGE = {
  name: "user",
  claims: ["user/message"],
  fold(event, ctx) {
    const { data } = event;
    const { message } = data;
    const id = `user/${message.id}`;
    if (ctx.has(id)) {
      ctx.update(id, { lastSeq: event.seq, content: message.content });
      return;
    }
    ctx.start({
      id,
      kind: "user",
      seq: event.seq,
      lastSeq: event.seq,
      turn: data.turn,
      messageId: message.id,
      content: message.content,
    });
  },
};

// Assistant text or reasoning: grown by its deltas, settled by the step's message. The
// message's blocks of this kind are matched, in order, to the step's streamed blocks of this
// kind in the order they first appeared (an interrupted message leaves out the blocks that
// received no text, so those are skipped in matching).
function streamedBlockDefinition(kind, blockType, deltaType) {
  const blockId = (data, index) => `${kind}/${data.turn}/${data.step}/${index}`;
  const stateOf = (ctx) => {
    const s = ctx.state;
    for (const key of ["steps", "deltas", "texted", "status"]) getOrSet(s, key, () => new Map());
    return s;
  };
  const makeNode = (event, id, index, text, deltas, status, messageId) => ({
    id,
    kind,
    seq: event.seq,
    lastSeq: event.seq,
    turn: event.data.turn,
    step: event.data.step,
    index,
    messageId,
    text,
    deltas,
    status,
  });

  function open(event, ctx, index, text) {
    const { data } = event;
    const id = blockId(data, index);
    if (ctx.has(id)) return;
    const s = stateOf(ctx);
    const deltas = data.chunk.type === "block-start" ? 0 : 1;
    const key = stepKey(data);
    if (!s.steps.has(key)) s.steps.set(key, []);
    s.steps.get(key).push(id);
    s.deltas.set(id, deltas);
    s.texted.set(id, text !== "");
    s.status.set(id, "streaming");
    ctx.start(makeNode(event, id, index, text, deltas, "streaming", null));
  }

  function chunk(event, ctx) {
    const { data } = event;
    const c = data.chunk;
    if (c.type === "block-start") {
      if (c.blockType === blockType) open(event, ctx, c.index, "");
    } else if (c.type === deltaType) {
      const id = blockId(data, c.index);
      if (!ctx.has(id)) {
        open(event, ctx, c.index, c.text);
        return;
      }
      const s = stateOf(ctx);
      const deltas = s.deltas.get(id) + 1;
      s.deltas.set(id, deltas);
      if (c.text) s.texted.set(id, true);
      ctx.update(id, { lastSeq: event.seq, deltas }, { text: c.text });
    }
  }

  function message(event, ctx) {
    const { data } = event;
    const msg = data.message;
    const status = data.interrupted === true ? "interrupted" : "done";
    const s = stateOf(ctx);
    const key = stepKey(data);
    if (!s.steps.has(key)) s.steps.set(key, []);
    const streamed = s.steps.get(key);
    const candidates = streamed.filter((id) => status === "done" || s.texted.get(id));
    const blocks = [];
    msg.content.forEach((block, position) => {
      if (block.type === blockType) blocks.push([position, block]);
    });
    const settled = new Set();
    const n = Math.min(candidates.length, blocks.length);
    for (let k = 0; k < n; k++) {
      const id = candidates[k];
      settled.add(id);
      s.status.set(id, status);
      ctx.update(id, { lastSeq: event.seq, messageId: msg.id, text: blocks[k][1].text, status });
    }
    for (const id of [...streamed]) {
      if (!settled.has(id) && s.status.get(id) === "streaming") {
        s.status.set(id, status);
        ctx.update(id, { lastSeq: event.seq, messageId: msg.id, status });
      }
    }
    for (const [position, block] of blocks.slice(candidates.length)) {
      const id = blockId(data, `m${position}`);
      if (ctx.has(id)) continue;
      streamed.push(id);
      s.texted.set(id, block.text !== "");
      s.status.set(id, status);
      s.deltas.set(id, 0);
      ctx.start(makeNode(event, id, position, block.text, 0, status, msg.id));
    }
  }

  function end(event, ctx, keys) {
    const s = stateOf(ctx);
    for (const key of keys) {
      for (const id of s.steps.get(key) ?? []) {
        if (s.status.get(id) === "streaming") {
          s.status.set(id, "incomplete");
          ctx.update(id, { lastSeq: event.seq, status: "incomplete" });
        }
      }
    }
  }

  return {
    name: kind,
    kind,
    claims: ["assistant/chunk", "assistant/message", "step/end", "turn/end"],
    fold(event, ctx) {
      switch (event.type) {
        case "assistant/chunk":
          return chunk(event, ctx);
        case "assistant/message":
          return message(event, ctx);
        case "step/end":
          return end(event, ctx, [stepKey(event.data)]);
        default: {
          const turn = String(event.data.turn);
          const keys = [...stateOf(ctx).steps.keys()].filter((k) => k.split("/")[0] === turn);
          return end(event, ctx, keys);
        }
      }
    },
  };
}

export const ASSISTANT_TEXT = streamedBlockDefinition("text", "text", "text-delta");
export const THOUGHT = streamedBlockDefinition("thought", "reasoning", "reasoning-delta");

/** A call shown by its tool's name, kind "other" (the fold does not know the tools). */
export function defaultPresent(name, _input) {
  return { title: name, kind: "other", locations: [] };
}

/** The model's arguments as JSON, or the raw text if they are not valid JSON. */
export function parseArguments(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** A tool call, from its streamed arguments through its `tool/call` to its result. */
export function toolCallDefinition(present = defaultPresent) {
  const stateOf = (ctx) => {
    for (const key of ["steps", "status", "names"]) getOrSet(ctx.state, key, () => new Map());
    return ctx.state;
  };

  function start(event, ctx, callId, name, args, known = {}) {
    const { data } = event;
    const id = `tool/${callId}`;
    const s = stateOf(ctx);
    const key = stepKey(data);
    if (!s.steps.has(key)) s.steps.set(key, []);
    s.steps.get(key).push(id);
    s.status.set(id, "pending");
    s.names.set(id, name);
    ctx.start({
      id,
      kind: "tool",
      seq: event.seq,
      lastSeq: event.seq,
      turn: data.turn,
      step: data.step,
      callId,
      name,
      title: name,
      toolKind: "other",
      status: "pending",
      arguments: args,
      input: null,
      output: null,
      rawOutput: null,
      locations: [],
      childSessionId: null,
      ...known,
    });
  }

  function delta(event, ctx, chunk) {
    const id = `tool/${chunk.id}`;
    const name = chunk.name;
    if (!ctx.has(id)) {
      start(event, ctx, chunk.id, name || "", chunk.argumentsDelta);
      return;
    }
    const s = stateOf(ctx);
    const changed = { lastSeq: event.seq };
    if (typeof name === "string" && !s.names.get(id)) {
      s.names.set(id, name);
      changed.name = name;
      changed.title = name;
    }
    ctx.update(id, changed, { arguments: chunk.argumentsDelta });
  }

  return {
    name: "tool",
    claims: [
      "assistant/chunk",
      "assistant/message",
      "tool/call",
      "tool/result",
      "subagent/start",
      "step/end",
    ],
    fold(event, ctx) {
      const { data, seq } = event;
      switch (event.type) {
        case "assistant/chunk":
          if (data.chunk.type === "tool-call-delta") delta(event, ctx, data.chunk);
          return;
        case "assistant/message":
          for (const block of data.message.content) {
            if (block.type !== "tool-call") continue;
            const id = `tool/${block.id}`;
            if (ctx.has(id)) {
              ctx.update(id, { lastSeq: seq, name: block.name, arguments: block.arguments });
            } else {
              start(event, ctx, block.id, block.name, block.arguments);
            }
          }
          return;
        case "tool/call": {
          const id = `tool/${data.callId}`;
          const input = parseArguments(data.arguments);
          const shown = present(data.name, input);
          const called = {
            lastSeq: seq,
            name: data.name,
            title: shown.title,
            toolKind: shown.kind,
            status: "in_progress",
            arguments: data.arguments,
            input,
            locations: [...(shown.locations ?? [])],
          };
          if (ctx.has(id)) ctx.update(id, called);
          else start(event, ctx, data.callId, data.name, data.arguments, called);
          stateOf(ctx).status.set(id, "in_progress");
          return;
        }
        case "tool/result": {
          const id = `tool/${data.callId}`;
          const status = data.isError === true ? "failed" : "completed";
          const result = { lastSeq: seq, status, output: data.content };
          if (Object.hasOwn(data, "rawOutput")) result.rawOutput = data.rawOutput;
          if (Object.hasOwn(data, "locations")) result.locations = data.locations;
          if (ctx.has(id)) ctx.update(id, result);
          else start(event, ctx, data.callId, "", "", result); // its call is older than the history held
          stateOf(ctx).status.set(id, status);
          return;
        }
        case "subagent/start": {
          const id = `tool/${data.callId}`;
          if (ctx.has(id)) ctx.update(id, { lastSeq: seq, childSessionId: data.childSessionId });
          return;
        }
        default: {
          const s = stateOf(ctx);
          for (const id of s.steps.get(stepKey(data)) ?? []) {
            if (s.status.get(id) === "pending") {
              s.status.set(id, "failed");
              ctx.update(id, { lastSeq: seq, status: "failed" });
            }
          }
        }
      }
    },
  };
}

// A node the session has one of, replaced by each event that says it anew.
function singletonDefinition(name, claims, field) {
  return {
    name,
    claims: [claims],
    fold(event, ctx) {
      const value = event.data[field];
      if (ctx.has(name)) {
        ctx.update(name, { lastSeq: event.seq, [field]: value });
        return;
      }
      ctx.start({ id: name, kind: name, seq: event.seq, lastSeq: event.seq, [field]: value });
    },
  };
}

export const PLAN = singletonDefinition("plan", "plan/update", "entries");
export const TITLE = singletonDefinition("title", "session/title", "title");

/** Each mode change is a node where it happened. */
export const MODE = {
  name: "mode",
  claims: ["session/mode"],
  fold(event, ctx) {
    const { seq } = event;
    ctx.start({ id: `mode/${seq}`, kind: "mode", seq, lastSeq: seq, modeId: event.data.modeId });
  },
};

/** The registry, in the order definitions receive an event. */
export function defaultDefinitions({ present = defaultPresent } = {}) {
  return [USER_MESSAGE, THOUGHT, ASSISTANT_TEXT, toolCallDefinition(present), PLAN, TITLE, MODE];
}
