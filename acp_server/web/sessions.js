// The viewer's `/`: the store's sessions, most recently active first, kept live with
// `session.list.follow` and its `session.listChanged` notifications (SPEC 3.5), or listed once
// with ACP `session/list` by a server without them; and a new session (`session/new`) in a
// directory typed or chosen among the known sessions' ones.

import { METHOD_NOT_FOUND, RpcError } from "./connection.js";
import { el } from "./dom.js";

const MAX_LIST_PAGES = 40;

/** The sessions after one `session.listChanged` change, by id. */
export function applyListChange(sessions, change, session) {
  const others = sessions.filter((s) => s.sessionId !== session.sessionId);
  return change === "deleted" ? others : [...others, session];
}

/** Most recently active first. */
export function newestFirst(sessions) {
  return [...sessions].sort((a, b) => (b.updatedAt ?? "").localeCompare(a.updatedAt ?? ""));
}

/** The known sessions' directories, the most recently active one first, each once. */
export function knownDirectories(sessions) {
  return [...new Set(newestFirst(sessions).map((s) => s.cwd).filter(Boolean))];
}

/**
 * `/`. `view` gives `{app, crumb, state, setStatus, sessionHref, formatTime, relativeTime}`;
 * `state.sessions` lists what is shown, `state.listLive` says whether it is kept live.
 */
export class SessionList {
  constructor(connection, view) {
    this.connection = connection;
    this.view = view;
    this.sessions = [];
    this.subscriptionId = null;
  }

  async start() {
    const { state, crumb } = this.view;
    state.state = "listing";
    crumb.replaceChildren(el("span", { text: "Sessions" }));
    try {
      await this.follow();
    } catch (error) {
      if (!(error instanceof RpcError && error.code === METHOD_NOT_FOUND)) throw error;
      this.sessions = await this.listOnce();
      state.listLive = false;
    }
    this.draw();
    state.state = "listed";
  }

  async follow() {
    const pending = [];
    // Changes may come before the answer that says which subscription they are of.
    const stop = this.connection.onNotification("session.listChanged", (params) => {
      if (this.subscriptionId === null) pending.push(params);
      else this.changed(params);
    });
    try {
      const result = await this.connection.request("session.list.follow", {});
      this.subscriptionId = result.subscriptionId;
      this.sessions = result.sessions;
    } catch (error) {
      stop();
      throw error;
    }
    this.view.state.listLive = true;
    for (const params of pending) this.changed(params, false);
  }

  changed(params, draw = true) {
    if (params?.subscriptionId !== this.subscriptionId) return;
    this.sessions = applyListChange(this.sessions, params.change, params.session);
    if (draw) this.draw();
  }

  async listOnce() {
    const sessions = [];
    let cursor;
    for (let page = 0; page < MAX_LIST_PAGES; page++) {
      const result = await this.connection.request("session/list", cursor ? { cursor } : {});
      sessions.push(...result.sessions);
      cursor = result.nextCursor;
      if (!cursor) break;
    }
    return sessions;
  }

  draw() {
    const { app, state, setStatus } = this.view;
    const sessions = newestFirst(this.sessions);
    state.sessions = sessions.map(({ sessionId, title, cwd, updatedAt, running }) => ({
      sessionId,
      title: title ?? null,
      cwd,
      updatedAt: updatedAt ?? null,
      running: running ?? null,
    }));
    const count = `${sessions.length} session${sessions.length === 1 ? "" : "s"}`;
    setStatus(state.listLive ? "live" : "ok", state.listLive ? `${count}, live` : count);
    const focused = document.activeElement?.id;
    const typed = app.querySelector("#new-cwd")?.value;
    const body = sessions.length
      ? el("ol", { class: "session-list" }, sessions.map((s) => this.item(s)))
      : el("div", { class: "empty" }, el("h2", { text: "No sessions yet" }), el("p", { text: "Start one above, or from any client of this server." }));
    app.replaceChildren(el("section", { class: "sessions" }, el("div", { class: "sessions-head" }, el("h1", { text: "Sessions" }), this.newForm(sessions, typed)), body));
    if (focused) document.getElementById(focused)?.focus();
  }

  item(session) {
    const { sessionHref, formatTime, relativeTime } = this.view;
    return el(
      "li",
      { class: "session-item", "data-session-id": session.sessionId, "data-running": session.running === true },
      el(
        "a",
        { href: sessionHref(session.sessionId) },
        el("span", { class: `title${session.title ? "" : " untitled"}` }, session.title ?? "Untitled session",
          session.running ? el("span", { class: "badge in_progress running", text: "running" }) : null),
        el("span", { class: "cwd", title: session.cwd }, session.cwd),
        el("time", { class: "updated", dateTime: session.updatedAt ?? "", title: session.updatedAt ? formatTime(session.updatedAt) : "" },
          session.updatedAt ? relativeTime(session.updatedAt) : ""),
        el("code", { class: "id" }, session.sessionId),
      ),
    );
  }

  newForm(sessions, typed) {
    const directories = knownDirectories(sessions);
    const input = el("input", { id: "new-cwd", name: "cwd", required: true, list: "known-cwds", placeholder: "/path/to/project", "aria-label": "Directory of the new session", value: typed ?? directories[0] ?? "" });
    const error = el("p", { class: "new-error", role: "alert", hidden: true });
    const form = el(
      "form",
      { class: "new-session" },
      input,
      el("datalist", { id: "known-cwds" }, directories.map((d) => el("option", { value: d }))),
      el("button", { type: "submit", class: "new", text: "New session" }),
      error,
    );
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        const { sessionId } = await this.connection.request("session/new", { cwd: input.value.trim(), mcpServers: [] });
        // Closed here, so that the session's page, on a connection of its own, can resume it.
        await this.connection.request("session/close", { sessionId });
        window.location.assign(this.view.sessionHref(sessionId));
      } catch (failure) {
        error.textContent = `No new session: ${failure.message}`;
        error.hidden = false;
      }
    });
    return form;
  }
}
