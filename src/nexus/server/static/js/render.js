// How stored messages look: a user bubble shows what the user wrote (the event context the model was
// given lives in the turn's detail), a reply is Markdown, and each tool call is a line that opens to
// its arguments and its result.

import { copyButton, el, pretty, short, stamp, textOf } from "./dom.js";
import { renderMarkdown } from "./markdown.js";

const RESULT_CHARS = 4000;

export function userBubble(message, status) {
  const text = message.text !== undefined && message.text !== null ? message.text : textOf(message.content);
  return el("div", { class: "msg user", "data-message": message.id },
    el("span", { class: "who" }, "you", status ? el("span", { class: "pending", text: " · " + status }) : null,
      " ", stamp(message.timestamp)),
    el("div", { class: "body plain", text }));
}

// A reply: its text as Markdown, then its tool calls (each with its result from `results`, by call id).
export function assistantBubble(message, results) {
  const text = textOf(message.content);
  const calls = (message.content || []).filter((b) => b.type === "tool_call");
  const thinking = (message.content || []).filter((b) => b.type === "thinking" && b.thinking).map((b) => b.thinking);
  if (!text.trim() && !calls.length && !thinking.length) return null;
  return el("div", { class: "msg assistant", "data-message": message.id },
    el("span", { class: "who" }, message.model || "assistant", " ", stamp(message.timestamp)),
    thinking.length ? el("details", { class: "reasoning" }, el("summary", { text: "reasoning" }),
      el("div", { class: "plain", text: thinking.join("\n") })) : null,
    text.trim() ? el("div", { class: "body md" }, renderMarkdown(text)) : null,
    calls.length ? el("div", { class: "tools" }, calls.map((call) => toolCall(call, results.get(call.id)))) : null,
    message.error_message && message.stop_reason !== "aborted"
      ? el("div", { class: "error", text: message.error_message }) : null);
}

// One tool call: "✓ read  path=README.md" that opens to the full arguments and the result.
export function toolCall(call, result) {
  const failed = result && result.is_error;
  const mark = result ? (failed ? "✗" : "✓") : "…";
  const output = result ? textOf(result.content) : "";
  return el("details", { class: "tool " + (result ? (failed ? "failed" : "completed") : "started"), "data-call": call.id },
    el("summary", {}, `${mark} ${call.name} `, el("span", { class: "args", text: short(argLine(call.arguments), 90) })),
    el("div", { class: "tool-body" },
      el("div", { class: "tool-head" }, "arguments", copyButton(() => pretty(call.arguments))),
      el("pre", { class: "tool-args", text: pretty(call.arguments) }),
      result ? el("div", { class: "tool-head" }, failed ? "result (error)" : "result", copyButton(() => output)) : null,
      result ? el("pre", { class: "tool-result", text: output.length > RESULT_CHARS
        ? output.slice(0, RESULT_CHARS) + `\n… ${output.length - RESULT_CHARS} more characters` : output }) : null));
}

function argLine(args) {
  return Object.entries(args || {}).map(([key, value]) => {
    const shown = typeof value === "string" ? value : JSON.stringify(value);
    return `${key}=${shown.length > 60 ? `<${shown.length} chars>` : shown}`;
  }).join(" ");
}

// Every message of a turn as bubbles: tool results are shown inside the call that asked for them.
export function turnBubbles(turn, status) {
  const results = new Map(turn.messages.filter((m) => m.role === "tool_result").map((m) => [m.tool_call_id, m]));
  const called = new Set(turn.messages.filter((m) => m.role === "assistant")
    .flatMap((m) => (m.content || []).filter((b) => b.type === "tool_call").map((b) => b.id)));
  return turn.messages.map((message) => {
    if (message.role === "user") return userBubble(message, status);
    if (message.role === "assistant") return assistantBubble(message, results);
    return called.has(message.tool_call_id) ? null : toolResultBubble(message);
  });
}

function toolResultBubble(message) {
  return el("div", { class: "msg tool_result" },
    el("span", { class: "who", text: `${message.tool_name} result${message.is_error ? " (error)" : ""}` }),
    el("div", { class: "plain", text: short(textOf(message.content), 600) }));
}

// What the user wrote in a turn (the first user message), for regenerate and copy.
export function userText(turn) {
  const user = turn.messages.find((m) => m.role === "user");
  return user ? (user.text !== undefined && user.text !== null ? user.text : textOf(user.content)) : "";
}

// The turn's answer: the text of its last reply that has text.
export function replyText(turn) {
  const replies = turn.messages.filter((m) => m.role === "assistant").map((m) => textOf(m.content)).filter((t) => t.trim());
  return replies.length ? replies[replies.length - 1] : "";
}
