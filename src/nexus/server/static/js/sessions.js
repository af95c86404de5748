// The sessions list: search, new chat, rename (a title; the label never changes), archive and restore.
// "Delete" archives: the session disappears from the list, every turn stays in the tree (nothing is deleted).

import { api } from "./api.js";
import { $, ago, el, enc, replace } from "./dom.js";
import { actions, displayName, notice, state } from "./state.js";

let query = "";
let searchTimer = null;

export async function loadSessions() {
  const list = $("sessions");
  const archived = $("show-archived").checked;
  const params = new URLSearchParams();
  if (archived) params.set("include_archived", "true");
  if (query) params.set("q", query);
  let sessions;
  try {
    sessions = (await api("/v1/sessions?" + params)).sessions;
  } catch (error) {
    replace(list, el("li", { class: "empty", text: "Sessions: " + error.message }));
    return;
  }
  state.sessions = sessions;
  const current = sessions.find((s) => s.label === state.session);
  if (current) state.sessionInfo = current;
  if (!sessions.length) {
    replace(list, el("li", { class: "empty", text: query ? `No session matches “${query}”.` : "No session yet." }));
    return;
  }
  replace(list, sessions.map(sessionRow));
}

function sessionRow(s) {
  const current = s.label === state.session;
  const facts = [s.agent ? s.agent : "no agent", s.channel, ago(s.updated_at)].filter(Boolean).join(" · ");
  return el("li", { class: s.status === "archived" ? "archived" : null },
    el("button", { type: "button", "data-session": s.label, class: "session" + (current ? " current" : ""),
                   title: s.title ? `${s.title}\n${s.label}` : s.label,
                   onclick: () => { actions.selectSession(s.label); actions.show("chat"); } },
      el("span", { class: "label", text: displayName(s) }),
      el("span", { class: "meta", text: facts + (s.status === "archived" ? " · archived" : "") })),
    current ? sessionTools(s) : null);
}

function sessionTools(s) {
  return el("div", { class: "row-tools" },
    el("button", { type: "button", id: "rename-session", onclick: () => rename(s), text: "Rename" }),
    s.status === "archived"
      ? el("button", { type: "button", id: "restore-session", onclick: () => setArchived(s, false), text: "Restore" })
      : el("button", { type: "button", id: "archive-session", class: "danger", onclick: () => setArchived(s, true),
                       text: "Delete", title: "Archive: hidden from the list, every turn kept" }));
}

async function rename(s) {
  const dialog = $("rename-dialog");
  const input = $("rename-input");
  input.value = s.title || "";
  $("rename-label").textContent = s.label;
  dialog.showModal();
  input.focus();
  $("rename-form").onsubmit = async (event) => {
    event.preventDefault();
    const title = input.value.trim();
    dialog.close();
    try {
      await api(`/v1/sessions/${enc(s.label)}`, { method: "PATCH", json: { title: title || null } });
      await actions.reloadSession();
    } catch (error) {
      notice(`Could not rename: ${error.message}`, "bad");
    }
  };
}

async function setArchived(s, archived) {
  try {
    await api(`/v1/sessions/${enc(s.label)}`, { method: "PATCH", json: { archived } });
    notice(archived ? `“${displayName(s)}” deleted (archived: its turns are kept; “Show archived” lists it).`
                    : `“${displayName(s)}” restored.`, "ok");
    await loadSessions();
  } catch (error) {
    notice(`Could not ${archived ? "delete" : "restore"}: ${error.message}`, "bad");
  }
}

// A new chat with an agent: the agent of the open session, else the only/first one (the picker says which).
export async function newChat() {
  const select = $("new-chat-agent");
  const agent = select.value;
  if (!agent) {
    notice("Register an agent first (+ New agent): a chat needs an agent to answer.", "bad");
    return;
  }
  try {
    const created = await api("/v1/sessions", { method: "POST", json: { agent } });
    await loadSessions();
    await actions.selectSession(created.label);
    actions.show("chat");
    $("text").focus();
  } catch (error) {
    notice(`Could not start a chat: ${error.message}`, "bad");
  }
}

// The agent a new chat goes to: the one picked, while it exists; else the open session's agent.
export function renderNewChatPicker(sessionChanged) {
  const select = $("new-chat-agent");
  const picked = state.agents.some((a) => a.id === select.value) ? select.value : null;
  const own = state.sessionInfo && state.sessionInfo.agent;
  const wanted = sessionChanged ? own || picked : picked || own;
  replace(select, state.agents.length
    ? state.agents.map((a) => el("option", { value: a.id, text: a.id, selected: a.id === wanted }))
    : el("option", { value: "", text: "no agent" }));
}

export function wireSessions() {
  $("rename-cancel").addEventListener("click", () => $("rename-dialog").close());
  $("new-chat").addEventListener("click", newChat);
  $("show-archived").addEventListener("change", loadSessions);
  $("session-search").addEventListener("input", (event) => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => { query = event.target.value.trim(); loadSessions(); }, 200);
  });
}
