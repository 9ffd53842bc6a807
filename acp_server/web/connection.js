// JSON-RPC 2.0 over a WebSocket, for acp-server's browser client (SPEC 3.4): one message per
// text frame; requests answered in promises, notifications and the server's own requests
// handed to handlers.
//
// No imports: it knows nothing of history (follow.js builds on it).

export const METHOD_NOT_FOUND = -32601;
export const INVALID_PARAMS = -32602;
const REQUEST_CANCELLED = -32800;

/** A JSON-RPC error answer. */
export class RpcError extends Error {
  constructor(code, message, data) {
    super(message);
    this.name = "RpcError";
    this.code = code;
    this.data = data;
  }
}

/** The connection has closed: no answer will come. */
export class ConnectionClosed extends Error {
  constructor(message) {
    super(message);
    this.name = "ConnectionClosed";
  }
}

/** The URL without its query, which carries the token. */
function shown(url) {
  return String(url).split("?")[0];
}

/**
 * A JSON-RPC 2.0 connection over a WebSocket (one message per text frame). `socket` is a
 * `WebSocket` or anything with its `send`, `close`, `readyState` and `addEventListener`.
 */
export class AcpConnection {
  #socket;
  #nextId = 1;
  #pending = new Map();
  #notificationHandlers = new Map();
  #requestHandlers = new Map();
  #answering = new Map(); // id of a server request being answered -> its AbortController
  #closedError = null;
  #opened;

  constructor(socket) {
    this.#socket = socket;
    let settleClosed;
    /** Resolves with the close event's `{code, reason}` when the connection has closed. */
    this.closed = new Promise((resolve) => (settleClosed = resolve));
    this.#opened = new Promise((resolve, reject) => {
      if (socket.readyState === 1) resolve();
      socket.addEventListener("open", () => resolve());
      socket.addEventListener("close", (event) => {
        const why = event.reason ? `: ${event.reason}` : "";
        const code = event.code ?? "none";
        const error = new ConnectionClosed(`the connection closed (code ${code}${why})`);
        reject(error);
        this.#shut(error);
        settleClosed({ code: event.code, reason: event.reason });
      });
    });
    this.#opened.catch(() => {});
    socket.addEventListener("message", (event) => this.#receive(event.data));
  }

  /** Connect to `url` (its `?token=` authenticates a browser); resolves once it is open.
   * `options.WebSocket` replaces the global `WebSocket` class. */
  static async open(url, { WebSocket: Socket = globalThis.WebSocket } = {}) {
    if (!Socket) throw new ConnectionClosed("no WebSocket implementation");
    const connection = new AcpConnection(new Socket(url));
    try {
      await connection.#opened;
    } catch (error) {
      throw new ConnectionClosed(`could not connect to ${shown(url)}: ${error.message}`);
    }
    return connection;
  }

  /** Send a request; resolves with its result, or rejects with an `RpcError` or
   * `ConnectionClosed`. */
  request(method, params) {
    if (this.#closedError) return Promise.reject(this.#closedError);
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#send(rpcMessage({ id, method }, params));
    });
  }

  /** Send a notification (no answer). */
  notify(method, params) {
    if (this.#closedError) throw this.#closedError;
    this.#send(rpcMessage({ method }, params));
  }

  /** Call `handler(params)` for every notification `method`; returns a function that stops. */
  onNotification(method, handler) {
    return addHandler(this.#notificationHandlers, method, handler);
  }

  /** Answer the server's requests `method` with `await handler(params, {signal})` (an
   * `RpcError` it throws is the error answer); a method without a handler is answered -32601.
   * `signal` aborts when the server withdraws the request (`$/cancel_request`); the request is
   * then answered -32800. */
  onRequest(method, handler) {
    this.#requestHandlers.set(method, handler);
    return () => this.#requestHandlers.delete(method);
  }

  close() {
    this.#socket.close();
  }

  #send(message) {
    this.#socket.send(JSON.stringify(message));
  }

  #receive(data) {
    let message;
    try {
      message = JSON.parse(data);
    } catch {
      this.#shut(new ConnectionClosed("the server sent a frame that is not JSON"));
      this.#socket.close();
      return;
    }
    for (const one of Array.isArray(message) ? message : [message]) this.#dispatch(one);
  }

  #dispatch(message) {
    if (message === null || typeof message !== "object") return;
    if (typeof message.method === "string") {
      if (Object.hasOwn(message, "id")) this.#answer(message);
      else this.#notify(message);
      return;
    }
    const waiter = this.#pending.get(message.id);
    if (!waiter) return;
    this.#pending.delete(message.id);
    if (message.error) {
      const { code, message: text, data } = message.error;
      waiter.reject(new RpcError(code, text, data));
    } else {
      waiter.resolve(message.result);
    }
  }

  #notify({ method, params }) {
    if (method === "$/cancel_request") this.#answering.get(params?.requestId)?.abort();
    for (const handler of this.#notificationHandlers.get(method) ?? []) {
      try {
        handler(params);
      } catch (error) {
        console.error(`the ${method} handler failed:`, error);
      }
    }
  }

  async #answer({ id, method, params }) {
    const handler = this.#requestHandlers.get(method);
    const withdrawn = new AbortController();
    this.#answering.set(id, withdrawn);
    let answer;
    try {
      if (!handler) throw new RpcError(METHOD_NOT_FOUND, `Method not found: ${method}`);
      const result = (await handler(params, { signal: withdrawn.signal })) ?? null;
      if (withdrawn.signal.aborted) throw new RpcError(REQUEST_CANCELLED, "Request cancelled");
      answer = { jsonrpc: "2.0", id, result };
    } catch (error) {
      const rpc =
        error instanceof RpcError ? error : new RpcError(-32603, String(error?.message ?? error));
      const body = { code: rpc.code, message: rpc.message };
      if (rpc.data !== undefined) body.data = rpc.data;
      answer = { jsonrpc: "2.0", id, error: body };
    } finally {
      this.#answering.delete(id);
    }
    if (!this.#closedError) this.#send(answer);
  }

  #shut(error) {
    if (this.#closedError) return;
    this.#closedError = error;
    for (const waiter of this.#pending.values()) waiter.reject(error);
    this.#pending.clear();
  }
}

/** A JSON-RPC 2.0 request (with an `id`) or notification; absent `params` are left out. */
function rpcMessage(fields, params) {
  return params === undefined
    ? { jsonrpc: "2.0", ...fields }
    : { jsonrpc: "2.0", ...fields, params };
}

function addHandler(handlers, method, handler) {
  if (!handlers.has(method)) handlers.set(method, new Set());
  handlers.get(method).add(handler);
  return () => handlers.get(method)?.delete(handler);
}
