// What the panes share: the selected session, the agents and sessions as last loaded, and the
// actions one pane asks of another (registered by app.js, so modules do not import each other in a circle).

import { $, el, replace } from "./dom.js";

export const state = {
  session: null,         // the selected session's label
  sessionInfo: null,     // its view from GET /v1/sessions (agent, session_key, title, channel)
  sessions: [],          // the last sessions list
  agents: [],            // the last agents list
  catalog: null,         // tools, queue modes and models for the agent form
  turn: null,            // the selected turn id
  history: null,         // the selected session's last history (turns with messages)
};

export const actions = {
  selectSession: async () => {},
  reloadSession: async () => {},
  loadSessions: async () => {},
  loadAgents: async () => {},
  openTurn: async () => {},
  submit: async () => {},  // send text to the selected session (the chat shows it as pending)
  show: () => {},
};

// The agent a session belongs to, if it is registered.
export function agentOf(info) {
  return info && info.agent ? state.agents.find((agent) => agent.id === info.agent) || null : null;
}

// How to send to the selected session: {agent, session} (session: the key, or undefined for the agent's own),
// or null when no registered agent runs it.
export function sendTarget() {
  const info = state.sessionInfo;
  const agent = agentOf(info);
  if (!agent) return null;
  if (info.label === agent.session_label) return { agent, session: undefined };
  if (info.session_key) return { agent, session: info.session_key };
  return null;
}

// Where Stop goes: as a send would, or — a chat-completions session the agent runs beside its queues
// (`X-Nexus-Session`, `user`), which takes no messages from here — the agent's abort of that session's label.
export function stopTarget() {
  const target = sendTarget();
  if (target) return target;
  const info = state.sessionInfo;
  const agent = agentOf(info);
  return agent ? { agent, session: info.label } : null;
}

export function displayName(info) {
  return (info && (info.title || info.label)) || "";
}

let noticeTimer = null;

// A line under the chat. "ok" notices go away by themselves; others stay until closed or replaced.
export function notice(message, kind) {
  const box = $("notice");
  clearTimeout(noticeTimer);
  if (!message) {
    box.hidden = true;
    return;
  }
  box.className = "notice" + (kind ? " " + kind : "");
  replace(box, el("span", { text: message }),
    el("button", { type: "button", class: "close", "aria-label": "Dismiss", text: "×", onclick: () => notice("") }));
  box.hidden = false;
  if (kind === "ok") noticeTimer = setTimeout(() => notice(""), 4000);
}
