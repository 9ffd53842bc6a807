// The session viewer served by `acp-server serve --listen` (SPEC 3.4), a full ACP client.
//
// `/` lists the store's sessions, live (`sessions.js`), and starts new ones; `/sessions/<id>`
// shows one session's conversation, folded from its events by `fold.js` (with `present.js`'s
// titles, replies and turn endings), following it live (`session.follow` through `client.js`'s
// `Follow`) and paging older history in when scrolled to the top (`Follow.loadOlder`). The page
// acts on the session through ACP (`controls.js`: `session/resume`, prompts, cancel,
// permission, mode and model) and searches it (`search.js`).
//
// The token: the server prints the viewer's address with `?token=`. It is read from the
// address once, kept in sessionStorage (this tab only) and taken out of the address bar, so it
// is neither bookmarked nor shown; the links between pages carry no token.
//
// Nothing is global except `window.acpViewer`, a read-only view of the viewer's state for
// tests and for the curious (see `STATUS` below).

import { AcpConnection, Follow, HistoryProtocolError, RpcError } from "./client.js";
import { SessionControls } from "./controls.js";
import { el } from "./dom.js";
import { ConversationFold } from "./fold.js";
import { formatBytes, formatTime, number, relativeTime } from "./format.js";
import { viewerDefinitions } from "./present.js";
import { renderNode } from "./render.js";
import { SessionSearch } from "./search.js";
import { SessionList } from "./sessions.js";
import { CountingSocket, countRecords, figures } from "./traffic.js";

const TOKEN_KEY = "acp-server.token";
const PROTOCOL_VERSION = 1;
const UNKNOWN_SESSION = -32002;
const DEFAULT_PAGE_MESSAGES = 50;
/** Pixels from the top of the conversation at which older history is paged in. */
const OLDER_MARGIN = 80;
/** Pixels from the bottom within which the view sticks to the bottom as text streams in. */
const STICK_MARGIN = 48;

// ---------------------------------------------------------------------------------------------
// State, and the read-only status object.

const state = {
  state: "starting", // starting | connecting | listing | listed | loading | following | ended | error
  error: null, // {kind, message} once something failed
  sessionId: null,
  sessions: null, // the sessions listed at `/`
  firstSeq: null,
  lastSeq: null,
  events: 0, // events the journal holds
  hasOlder: false,
  liveEvents: 0, // `session.event` frames received
  pagesLoaded: 0, // older pages prepended
  endReason: null,
  listLive: null, // at `/`: whether the list is kept live (`session.list.follow`)
  // The session's ACP side (controls.js): attached (resumed here), readOnly (open elsewhere),
  // running (a prompt of this page's unanswered), modeId, model, commands (names),
  // permissions (dialogs open), usage ({used, size, cost}), lastStopReason.
  attached: false,
  readOnly: false,
  running: false,
  modeId: null,
  model: null,
  commands: [],
  permissions: 0,
  usage: null,
  lastStopReason: null,
  // search.js: searchSupported (null until asked), search ({query, hits, hasMore}); jumpedTo:
  // the node id of the last hit jumped to.
  searchSupported: null,
  search: null,
  jumpedTo: null,
};

/**
 * `window.acpViewer`: read-only; every property is read when asked for.
 * - `state`: "starting", "connecting", "listing", "listed" (`/` shown), "loading", "following"
 *   (a session shown and followed), "ended" (the follow ended; `endReason` says why) or "error".
 * - `error`: null, or `{kind, message}`; kind is "no-token", "token-refused", "origin-refused",
 *   "unreachable", "connection-lost", "unknown-session", "protocol" or "server".
 * - `sessionId`, `sessions` (at `/`: `[{sessionId, title, cwd, updatedAt, running}]` as shown,
 *   in order), `listLive`.
 * - `firstSeq`, `lastSeq`, `events`, `hasOlder`: the journal's; `liveEvents`: live frames
 *   received; `pagesLoaded`: older pages prepended.
 * - The session's ACP side and search: see the comments in `state` above.
 */
const STATUS = Object.freeze(
  Object.defineProperties(
    {},
    Object.fromEntries(
      Object.keys(state).map((key) => [key, { enumerable: true, get: () => structuredClone(state[key]) }]),
    ),
  ),
);
Object.defineProperty(window, "acpViewer", { value: STATUS });

// ---------------------------------------------------------------------------------------------
// The page.

const app = document.getElementById("app");
const crumb = document.getElementById("crumb");
const statusPill = document.getElementById("status");

function setStatus(kind, text) {
  statusPill.hidden = !text;
  statusPill.className = `status ${kind}`;
  statusPill.textContent = text ?? "";
}

function showError(kind, message, hint) {
  state.state = "error";
  state.error = { kind, message };
  setStatus("bad", kind === "connection-lost" ? "disconnected" : "error");
  const box = el(
    "div",
    { class: "error-box", role: "alert", "data-error": kind },
    el("h2", { text: message }),
    hint ? el("p", { text: hint }) : null,
  );
  // Over a conversation shown, the error is a banner above it: what arrived stays readable.
  const shown = app.querySelector(".session .main");
  const banner = document.querySelector(".error-box");
  if (banner) banner.replaceWith(box);
  else if (shown) shown.prepend(box);
  else app.replaceChildren(box);
}

// ---------------------------------------------------------------------------------------------
// The token and the connection.

function takeToken() {
  const url = new URL(window.location.href);
  const given = url.searchParams.get("token");
  if (given !== null) {
    sessionStorage.setItem(TOKEN_KEY, given);
    url.searchParams.delete("token");
    history.replaceState(history.state, "", url.pathname + url.search + url.hash);
  }
  return sessionStorage.getItem(TOKEN_KEY);
}

/** Why the WebSocket could not open: the same address asked over plain HTTP answers 401 for a
 * refused token and 403 for a refused origin (a browser's WebSocket never says). */
async function diagnose(token) {
  try {
    const response = await fetch(`/acp?token=${encodeURIComponent(token)}`, { cache: "no-store" });
    if (response.status === 401) return "token-refused";
    if (response.status === 403) return "origin-refused";
    return "server";
  } catch {
    return "unreachable";
  }
}

const ERRORS = {
  "no-token": [
    "No access token",
    "Open the viewer with the address acp-server serve printed at start: it ends in ?token=….",
  ],
  "token-refused": [
    "The server refused the access token",
    "Open the address acp-server serve printed at start: a token from another run is not valid.",
  ],
  "origin-refused": ["The server does not accept connections from this page's origin", null],
  unreachable: ["Cannot reach the server", "Is acp-server serve --listen still running?"],
  server: ["The server did not accept the connection", null],
};

async function connect() {
  const token = takeToken();
  if (!token) {
    showError("no-token", ...ERRORS["no-token"]);
    return null;
  }
  state.state = "connecting";
  setStatus("wait", "connecting");
  const scheme = window.location.protocol === "https:" ? "wss" : "ws";
  const url = `${scheme}://${window.location.host}/acp?token=${encodeURIComponent(token)}`;
  let connection;
  try {
    connection = await AcpConnection.open(url, { WebSocket: CountingSocket });
  } catch {
    const kind = await diagnose(token);
    if (kind === "token-refused") sessionStorage.removeItem(TOKEN_KEY);
    showError(kind, ...ERRORS[kind]);
    return null;
  }
  const request = connection.request.bind(connection);
  connection.request = async (method, params) => {
    const result = await request(method, params);
    if (method === "session.page" || method === "session.follow") countRecords(result?.records);
    return result;
  };
  connection.onNotification("session.event", () => {
    state.liveEvents += 1;
    figures.decoded += 1;
  });
  connection.closed.then(() => {
    if (state.state !== "error" && !leaving) {
      showError(
        "connection-lost",
        "Connection to the server lost",
        "What is shown is what arrived before; reload the page to reconnect.",
      );
    }
  });
  await connection.request("initialize", {
    protocolVersion: PROTOCOL_VERSION,
    // Notices: a prompt queued behind a running turn (this page's or another client's) is
    // said so, as every attached client is told.
    clientCapabilities: { session: { notices: {} } },
    clientInfo: { name: "acp-server-viewer", version: "1" },
  });
  return connection;
}

/** Set when the viewer closes its connection itself (leaving the page, the list shown). */
let leaving = false;
window.addEventListener("pagehide", () => (leaving = true));

function sessionHref(sessionId) {
  return `/sessions/${encodeURIComponent(sessionId)}`;
}

// ---------------------------------------------------------------------------------------------
// `/sessions/<id>`: one conversation.

/** A passing message under the conversation (a refused prompt, a failed mode change). */
function say(message) {
  const line = document.getElementById("said");
  if (line) {
    line.textContent = message;
    line.hidden = false;
  }
}

class SessionView {
  constructor(connection, sessionId, pageMessages) {
    this.connection = connection;
    this.sessionId = sessionId;
    this.pageMessages = pageMessages;
    this.follow = null;
    this.fold = null;
    this.elements = new Map(); // node id -> element
    this.open = new Set(); // ids of the details the reader opened
    this.closed = new Set(); // and of those the reader closed
    this.target = null; // the id of the node of the search hit jumped to
    this.loadingOlder = false;
    this.counts = { messages: 0, toolCalls: 0, used: null, turnOpen: false };
    this.address = { kind: "session", sessionId };

    this.controls = new SessionControls(connection, sessionId, state, { onError: say });
    this.search = new SessionSearch(connection, this.address, state, { jump: (seq) => this.jump(seq), onError: say });
    this.list = el("div", { class: "nodes" });
    this.older = el("div", { class: "older" });
    this.scroller = el("section", { class: "conversation", id: "conversation" }, this.older, this.list);
    this.figures = el("dl", { class: "figures" });
    this.heading = el("h1", { class: "session-title" });
    this.meta = el("p", { class: "session-meta" });
    const searchToggle = el("button", { type: "button", class: "search-toggle", text: "Search", "aria-expanded": "false", "aria-controls": "search-panel" });
    const searchPanel = el("div", { id: "search-panel", hidden: true }, this.search.element);
    searchToggle.addEventListener("click", () => {
      searchPanel.hidden = !searchPanel.hidden;
      searchToggle.setAttribute("aria-expanded", String(!searchPanel.hidden));
      // Open, the panel has its own Search button: this one closes it.
      searchToggle.textContent = searchPanel.hidden ? "Search" : "Close search";
      if (!searchPanel.hidden) this.search.input.focus();
    });
    this.panel = el(
      "aside",
      { class: "panel" },
      el("h2", { text: "Session" }),
      this.controls.settings,
      el("details", { class: "log-figures" }, el("summary", { text: "Log" }), this.figures),
    );
    app.replaceChildren(
      el(
        "div",
        { class: "session" },
        el(
          "div",
          { class: "main" },
          el("header", { class: "session-head" }, el("div", { class: "head-text" }, this.heading, this.meta), searchToggle),
          searchPanel,
          this.scroller,
          el("p", { id: "said", class: "said", role: "status", hidden: true }),
          this.controls.composer,
        ),
        this.panel,
      ),
    );
    this.scroller.addEventListener("scroll", () => this.maybeLoadOlder());
    this.list.addEventListener("toggle", (event) => this.toggled(event), true);
    // Leaving by the viewer's own links closes the session first, so that the next page (on
    // a connection of its own) can resume it at once.
    document.addEventListener("click", (event) => this.leaveBy(event));
  }

  async leaveBy(event) {
    const link = event.target.closest?.("a[href]");
    if (!link || link.origin !== window.location.origin || event.defaultPrevented) return;
    if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    await this.controls.detach();
    window.location.assign(link.href);
  }

  async start() {
    state.state = "loading";
    state.sessionId = this.sessionId;
    crumb.replaceChildren(el("a", { href: "/", text: "Sessions" }), el("span", { class: "sep", text: "/" }), el("code", { text: this.sessionId }));
    setStatus("wait", "loading");
    this.heading.textContent = "Session";
    this.follow = await Follow.start(this.connection, this.address, {
      maxMessages: this.pageMessages,
      onEvents: (events) => this.live(events),
      onRewind: () => this.rebuild(),
      onEnd: (reason) => this.ended(reason),
      onError: (error) => showError("protocol", "The server sent broken history", error.message),
    });
    this.rebuild();
    this.scroller.scrollTop = this.scroller.scrollHeight;
    state.state = "following";
    setStatus("live", "following");
    this.maybeLoadOlder();
    const cwd = this.follow.header?.cwd;
    if (cwd) await this.controls.attach(cwd);
  }

  /** Show the node holding event `seq`: older history paged in until the journal holds it,
   * then the node scrolled to, opened and marked. */
  async jump(seq) {
    const journal = this.follow.journal;
    this.loadingOlder = true; // the pages come from here, not from scrolling
    try {
      while (journal.hasOlder && (journal.length === 0 || journal.firstSeq > seq)) {
        await this.follow.loadOlder();
        state.pagesLoaded += 1;
        this.rebuild();
      }
    } finally {
      this.loadingOlder = false;
    }
    let target = null;
    for (const node of this.fold.nodes()) if (node.seq <= seq && (target === null || node.seq >= target.seq)) target = node;
    if (target === null) return;
    this.open.add(target.id);
    this.closed.delete(target.id);
    for (const marked of this.list.querySelectorAll(".hit-target")) marked.classList.remove("hit-target");
    this.target = target.id;
    this.redraw(target.id);
    // The conversation alone scrolls (not the page around it): the hit to its middle.
    const shown = this.elements.get(target.id).getBoundingClientRect();
    const view = this.scroller.getBoundingClientRect();
    this.scroller.scrollTop += shown.top - view.top - Math.max(0, (view.height - shown.height) / 2);
    state.jumpedTo = target.id;
  }

  /** A node's element, drawn afresh and kept by its id; the search hit jumped to stays marked. */
  draw(node) {
    const element = renderNode(node, this.open, this.closed);
    if (node.id === this.target) element.classList.add("hit-target");
    this.elements.set(node.id, element);
    return element;
  }

  /** Draw a node shown already afresh, in its place. */
  redraw(id) {
    const old = this.elements.get(id);
    old.replaceWith(this.draw(this.fold.node(id)));
  }

  toggled(event) {
    const id = event.target?.dataset?.nodeId;
    if (!id) return;
    if (event.target.open) {
      this.open.add(id);
      this.closed.delete(id);
    } else {
      this.open.delete(id);
      this.closed.add(id);
    }
  }

  /** Fold the whole journal again and draw every node: after older history is prepended (a
   * fold takes events in seq order from its first) or a rewind. */
  rebuild() {
    const journal = this.follow.journal;
    this.fold = new ConversationFold(viewerDefinitions());
    this.counts = { messages: 0, toolCalls: 0, used: null, turnOpen: false };
    const events = journal.events;
    this.fold.feedAll(events);
    for (const event of events) this.count(event);
    this.elements.clear();
    const drawn = this.fold.nodes().map((node) => this.draw(node));
    this.list.replaceChildren(...drawn);
    this.drawTitle();
    this.drawFigures();
  }

  count(event) {
    if (event.type === "assistant/message" && event.data.usage) {
      this.counts.used = event.data.usage.inputTokens + event.data.usage.outputTokens;
    }
    if (event.type === "turn/start") this.counts.turnOpen = true;
    else if (event.type === "turn/end") this.counts.turnOpen = false;
    if (event.type === "user/message" || event.type === "assistant/message") this.counts.messages += 1;
    else if (event.type === "tool/call") this.counts.toolCalls += 1;
  }

  /** Events the follow gained, in seq order, each once. */
  live(events) {
    const stick = this.scroller.scrollHeight - this.scroller.scrollTop - this.scroller.clientHeight < STICK_MARGIN;
    const changed = new Set();
    for (const event of events) {
      this.count(event);
      for (const change of this.fold.feed(event)) {
        const id = change.op === "start" ? change.node.id : change.id;
        if (change.op === "start") this.list.append(this.draw(change.node));
        else changed.add(id);
      }
    }
    for (const id of changed) this.redraw(id);
    this.drawTitle();
    this.drawFigures();
    if (stick) this.scroller.scrollTop = this.scroller.scrollHeight;
  }

  async maybeLoadOlder() {
    const journal = this.follow?.journal;
    if (!journal || this.loadingOlder || !journal.hasOlder) return;
    if (this.scroller.scrollTop > OLDER_MARGIN) return;
    this.loadingOlder = true;
    this.drawOlder();
    try {
      const fromBottom = this.scroller.scrollHeight - this.scroller.scrollTop;
      await this.follow.loadOlder();
      state.pagesLoaded += 1;
      this.rebuild();
      this.scroller.scrollTop = this.scroller.scrollHeight - fromBottom;
    } catch (error) {
      if (error instanceof HistoryProtocolError) showError("protocol", "The server sent broken history", error.message);
      else if (state.state !== "error") showError("server", "Older history could not be read", error.message);
      return;
    } finally {
      this.loadingOlder = false;
    }
    this.drawOlder();
    // Still at the top (the page was short): the next one.
    this.maybeLoadOlder();
  }

  ended(reason) {
    if (state.state === "error") return;
    state.state = "ended";
    state.endReason = reason;
    if (reason === "disconnected") return; // said by the connection's own handler
    setStatus("idle", "not following");
    this.older.after(el("p", { class: "notice", text: `Following ended (${reason}); reload to follow again.` }));
  }

  drawTitle() {
    const title = this.fold.node("title")?.title;
    this.heading.textContent = title || "Untitled session";
    this.heading.classList.toggle("untitled", !title);
    document.title = `${title || this.sessionId} · acp-server`;
    const header = this.follow.header ?? {};
    this.meta.replaceChildren(
      header.cwd ? el("span", { class: "cwd", text: header.cwd }) : null,
      header.createdAt !== undefined ? el("span", { text: `started ${formatTime(header.createdAt)}` }) : null,
    );
  }

  drawOlder() {
    const journal = this.follow.journal;
    this.older.textContent = this.loadingOlder
      ? "Loading older messages…"
      : journal.hasOlder
        ? "Scroll up for older messages"
        : "Beginning of the session";
    this.older.className = `older${journal.hasOlder ? " more" : ""}`;
  }

  drawFigures() {
    const journal = this.follow.journal;
    const held = journal.length;
    state.firstSeq = held ? journal.firstSeq : null;
    state.lastSeq = held ? journal.lastSeq : null;
    state.events = held;
    state.hasOlder = journal.hasOlder;
    this.drawOlder();
    this.controls.loggedUsage(this.counts.used);
    this.controls.loggedTurn(this.counts.turnOpen);
    const rows = [
      ["Events", number(held), "events"],
      ["First seq", held ? number(journal.firstSeq) : "–", "first-seq"],
      ["Last seq", held ? number(journal.lastSeq) : "–", "last-seq"],
      ["Messages", number(this.counts.messages), "messages"],
      ["Tool calls", number(this.counts.toolCalls), "tool-calls"],
      ["Older history", journal.hasOlder ? "not loaded yet" : "all loaded", "older"],
      ["Chunk rows received", number(figures.rows), "rows"],
      ["Records received", number(figures.records), "records"],
      ["Events decoded", number(figures.decoded), "decoded"],
      ["Live events", number(state.liveEvents), "live"],
      ["Bytes received", formatBytes(figures.bytes), "bytes"],
    ];
    this.figures.replaceChildren(
      ...rows.flatMap(([label, value, key]) => [el("dt", { text: label }), el("dd", { text: value, "data-figure": key })]),
    );
  }
}

// ---------------------------------------------------------------------------------------------
// Start.

function pageMessages() {
  // `?messages=N`: messages per history page (small values show paging on short sessions).
  const given = Number.parseInt(new URL(window.location.href).searchParams.get("messages") ?? "", 10);
  return Number.isInteger(given) && given > 0 ? given : DEFAULT_PAGE_MESSAGES;
}

async function main() {
  const path = window.location.pathname;
  const match = /^\/sessions\/([^/]+)$/.exec(path);
  const connection = await connect();
  if (connection === null) return;
  try {
    if (match === null) {
      const view = { app, crumb, state, setStatus, sessionHref, formatTime, relativeTime };
      await new SessionList(connection, view).start();
      return;
    }
    const sessionId = decodeURIComponent(match[1]);
    await new SessionView(connection, sessionId, pageMessages()).start();
  } catch (error) {
    if (state.state === "error") return;
    if (error instanceof RpcError && error.code === UNKNOWN_SESSION) {
      showError("unknown-session", "No such session", `This store holds no session ${match ? decodeURIComponent(match[1]) : ""}.`);
    } else if (error instanceof HistoryProtocolError) {
      showError("protocol", "The server sent broken history", error.message);
    } else if (error instanceof RpcError) {
      showError("server", "The server refused the request", error.message);
    } else {
      showError("server", "Something went wrong", String(error?.message ?? error));
    }
  }
}

main();
