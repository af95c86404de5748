// Nexus web UI: agents, sessions, a session's turn tree with forks, a live chat, agent-to-agent messages.
// Plain ES modules, no build step. Server text is inserted as text; replies as sanitized Markdown (markdown.js).

import { loadAgentMessages, renderTalkFilter, wireAgentMessages } from "./agentmsgs.js";
import { loadAgents, renderAgents, wireAgents } from "./agents.js";
import { api, setConn, takeTokenFromAddress } from "./api.js";
import { loadHistory, onEvent, resetChat, submit, updateComposer, wireChat } from "./chat.js";
import { $, enc } from "./dom.js";
import { toBottom, wireFollow } from "./follow.js";
import { loadSessions, renderNewChatPicker, wireSessions } from "./sessions.js";
import { actions, displayName, notice, state } from "./state.js";
import { closeStream, openStream } from "./stream.js";
import { loadTree, wireTree } from "./tree.js";
import { openTurn } from "./turn.js";

function show(view) {
  document.body.dataset.view = view;
  for (const button of document.querySelectorAll(".views button")) {
    button.classList.toggle("current", button.dataset.show === view);
  }
  if (view === "chat") toBottom(); // a hidden pane cannot scroll: catch up now
}

function showMiddle(which) {
  for (const button of document.querySelectorAll(".middle-tabs button")) {
    button.classList.toggle("current", button.dataset.middle === which);
  }
  $("tree-view").hidden = which !== "tree";
  $("talk-view").hidden = which !== "talk";
  if (which === "talk") { renderTalkFilter(); loadAgentMessages(); }
}

function headerFor(info, label) {
  $("chat-title").textContent = info ? displayName(info) : label;
  $("chat-title").title = label;
  $("tree-title").textContent = info ? displayName(info) : label;
}

async function selectSession(label) {
  if (!label) return;
  const changed = label !== state.session;
  state.session = label;
  if (location.hash !== "#s=" + enc(label)) history.replaceState(null, "", "#s=" + enc(label));
  if (changed) {
    state.turn = null;
    state.history = null;
    state.sessionInfo = null; // nothing is sent to the previous session while this one loads
    updateComposer();
    $("turn").hidden = true;
    $("queue").hidden = true;
    notice("");
    resetChat();
    openStream(label, onEvent);
  }
  await reloadSession();
}

// Everything about the selected session, again from the server (after a run, a rename, a fork…).
async function reloadSession() {
  const label = state.session;
  if (!label) return;
  const before = state.sessionInfo && state.sessionInfo.label;
  await Promise.all([loadSessions(), loadAgents()]);
  if (label !== state.session) return;
  state.sessionInfo = state.sessions.find((s) => s.label === label) || await fetchSession(label);
  headerFor(state.sessionInfo, label);
  updateComposer();
  renderAgents(); // the highlight follows the session's agent
  if (before !== label) renderNewChatPicker(true);
  await Promise.all([loadTree(), loadHistory()]);
}

async function fetchSession(label) {
  try { return await api(`/v1/sessions/${enc(label)}`); } catch (_) { return null; }
}

async function start() {
  takeTokenFromAddress();
  Object.assign(actions, {
    selectSession, reloadSession, loadSessions, loadAgents, openTurn, show,
    submit: (text) => submit(text, undefined),
  });
  for (const button of document.querySelectorAll(".views button")) {
    button.addEventListener("click", () => show(button.dataset.show));
  }
  for (const button of document.querySelectorAll(".middle-tabs button")) {
    button.addEventListener("click", () => showMiddle(button.dataset.middle));
  }
  wireSessions();
  wireAgents();
  wireTree();
  wireChat();
  wireFollow();
  wireAgentMessages();
  updateComposer();
  await loadSessions();
  await loadAgents();
  const wanted = new URLSearchParams(location.hash.slice(1)).get("s");
  if (wanted) await selectSession(wanted);
  setInterval(() => { if (!document.hidden) { loadAgents(); loadSessions(); } }, 5000);
}

window.addEventListener("beforeunload", closeStream);
document.addEventListener("DOMContentLoaded", () => {
  start().catch((error) => setConn(false, error.message));
});
