// The agents: their live state and queue, and a form that registers a new one or edits one
// (model, tools, role, instructions) through POST /v1/agents.

import { api } from "./api.js";
import { $, el, enc, replace, short } from "./dom.js";
import { renderNewChatPicker } from "./sessions.js";
import { actions, notice, state } from "./state.js";

export async function loadAgents() {
  try {
    state.agents = (await api("/v1/agents")).agents;
  } catch (error) {
    replace($("agents"), el("li", { class: "empty", text: "Agents: " + error.message }));
    return;
  }
  renderAgents();
}

// The agents as last loaded; the selected session's agent highlighted.
export function renderAgents() {
  const list = $("agents");
  renderNewChatPicker();
  if (!state.agents.length) {
    replace(list, el("li", { class: "empty", text: "No agent registered yet." }));
    return;
  }
  const mine = state.sessionInfo && state.sessionInfo.agent;
  replace(list, state.agents.map((agent) => el("li", {},
    el("button", { type: "button", "data-agent": agent.id, class: "agent" + (agent.id === mine ? " current" : ""),
                   onclick: () => openAgent(agent) },
      el("span", { class: "label", text: agent.id }),
      el("span", { class: "meta" },
        el("span", { class: "state " + agent.state, text: agent.state }), " ",
        el("span", { class: "depth", text: "queue " + agent.queue_depth }))),
    el("button", { type: "button", class: "edit", "data-edit": agent.id, title: `Edit ${agent.id}`, text: "Edit",
                   onclick: () => editAgent(agent) }))));
}

async function openAgent(agent) {
  await actions.selectSession(agent.session_label);
  actions.show("chat");
  const box = $("queue");
  box.hidden = false;
  replace(box, el("span", { class: "muted", text: "loading queue…" }));
  try {
    const items = (await api(`/v1/agents/${enc(agent.id)}/queue`)).items;
    replace(box, el("strong", { text: `Queue of ${agent.id}` }),
      items.length
        ? el("ol", {}, items.map((item) => el("li", { text: `${item.status}: ${short(item.content, 80)}` })))
        : el("div", { class: "muted", text: "nothing waiting" }));
  } catch (error) {
    replace(box, el("span", { class: "error", text: error.message }));
  }
}

async function catalog() {
  if (!state.catalog) {
    try { state.catalog = await api("/v1/catalog"); } catch (_) { state.catalog = { tools: [], models: [], queue_modes: [] }; }
  }
  return state.catalog;
}

// The agent form, empty for a new agent or filled with `agent`'s spec.
export async function editAgent(agent) {
  const { tools, models } = await catalog();
  const spec = (agent && agent.spec) || {};
  const dialog = $("agent-dialog");
  $("agent-dialog-title").textContent = agent ? `Edit agent ${agent.id}` : "New agent";
  const id = $("agent-id");
  id.value = agent ? agent.id : "";
  id.readOnly = Boolean(agent);
  $("agent-role").value = agent ? agent.role : "worker";
  $("agent-model").value = spec.model || "";
  replace($("agent-models"), models.map((m) => el("option", { value: m })));
  $("agent-instructions").value = spec.system_prompt || "";
  const chosen = new Set(spec.tools || []);
  replace($("agent-tools"), tools.map((name) => el("label", { class: "check" },
    el("input", { type: "checkbox", value: name, checked: chosen.has(name) }), " ", name)));
  $("agent-tools-all").checked = !spec.tools;
  $("agent-tools").classList.toggle("disabled", !spec.tools);
  $("agent-error").hidden = true;
  dialog.showModal();
  (agent ? $("agent-model") : id).focus();
}

async function saveAgent(event) {
  event.preventDefault();
  // An empty field is null: the default again (the run's model, every tool, no extra instructions).
  const body = { id: $("agent-id").value.trim(), role: $("agent-role").value };
  body.model = $("agent-model").value.trim() || null;
  body.tools = $("agent-tools-all").checked
    ? null : [...$("agent-tools").querySelectorAll("input:checked")].map((box) => box.value);
  body.system_prompt = $("agent-instructions").value.trim() ? $("agent-instructions").value : null;
  const error = $("agent-error");
  try {
    const saved = await api("/v1/agents", { method: "POST", json: body });
    $("agent-dialog").close();
    notice(`Agent ${saved.id} saved.`, "ok");
    await loadAgents();
    await actions.loadSessions();
  } catch (failure) {
    error.textContent = failure.message;
    error.hidden = false;
  }
}

export function wireAgents() {
  $("new-agent").addEventListener("click", () => editAgent(null));
  $("agent-form").addEventListener("submit", saveAgent);
  $("agent-cancel").addEventListener("click", () => $("agent-dialog").close());
  $("agent-tools-all").addEventListener("change", (event) => {
    $("agent-tools").classList.toggle("disabled", event.target.checked);
  });
}
