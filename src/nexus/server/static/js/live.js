// The reply being written right now, from the session's StreamEvents: text as Markdown re-rendered as
// it grows, tool calls as lines that turn into ✓ or ✗, reasoning dimmed in a fold. A run the user
// stopped ends as "Stopped", not as a failure.

import { $, el } from "./dom.js";
import { grew } from "./follow.js";
import { LiveMarkdown } from "./markdown.js";

let live = null; // {node, tools: Map, text: LiveMarkdown|null, toolBox, reasoning, running, after}
let stopAsked = false;

export const isRunning = () => Boolean(live && live.running);
// The reply being written, or the one that just ended until the ledger's turn replaces it.
export const liveNode = () => (live ? live.node : null);
export function askedToStop() { stopAsked = true; }

// The reply ended and `lastTurnId` is the session's newest turn now: once that is not the turn the
// run started after, the ledger holds this reply (as completed, failed or stopped) and the bubble goes.
export function settled(lastTurnId) {
  if (live && !live.running && lastTurnId !== live.after) live = null;
  return !live || live.running;
}

let lastTurnId = null;
export function runStartsAfter(turnId) { lastTurnId = turnId; }

function bubble() {
  if (live && live.running) return live;
  const node = el("div", { class: "msg assistant live" }, el("span", { class: "who", text: "assistant · writing…" }));
  $("messages").append(node);
  live = { node, tools: new Map(), text: null, toolBox: null, reasoning: null, running: true, after: lastTurnId };
  return live;
}

function textPart(current) {
  if (!current.text) {
    const node = el("div", { class: "body md" });
    current.node.append(node);
    current.text = new LiveMarkdown(node, grew);
    current.toolBox = null;
  }
  return current.text;
}

function finish(current, outcome) {
  if (current.text) current.text.flush();
  current.running = false;
  current.node.classList.remove("live");
  current.node.querySelector(".who").textContent = "assistant";
  if (outcome) current.node.append(outcome);
  grew();
}

// Each returns true when the run ended (the caller then reloads the session from the ledger).
export const handlers = {
  stream_start() {
    stopAsked = false;
    live = null;
    bubble();
    grew();
  },
  token(data) {
    textPart(bubble()).append(data.text || "");
  },
  reasoning(data) {
    const current = bubble();
    if (!current.reasoning) {
      current.reasoning = el("div", { class: "plain" });
      current.node.insertBefore(el("details", { class: "reasoning", open: true },
        el("summary", { text: "reasoning" }), current.reasoning), current.node.children[1] || null);
    }
    current.reasoning.append(data.text || "");
    grew();
  },
  tool_status(data) {
    const current = bubble();
    if (current.text) { current.text.flush(); current.text = null; }
    let node = current.tools.get(data.toolCallId);
    if (!node) {
      if (!current.toolBox) current.node.append(current.toolBox = el("div", { class: "tools" }));
      node = el("div", { "data-call": data.toolCallId });
      current.tools.set(data.toolCallId, node);
      current.toolBox.append(node);
    }
    const mark = { started: "…", completed: "✓", failed: "✗" }[data.status] || "";
    node.className = "tool live-tool " + data.status;
    node.textContent = `${mark} ${data.toolName}${data.summary ? " — " + data.summary : ""}`;
    grew();
  },
  stream_end(data) {
    if (!live || !data.final) {
      if (live && live.text) { live.text.flush(); live.text = null; }  // the next model call writes below its tools
      return false;
    }
    finish(live, null);
    return true;
  },
  stream_error(data) {
    const current = bubble();
    const stopped = stopAsked || /\b(abort|interrupt)/i.test(data.error || ""); // a stop or an interrupt: not a failure
    finish(current, stopped
      ? el("div", { class: "stopped", text: stopAsked ? "Stopped — you stopped this reply." : `Stopped: ${data.error}` })
      : el("div", { class: "error", text: `Run failed: ${data.error}` }));
    stopAsked = false;
    return true;
  },
};

export function forgetLive() {
  if (live && live.text) live.text.flush();
  live = null;
}
