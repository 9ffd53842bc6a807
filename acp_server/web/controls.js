// The viewer acting on a session through ACP (SPEC 4): it attaches with `session/resume` (no
// replay: the conversation is drawn from the log by the follow), then prompts, cancels,
// answers `session/request_permission`, and changes the mode and the model. What the session
// says back in `session/update` (commands, mode, config options, usage) fills the prompt box's
// completion and the side panel, and its notices show above the prompt box. The conversation
// itself is never drawn from these updates.

import { RpcError } from "./connection.js";
import { commandHint, completed, completions, typedCommand } from "./commands.js";
import { el } from "./dom.js";
import { contextText, costText } from "./format.js";
import { renderDiff } from "./render.js";

const SESSION_IN_USE = -32011;
const MODEL_REQUEST_FAILED = -32012;

/** What a permission dialog shows of the call: an edit's change as a diff, else its input. */
function permissionInput(input) {
  if (input === undefined) return null;
  const { path, oldText, newText } = input ?? {};
  if ([path, oldText, newText].every((value) => typeof value === "string")) {
    return renderDiff({ path, oldText, newText });
  }
  return el("pre", { class: "permission-input", text: typeof input === "string" ? input : JSON.stringify(input, null, 2) });
}

/**
 * One session's controls: the prompt box (`composer`), the settings for the side panel
 * (`settings`) and the permission dialog. `state` is the viewer's status object (its keys
 * `attached`, `readOnly`, `running`, `modeId`, `model`, `commands`, `permissions`, `usage` are
 * kept here); `onError(message)` says what failed.
 */
export class SessionControls {
  constructor(connection, sessionId, state, { onError }) {
    this.connection = connection;
    this.sessionId = sessionId;
    this.state = state;
    this.onError = onError;
    this.commands = [];
    this.choice = 0; // the completion highlighted
    this.pendingPrompts = 0;
    this.turnInLog = false; // the log's latest turn has started and not ended
    this.permissions = new Set(); // settle functions of the open permission dialogs
    Object.assign(state, { attached: false, readOnly: false, running: false, modeId: null, model: null, commands: [], permissions: 0, usage: null });

    this.input = el("textarea", { id: "prompt", rows: 2, placeholder: "Message the agent; / for commands", "aria-label": "Prompt", disabled: true });
    this.send = el("button", { type: "submit", class: "send", text: "Send", disabled: true });
    this.stop = el("button", { type: "button", class: "cancel", text: "Stop", hidden: true });
    this.list = el("ul", { class: "completions", role: "listbox", id: "completions", hidden: true });
    this.note = el("p", { class: "composer-note", hidden: true });
    this.notice = el("p", { class: "composer-notice", role: "status", hidden: true });
    this.composer = el(
      "form",
      { class: "composer", "aria-label": "Prompt the session" },
      this.list,
      this.note,
      this.notice,
      el("div", { class: "composer-row" }, this.input, el("div", { class: "composer-actions" }, this.send, this.stop)),
    );
    this.composer.addEventListener("submit", (event) => {
      event.preventDefault();
      this.submit();
    });
    this.input.addEventListener("input", () => this.complete());
    this.input.addEventListener("keydown", (event) => this.key(event));
    this.stop.addEventListener("click", () => this.cancel());

    // Hidden until the session says what can be chosen (a session watched only never does).
    this.modeSelect = el("select", { id: "mode", "aria-label": "Mode", hidden: true });
    this.modelSelect = el("select", { id: "model", "aria-label": "Model", hidden: true });
    this.modeUnknown = el("span", { class: "unknown", text: "–" });
    this.modelUnknown = el("span", { class: "unknown", text: "–" });
    this.modeSelect.addEventListener("change", () => this.setMode(this.modeSelect.value));
    this.modelSelect.addEventListener("change", () => this.setModel(this.modelSelect.value));
    this.context = el("dd", { "data-figure": "context", text: "–" });
    this.cost = el("dd", { "data-figure": "cost", text: "–" });
    this.turn = el("dd", { "data-figure": "turn", text: "–" });
    this.optionSelects = new Map(); // the other config options' selects (reasoning, ...), by id
    this.contextLabel = el("dt", { text: "Context used" });
    this.settings = el(
      "dl",
      { class: "settings" },
      el("dt", {}, el("label", { for: "model", text: "Model" })), el("dd", {}, this.modelSelect, this.modelUnknown),
      el("dt", {}, el("label", { for: "mode", text: "Mode" })), el("dd", {}, this.modeSelect, this.modeUnknown),
      this.contextLabel, this.context,
      el("dt", { text: "Cost" }), this.cost,
      el("dt", { text: "Turn" }), this.turn,
    );

    connection.onNotification("session/update", (params) => {
      if (params?.sessionId === this.sessionId) this.update(params.update);
    });
    connection.onRequest("session/request_permission", (params, { signal }) => this.askPermission(params, signal));
  }

  /** `session/resume`: from now on this page drives the session. A session open elsewhere is
   * watched only, saying so, with a way to try again. */
  async attach(cwd) {
    let result;
    try {
      result = await this.connection.request("session/resume", { sessionId: this.sessionId, cwd, mcpServers: [] });
    } catch (error) {
      if (!(error instanceof RpcError)) throw error;
      this.watchOnly(error.code === SESSION_IN_USE ? "This session is open in another client: watching only." : `Cannot prompt this session: ${error.message}`, cwd);
      return;
    }
    this.state.attached = true;
    this.state.readOnly = false;
    this.note.hidden = true;
    if (result?.modes) this.showModes(result.modes.availableModes, result.modes.currentModeId);
    if (result?.configOptions) this.showConfig(result.configOptions);
    this.input.disabled = false;
    this.send.disabled = false;
    this.drawTurn();
  }

  watchOnly(message, cwd) {
    this.state.readOnly = true;
    const retry = el("button", { type: "button", class: "link", text: "Try again" });
    retry.addEventListener("click", () => this.attach(cwd));
    this.note.replaceChildren(message, " ", retry);
    this.note.hidden = false;
  }

  /** Close the session here (before leaving the page, so the next page can resume it). */
  async detach() {
    if (!this.state.attached) return;
    this.state.attached = false;
    await this.connection.request("session/close", { sessionId: this.sessionId }).catch(() => {});
  }

  update(update) {
    switch (update?.sessionUpdate) {
      case "available_commands_update":
        this.commands = update.availableCommands ?? [];
        this.state.commands = this.commands.map((c) => c.name);
        this.complete();
        break;
      case "current_mode_update":
        this.state.modeId = update.currentModeId;
        this.modeSelect.value = update.currentModeId;
        break;
      case "config_option_update":
        this.showConfig(update.configOptions ?? []);
        break;
      case "notice":
        // Passing news of the session that its log does not keep ("Prompt queued"), shown
        // until the running turn ends.
        this.notice.textContent = update.description ? `${update.title}. ${update.description}` : update.title;
        this.notice.dataset.severity = update.severity;
        this.notice.hidden = false;
        break;
      case "usage_update":
        this.state.usage = { used: update.used, size: update.size, cost: update.cost ?? null };
        this.context.textContent = contextText(update.used, update.size);
        this.cost.textContent = costText(update.cost);
        break;
      default:
    }
  }

  /** The tokens the log's latest model call used, shown until the session sends its own
   * `usage_update` (which also knows the context window and the cost). */
  loggedUsage(used) {
    if (this.state.usage !== null || used === null) return;
    this.context.textContent = contextText(used, null);
  }

  showModes(modes, current) {
    this.modeSelect.replaceChildren(...modes.map((m) => el("option", { value: m.id, text: m.name, title: m.description ?? "" })));
    this.modeSelect.value = current;
    this.modeSelect.hidden = false;
    this.modeUnknown.hidden = true;
    this.state.modeId = current;
  }

  showConfig(options) {
    const model = options.find((o) => o.id === "model");
    if (model) {
      this.modelSelect.replaceChildren(...model.options.map((o) => el("option", { value: o.value, text: o.name })));
      this.modelSelect.value = model.currentValue;
      this.modelSelect.hidden = false;
      this.modelUnknown.hidden = true;
      this.state.model = model.currentValue;
    }
    const mode = options.find((o) => o.id === "mode");
    if (mode && this.modeSelect.options.length) {
      this.modeSelect.value = mode.currentValue;
      this.state.modeId = mode.currentValue;
    }
    for (const option of options) {
      if (option.id === "model" || option.id === "mode" || option.type !== "select") continue;
      this.optionSelect(option).value = option.currentValue;
    }
  }

  /** The select of another config option, made the first time the session offers it. */
  optionSelect(option) {
    let select = this.optionSelects.get(option.id);
    if (select === undefined) {
      const id = `config-${option.id}`;
      select = el("select", { id, "aria-label": option.name });
      select.addEventListener("change", () => this.setOption(option.id, select));
      this.optionSelects.set(option.id, select);
      this.contextLabel.before(el("dt", {}, el("label", { for: id, text: option.name })), el("dd", {}, select));
    }
    select.replaceChildren(...option.options.map((o) => el("option", { value: o.value, text: o.name })));
    select.dataset.current = option.currentValue;
    return select;
  }

  async setMode(modeId) {
    try {
      await this.connection.request("session/set_mode", { sessionId: this.sessionId, modeId });
      this.state.modeId = modeId;
    } catch (error) {
      this.modeSelect.value = this.state.modeId;
      this.onError(`The mode could not be changed: ${error.message}`);
    }
  }

  async setModel(value) {
    try {
      const result = await this.connection.request("session/set_config_option", { sessionId: this.sessionId, configId: "model", value });
      this.showConfig(result?.configOptions ?? []);
    } catch (error) {
      this.modelSelect.value = this.state.model;
      this.onError(`The model could not be changed: ${error.message}`);
    }
  }

  async setOption(configId, select) {
    try {
      const result = await this.connection.request("session/set_config_option", { sessionId: this.sessionId, configId, value: select.value });
      this.showConfig(result?.configOptions ?? []);
    } catch (error) {
      select.value = select.dataset.current;
      this.onError(`The setting could not be changed: ${error.message}`);
    }
  }

  // The prompt box.

  async submit() {
    const text = this.input.value;
    if (!text.trim() || !this.state.attached) return;
    this.input.value = "";
    this.complete();
    this.pendingPrompts += 1;
    this.drawTurn();
    try {
      const result = await this.connection.request("session/prompt", { sessionId: this.sessionId, prompt: [{ type: "text", text }] });
      this.state.lastStopReason = result?.stopReason ?? null;
    } catch (error) {
      // A failed model request is in the log as the turn's end, and shown there.
      if (!(error instanceof RpcError && error.code === MODEL_REQUEST_FAILED)) {
        this.onError(`The prompt was not run: ${error.message}`);
      }
    } finally {
      this.pendingPrompts -= 1;
      this.drawTurn();
    }
  }

  /** Whether the log's latest turn is still running (whichever client prompted it): Stop
   * cancels it too. */
  loggedTurn(running) {
    if (running === this.turnInLog) return;
    this.turnInLog = running;
    if (!running) this.notice.hidden = true;
    this.drawTurn();
  }

  cancel() {
    this.connection.notify("session/cancel", { sessionId: this.sessionId });
    for (const settle of [...this.permissions]) settle("cancelled");
  }

  drawTurn() {
    const running = this.pendingPrompts > 0 || this.turnInLog;
    this.state.running = running;
    this.stop.hidden = !running || !this.state.attached;
    this.turn.textContent = !this.state.attached ? "–" : running ? (this.pendingPrompts > 1 ? `running, ${this.pendingPrompts - 1} queued` : "running") : "idle";
  }

  complete() {
    const matches = completions(this.commands, this.input.value);
    this.matches = matches;
    this.choice = Math.min(this.choice, Math.max(matches.length - 1, 0));
    this.list.hidden = matches.length === 0;
    this.list.replaceChildren(
      ...matches.map((command, index) => {
        const item = el(
          "li",
          { role: "option", class: "completion", "data-command": command.name, "aria-selected": String(index === this.choice) },
          el("span", { class: "command-name", text: `/${command.name}` }),
          commandHint(command) ? el("span", { class: "command-hint", text: commandHint(command) }) : null,
          el("span", { class: "command-description", text: command.description }),
        );
        item.addEventListener("mousedown", (event) => {
          event.preventDefault(); // keep the focus in the box
          this.pick(command);
        });
        return item;
      }),
    );
  }

  pick(command) {
    this.input.value = completed(command);
    this.choice = 0;
    this.complete();
    this.input.focus();
  }

  key(event) {
    const open = !this.list.hidden && this.matches?.length;
    if (open && (event.key === "ArrowDown" || event.key === "ArrowUp")) {
      event.preventDefault();
      const step = event.key === "ArrowDown" ? 1 : -1;
      this.choice = (this.choice + step + this.matches.length) % this.matches.length;
      this.complete();
    } else if (open && (event.key === "Tab" || event.key === "Enter")) {
      event.preventDefault();
      const chosen = this.matches[this.choice];
      // A command typed whole is sent by Enter; a part of one is completed first.
      if (event.key === "Enter" && typedCommand(this.input.value) === chosen.name) this.submit();
      else this.pick(chosen);
    } else if (open && event.key === "Escape") {
      this.list.hidden = true;
    } else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      this.submit();
    }
  }

  // Permission.

  /** Ask the user; resolves with the ACP answer `{outcome}`. The dialog goes away when the
   * server withdraws the request (`signal`), or the turn is stopped from here. */
  askPermission(params, signal) {
    return new Promise((resolve) => {
      const tool = params?.toolCall ?? {};
      const input = permissionInput(tool.rawInput);
      const dialog = el(
        "dialog",
        { class: "permission", "aria-label": "Permission" },
        el("h2", { text: "Allow this?" }),
        el("p", { class: "permission-title", text: tool.title ?? "A tool call" }),
        input,
        el(
          "div",
          { class: "permission-options" },
          (params?.options ?? []).map((option) => {
            const button = el("button", { type: "button", class: `option ${option.kind}`, "data-option": option.optionId, text: option.name });
            button.addEventListener("click", () => settle("selected", option.optionId));
            return button;
          }),
        ),
      );
      const settle = (outcome, optionId) => {
        if (!this.permissions.has(settle)) return;
        this.permissions.delete(settle);
        this.state.permissions = this.permissions.size;
        dialog.close();
        dialog.remove();
        resolve({ outcome: optionId === undefined ? { outcome } : { outcome, optionId } });
      };
      // Escape closes a modal dialog: that is no answer, so it stays open.
      dialog.addEventListener("cancel", (event) => event.preventDefault());
      signal?.addEventListener("abort", () => settle("cancelled"));
      this.permissions.add(settle);
      this.state.permissions = this.permissions.size;
      document.body.append(dialog);
      dialog.showModal();
    });
  }
}
