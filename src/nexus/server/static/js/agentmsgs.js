// Agent-to-agent messages (the broker's log): who asked whom, what, and the reply — newest first.

import { api } from "./api.js";
import { $, el, replace, short, stamp } from "./dom.js";
import { actions, state } from "./state.js";

export async function loadAgentMessages() {
  const box = $("agent-messages");
  const agent = $("talk-agent").value;
  let messages;
  try {
    messages = (await api("/v1/agent-messages" + (agent ? "?agent=" + encodeURIComponent(agent) : ""))).messages;
  } catch (error) {
    replace(box, el("p", { class: "error", text: error.message }));
    return;
  }
  if (!messages.length) {
    replace(box, el("p", { class: "muted", text: "No agent has messaged another yet." }));
    return;
  }
  replace(box, messages.map(messageCard));
}

function messageCard(m) {
  const waiting = m.status === "queued" || m.status === "processing";
  const outcome = m.reply !== null && m.reply !== undefined
    ? el("details", { class: "reply" }, el("summary", { text: "reply: " + short(m.reply, 100) }), el("div", { class: "plain", text: m.reply }))
    : el("div", { class: "muted", text: waiting ? "waiting for the reply…" : m.turn_status ? `no reply (${m.turn_status})` : m.status });
  return el("article", { class: "talk", "data-message": m.id },
    el("header", {},
      el("strong", { text: m.from || "?" }), " → ", el("strong", { text: m.to }),
      m.in_reply_to ? el("span", { class: "tag", text: "reply" }) : null,
      el("span", { class: "tag " + m.status, text: m.status }),
      stamp(m.created_at),
      m.session_label ? el("button", { type: "button", class: "tag session-tag", text: "open session",
        title: m.session_label, onclick: () => { actions.selectSession(m.session_label); actions.show("chat"); } }) : null),
    el("details", { class: "ask" }, el("summary", { text: short(m.content, 140) }), el("div", { class: "plain", text: m.content })),
    outcome);
}

export function renderTalkFilter() {
  const select = $("talk-agent");
  const wanted = select.value;
  replace(select, el("option", { value: "", text: "all agents" }),
    state.agents.map((a) => el("option", { value: a.id, text: a.id, selected: a.id === wanted })));
}

export function wireAgentMessages() {
  $("talk-agent").addEventListener("change", loadAgentMessages);
  $("talk-refresh").addEventListener("click", loadAgentMessages);
}
