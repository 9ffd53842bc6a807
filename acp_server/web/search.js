// Search in one session (`session.search`, SPEC 3.5): a query box, its hits newest first with
// their snippets, more hits paged with `beforeSeq`, and each hit a button that jumps to where
// it is in the conversation (the viewer pages older history in until it holds the hit). A
// server without the method (-32601) leaves the session without a search box, saying so once.

import { METHOD_NOT_FOUND, RpcError } from "./connection.js";
import { el } from "./dom.js";

const HITS_PER_PAGE = 20;

const KINDS = { user_message: "You", agent_message: "Assistant", agent_thought: "Thought", tool_result: "Tool result" };

/** `state.search`: null until asked; then `{query, hits: [seq...], hasMore}`; `state.searchSupported`. */
export class SessionSearch {
  constructor(connection, address, state, { jump, onError }) {
    this.connection = connection;
    this.address = address;
    this.state = state;
    this.jump = jump;
    this.onError = onError;
    this.hits = [];
    state.searchSupported = null;
    state.search = null;

    this.input = el("input", { type: "search", id: "search", placeholder: "Search this session", "aria-label": "Search this session" });
    this.regex = el("input", { type: "checkbox", id: "search-regex" });
    this.list = el("ol", { class: "hits", "aria-label": "Search results" });
    this.more = el("button", { type: "button", class: "link more-hits", text: "More results", hidden: true });
    this.summary = el("p", { class: "hits-summary", hidden: true });
    this.form = el(
      "form",
      { class: "search", role: "search" },
      el("div", { class: "search-row" }, this.input, el("label", { class: "regex", for: "search-regex" }, this.regex, " regex"), el("button", { type: "submit", text: "Search" })),
    );
    this.element = el("div", { class: "search-box" }, this.form, this.summary, this.list, this.more);
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.run(false);
    });
    this.more.addEventListener("click", () => this.run(true));
  }

  async run(more) {
    const query = this.input.value;
    if (!query) {
      this.clear();
      return;
    }
    const params = { address: this.address, query, regex: this.regex.checked, limit: HITS_PER_PAGE };
    if (more && this.hits.length) params.beforeSeq = this.hits[this.hits.length - 1].seq;
    let result;
    try {
      result = await this.connection.request("session.search", params);
    } catch (error) {
      if (error instanceof RpcError && error.code === METHOD_NOT_FOUND) {
        this.unsupported();
        return;
      }
      this.onError(`The search failed: ${error.message}`);
      return;
    }
    this.state.searchSupported = true;
    if (!more) this.hits = [];
    this.hits.push(...result.hits);
    this.state.search = { query, hits: this.hits.map((h) => h.seq), hasMore: result.hasMore };
    this.draw(result.hasMore);
  }

  clear() {
    this.hits = [];
    this.state.search = null;
    this.list.replaceChildren();
    this.summary.hidden = true;
    this.more.hidden = true;
  }

  unsupported() {
    this.state.searchSupported = false;
    this.element.replaceChildren(el("p", { class: "notice search-unsupported", text: "This server cannot search sessions." }));
  }

  draw(hasMore) {
    this.summary.hidden = false;
    this.summary.textContent = this.hits.length ? `${this.hits.length}${hasMore ? "+" : ""} result${this.hits.length === 1 ? "" : "s"}, newest first` : "No results";
    this.more.hidden = !hasMore;
    this.list.replaceChildren(
      ...this.hits.map((hit) => {
        const button = el(
          "button",
          { type: "button", class: "hit", "data-seq": hit.seq },
          el("span", { class: "hit-kind", text: KINDS[hit.kind] ?? hit.kind }),
          el("span", { class: "hit-snippet", text: hit.snippet }),
        );
        button.addEventListener("click", () => this.jump(hit.seq));
        return el("li", {}, button);
      }),
    );
  }
}
