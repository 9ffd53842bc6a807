// How the viewer draws one node of the conversation fold (fold.js, present.js): text,
// images inline, tool cards under their ACP titles with diffs open, command replies and turn
// endings. Elements are built with `el` (dom.js): nothing received is parsed as HTML.

import { el } from "./dom.js";

const TOOL_STATUS = { pending: "pending", in_progress: "running", completed: "done", failed: "failed" };
const TEXT_STATUS = { streaming: "streaming", done: null, interrupted: "interrupted", incomplete: "incomplete" };
const PLAN_MARK = { pending: "○", in_progress: "◐", completed: "●" };

/** Content blocks as text, images left out (see `renderContent`). */
function contentText(blocks) {
  return (blocks ?? [])
    .map((block) => {
      switch (block?.type) {
        case "text":
          return block.text;
        case "resource_link":
          return `[${block.name ?? block.uri}]`;
        case "resource":
          return block.resource?.text ?? `[${block.resource?.uri ?? "resource"}]`;
        case "image":
          return null;
        default:
          return `[${block?.type ?? "content"}]`;
      }
    })
    .filter((text) => text !== null)
    .join("\n");
}

/** An image block's picture, from its data (a `data:` URL) or its `uri`; null if neither. */
function image(block) {
  const src = block.data ? `data:${block.mimeType ?? "image/png"};base64,${block.data}` : block.uri;
  if (!src || !/^(data:image\/|https?:)/.test(src)) return null;
  return el("img", { class: "inline-image", src, alt: block.uri ?? "image", loading: "lazy" });
}

/** The images among content blocks, drawn after their text. */
function images(blocks) {
  const shown = (blocks ?? []).filter((block) => block?.type === "image").map(image).filter(Boolean);
  return shown.length ? el("div", { class: "images" }, shown) : null;
}

function pretty(value) {
  if (value === null || value === undefined) return "";
  if (typeof value === "string") return value;
  return JSON.stringify(value, null, 2);
}

/** The lines of `before` and `after`, each marked kept (" "), removed ("-") or added ("+"):
 * a longest-common-subsequence diff, or all removed then all added when too big for one. */
function lineDiff(before, after) {
  // A file's last line break ends its last line: it starts no empty one.
  const a = before === "" ? [] : before.replace(/\n$/, "").split("\n");
  const b = after === "" ? [] : after.replace(/\n$/, "").split("\n");
  if (a.length * b.length > 250_000) return [...a.map((l) => ["-", l]), ...b.map((l) => ["+", l])];
  const common = Array.from({ length: a.length + 1 }, () => new Uint32Array(b.length + 1));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      common[i][j] = a[i] === b[j] ? common[i + 1][j + 1] + 1 : Math.max(common[i + 1][j], common[i][j + 1]);
    }
  }
  const lines = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      lines.push([" ", a[i]]);
      i++;
      j++;
    }
    else if (i < a.length && (j === b.length || common[i + 1][j] >= common[i][j + 1])) lines.push(["-", a[i++]]);
    else lines.push(["+", b[j++]]);
  }
  return lines;
}

/** A `diff` content block: its path and its lines, removed and added. */
export function renderDiff(block) {
  const lines = lineDiff(block.oldText ?? "", block.newText ?? "");
  const marks = { " ": "same", "-": "del", "+": "add" };
  return el(
    "div",
    { class: "diff", "data-path": block.path },
    el("div", { class: "section-label", text: block.oldText == null ? "New file" : "Changes" }),
    el("div", { class: "diff-path", text: block.path }),
    el("pre", { class: "diff-lines" }, lines.map(([mark, line]) => el("span", { class: marks[mark], text: `${mark} ${line}` }))),
  );
}

/** Whether a node's details are open: as the reader left them, else open for a tool card
 * with a diff (what an edit did is what a reader looks for). */
export function isOpen(node, open, closed) {
  if (open.has(node.id)) return true;
  if (closed.has(node.id)) return false;
  return node.kind === "tool" && (node.output ?? []).some((block) => block?.type === "diff");
}

/** One node's element, drawn afresh from the node; `open` and `closed` are the ids of the
 * details the reader opened and closed. */
export function renderNode(node, open, closed) {
  const attrs = { class: `node ${node.kind}`, "data-node-id": node.id, "data-kind": node.kind, "data-seq": node.seq };
  switch (node.kind) {
    case "user":
      return el(
        "article",
        attrs,
        el("div", { class: "who", text: "You" }),
        el("div", { class: "body", text: contentText(node.content) }),
        images(node.content),
      );
    case "text": {
      const badge = TEXT_STATUS[node.status];
      return el(
        "article",
        { ...attrs, "data-status": node.status },
        el("div", { class: "who" }, "Assistant", badge ? el("span", { class: `badge ${node.status}`, text: badge }) : null),
        el("div", { class: "body", text: node.text }),
      );
    }
    case "thought":
      return el(
        "details",
        { ...attrs, "data-status": node.status, open: isOpen(node, open, closed) },
        el("summary", {}, el("span", { class: "label", text: node.status === "streaming" ? "Thinking…" : "Thought" }),
          el("span", { class: "preview", text: node.text.slice(0, 120) })),
        el("div", { class: "body", text: node.text }),
      );
    case "tool": {
      const status = TOOL_STATUS[node.status] ?? node.status;
      const input = node.input !== null ? pretty(node.input) : node.arguments;
      const diffs = (node.output ?? []).filter((block) => block?.type === "diff");
      const shown = (node.output ?? []).filter((block) => block?.type !== "diff");
      const output = node.output !== null && (shown.length || !diffs.length) ? contentText(shown) : null;
      return el(
        "details",
        { ...attrs, "data-status": node.status, "data-tool-kind": node.toolKind, open: isOpen(node, open, closed) },
        el(
          "summary",
          { title: node.name || "" },
          el("span", { class: `badge ${node.status}`, text: status }),
          el("span", { class: "tool-title", text: node.title || node.name || "tool call" }),
        ),
        // An edit's change is what the user looks for: its diff comes first and its input
        // (the same text, as JSON) stays folded.
        diffs.length
          ? el("details", { class: "input-folded" }, el("summary", { class: "section-label", text: "Input" }), el("pre", { class: "input", text: input }))
          : [el("div", { class: "section-label", text: "Input" }), el("pre", { class: "input", text: input })],
        diffs.map(renderDiff),
        output !== null ? el("div", { class: "section-label", text: node.status === "failed" ? "Error" : "Result" }) : null,
        output !== null ? el("pre", { class: "output", text: output }) : null,
        images(shown),
        node.childSessionId
          ? el("p", { class: "child" }, "Subagent session ", el("code", { text: node.childSessionId }))
          : null,
      );
    }
    case "plan":
      return el(
        "section",
        attrs,
        el("div", { class: "who", text: "Plan" }),
        el(
          "ul",
          { class: "plan-entries" },
          (node.entries ?? []).map((entry) =>
            el("li", { class: `plan-entry ${entry.status}`, "data-status": entry.status },
              el("span", { class: "mark", text: PLAN_MARK[entry.status] ?? "?" }),
              el("span", { class: "content", text: entry.content }),
              entry.priority ? el("span", { class: `priority ${entry.priority}`, text: entry.priority }) : null),
          ),
        ),
      );
    case "title":
      return el("div", { ...attrs, class: "node marker title" }, "Title: ", el("strong", { class: "body", text: node.title }));
    case "mode":
      return el("div", { ...attrs, class: "node marker mode" }, "Mode: ", el("strong", { class: "body", text: node.modeId }));
    case "reply":
      return el(
        "article",
        { ...attrs, "data-status": node.isError ? "failed" : "done" },
        el("div", { class: "who", text: `/${node.command}` }),
        el("div", { class: "body", text: contentText(node.content) }),
        images(node.content),
      );
    case "ending":
      return el("div", { ...attrs, class: `node marker ending ${node.reason}`, "data-reason": node.reason }, el("span", { class: "body", text: node.text }));
    case "notice":
      return el(
        "div",
        { ...attrs, class: `node marker notice ${node.severity}`, "data-severity": node.severity },
        el("strong", { class: "body", text: node.title }),
        node.description ? el("span", { class: "notice-description", text: ` ${node.description}` }) : null,
      );
    default:
      return el("div", { ...attrs, class: "node marker", text: `${node.kind}` });
  }
}

