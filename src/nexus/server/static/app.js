// Nexus web UI: agents, sessions, a session's turn tree with forks, and a live chat over SSE.
// Plain JS, no build step. Everything the server sends is inserted as text (never as HTML).
"use strict";

const TOKEN_KEY = "nexus-token";
const state = {
  token: sessionStorage.getItem(TOKEN_KEY) || "",
  session: null,        // the selected session's label
  agents: [],
  openQueue: null,      // agent id whose queue is shown
  turn: null,           // the selected turn id
  stream: null,         // AbortController of the open SSE request
  lastEventId: null,    // of the selected session's stream
  live: null,           // the assistant bubble the current run writes into
  tokenAsk: null,       // a pending token prompt (one at a time)
};

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const enc = encodeURIComponent;

// -- API ---------------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, type, message) {
    super(message);
    this.status = status;
    this.type = type;
  }
}

function authHeaders(extra) {
  const headers = Object.assign({}, extra || {});
  if (state.token) headers.Authorization = "Bearer " + state.token;
  return headers;
}

async function api(path, options) {
  const opts = options || {};
  const headers = authHeaders(opts.json !== undefined ? { "Content-Type": "application/json" } : {});
  const body = opts.json !== undefined ? JSON.stringify(opts.json) : undefined;
  const response = await fetch(path, { method: opts.method || "GET", headers, body });
  if (response.status === 401) {
    await askToken(state.token ? "The server refused that token. Enter another one." : null);
    return api(path, options);
  }
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
  setConn(true);
  if (!response.ok) {
    const error = data && data.error ? data.error : { type: "http_error", message: response.statusText };
    throw new ApiError(response.status, error.type, error.message || String(response.status));
  }
  return data;
}

function askToken(why) {
  if (state.tokenAsk) return state.tokenAsk;
  const dialog = $("token-dialog");
  if (why) $("token-why").textContent = why;
  state.tokenAsk = new Promise((resolve) => {
    $("token-form").onsubmit = (event) => {
      event.preventDefault();
      state.token = $("token-input").value.trim();
      sessionStorage.setItem(TOKEN_KEY, state.token);
      dialog.close();
      state.tokenAsk = null;
      resolve();
    };
  });
  if (!dialog.open) dialog.showModal();
  $("token-input").focus();
  return state.tokenAsk;
}

function setConn(ok, message) {
  const conn = $("conn");
  conn.textContent = ok ? "connected" : message || "cannot reach the server";
  conn.classList.toggle("bad", !ok);
}

function notice(message, kind) {
  const box = $("notice");
  box.textContent = message;
  box.className = "notice" + (kind === "ok" ? " ok" : "");
  box.hidden = !message;
}

// -- formatting --------------------------------------------------------------------------------

function when(ms) {
  if (!ms) return "";
  const seconds = (Date.now() - ms) / 1000;
  if (seconds < 60) return "just now";
  if (seconds < 3600) return Math.round(seconds / 60) + " min ago";
  if (seconds < 86400) return Math.round(seconds / 3600) + " h ago";
  return new Date(ms).toLocaleDateString();
}

function textOf(content) {
  if (typeof content === "string") return content;
  return (content || []).filter((b) => b.type === "text").map((b) => b.text).join("");
}

function short(text, n) {
  const flat = (text || "").replace(/\s+/g, " ").trim();
  return flat.length > n ? flat.slice(0, n - 1) + "…" : flat;
}

const money = (cost) => "$" + (cost || 0).toFixed(cost >= 1 ? 2 : 4);

// -- agents and sessions -----------------------------------------------------------------------

async function loadAgents() {
  const list = $("agents");
  try {
    state.agents = (await api("/v1/agents")).agents;
  } catch (error) {
    list.replaceChildren(el("li", { class: "empty", text: "Agents: " + error.message }));
    return;
  }
  if (!state.agents.length) {
    list.replaceChildren(el("li", { class: "empty", text: "No agent registered." }));
    return;
  }
  list.replaceChildren(...state.agents.map((agent) => el("li", {},
    el("button", { type: "button", "data-agent": agent.id, class: state.openQueue === agent.id ? "current" : null,
                   onclick: () => openAgent(agent) },
      el("span", { class: "label", text: agent.id }),
      el("span", { class: "meta" },
        el("span", { class: "state " + agent.state, text: agent.state }), " ",
        el("span", { class: "depth", text: "queue " + agent.queue_depth }))))));
  updateComposer();
}

async function openAgent(agent) {
  state.openQueue = agent.id;
  selectSession(agent.session_label);
  const box = $("queue");
  box.hidden = false;
  box.replaceChildren(el("span", { class: "muted", text: "loading queue…" }));
  try {
    const items = (await api(`/v1/agents/${enc(agent.id)}/queue`)).items;
    box.replaceChildren(
      el("strong", { text: `Queue of ${agent.id}` }),
      items.length
        ? el("ol", {}, ...items.map((item) => el("li", { text: `${item.status}: ${short(item.content, 80)}` })))
        : el("div", { class: "muted", text: "nothing waiting" }));
  } catch (error) {
    box.replaceChildren(el("span", { class: "error", text: error.message }));
  }
  loadAgents();
}

async function loadSessions() {
  const list = $("sessions");
  let sessions;
  try {
    sessions = (await api("/v1/sessions")).sessions;
  } catch (error) {
    setConn(false, error.message);
    list.replaceChildren(el("li", { class: "empty", text: "Sessions: " + error.message }));
    return;
  }
  if (!sessions.length) {
    list.replaceChildren(el("li", { class: "empty", text: "No session yet." }));
    return;
  }
  list.replaceChildren(...sessions.map((s) => el("li", {},
    el("button", { type: "button", "data-session": s.label, class: s.label === state.session ? "current" : null,
                   onclick: () => { selectSession(s.label); show("tree"); } },
      el("span", { class: "label", text: s.label }),
      el("span", { class: "meta", text: when(s.updated_at) })))));
}

function show(view) {
  document.body.dataset.view = view;
  for (const button of document.querySelectorAll(".views button")) {
    button.classList.toggle("current", button.dataset.show === view);
  }
  if (view === "chat") $("messages").scrollTop = $("messages").scrollHeight;  // hidden panes do not scroll
}

function selectSession(label) {
  if (!label) return;
  const changed = label !== state.session;
  state.session = label;
  for (const button of document.querySelectorAll("#sessions button")) {
    button.classList.toggle("current", button.dataset.session === label);
  }
  $("tree-title").textContent = label;
  $("chat-title").textContent = label;
  if (location.hash !== "#s=" + enc(label)) history.replaceState(null, "", "#s=" + enc(label));
  if (changed) {
    state.turn = null;
    state.live = null;
    state.lastEventId = null;
    $("turn").hidden = true;
    notice("");
    openStream(label);
  }
  loadTree();
  loadHistory();
  updateComposer();
}

// -- the turn tree -----------------------------------------------------------------------------

async function loadTree() {
  const label = state.session;
  const [tree, history] = await Promise.all([
    api(`/v1/sessions/${enc(label)}/tree`),
    api(`/v1/sessions/${enc(label)}/history`),
  ]).catch((error) => { $("tree").replaceChildren(el("p", { class: "error", text: error.message })); return [null, null]; });
  if (!tree || label !== state.session) return;
  const previews = new Map();
  addPreviews(previews, history);
  renderTree(tree, previews);
  // The other branches' turns get their previews from the histories of the sessions at their heads.
  const others = [...new Set(tree.turns.flatMap((t) => t.heads_of))].filter((l) => l !== label).slice(0, 12);
  if (!others.length) return;
  const histories = await Promise.all(others.map((l) => api(`/v1/sessions/${enc(l)}/history`).catch(() => null)));
  if (label !== state.session) return;
  for (const other of histories) addPreviews(previews, other);
  renderTree(tree, previews);
}

function addPreviews(previews, history) {
  for (const turn of (history && history.turns) || []) {
    const user = turn.messages.find((m) => m.role === "user");
    if (user && !previews.has(turn.id)) previews.set(turn.id, textOf(user.content));
  }
}

function renderTree(tree, previews) {
  $("tree-hint").hidden = tree.turns.length > 0;
  if (!tree.turns.length) {
    $("tree-hint").hidden = false;
    $("tree-hint").textContent = "This session has no turn yet.";
  }
  const byId = new Map(tree.turns.map((t) => [t.id, t]));
  const children = new Map();
  const roots = [];
  for (const turn of tree.turns) {
    if (turn.parent_turn_id && byId.has(turn.parent_turn_id)) {
      if (!children.has(turn.parent_turn_id)) children.set(turn.parent_turn_id, []);
      children.get(turn.parent_turn_id).push(turn);
    } else {
      roots.push(turn);
    }
  }
  // A chain stays at one indentation; only a fork (several children) opens branches.
  const pathFirst = (a, b) => Number(b.on_path) - Number(a.on_path);
  const renderChain = (start, container) => {
    let turn = start;
    while (turn) {
      container.append(turnNode(turn, previews.get(turn.id)));
      const kids = (children.get(turn.id) || []).slice().sort(pathFirst);
      if (kids.length === 1) { turn = kids[0]; continue; }
      for (const kid of kids) {
        const branch = el("div", { class: "branch" });
        container.append(branch);
        renderChain(kid, branch);
      }
      turn = null;
    }
  };
  const root = el("div", {});
  for (const turn of roots.sort(pathFirst)) renderChain(turn, root);
  if (tree.truncated) root.append(el("p", { class: "muted", text: "(the tree is larger; the oldest turns are shown)" }));
  $("tree").replaceChildren(root);
}

function turnNode(turn, preview) {
  const classes = ["turn-node"];
  if (turn.on_path) classes.push("on-path");
  if (turn.id === state.turn) classes.push("current");
  return el("button", { type: "button", class: classes.join(" "), "data-turn": turn.id,
                        onclick: () => openTurn(turn.id) },
    el("span", { class: "n", text: "#" + (turn.depth + 1) }),
    el("span", { class: "preview", text: preview ? short(preview, 90) : `${turn.turn_type} turn …${turn.id.slice(-6)}` }),
    ...turn.heads_of.map((label) => el("span", { class: "tag", text: label })),
    turn.status !== "completed" ? el("span", { class: "tag bad", text: turn.status }) : null,
    el("span", { class: "tok", text: `${turn.total_tokens} tok` }));
}

async function openTurn(turnId) {
  state.turn = turnId;
  for (const node of document.querySelectorAll(".turn-node")) {
    node.classList.toggle("current", node.dataset.turn === turnId);
  }
  const box = $("turn");
  box.hidden = false;
  box.replaceChildren(el("span", { class: "muted", text: "loading turn…" }));
  let turn;
  try {
    turn = await api(`/v1/turns/${enc(turnId)}`);
  } catch (error) {
    box.replaceChildren(el("p", { class: "error", text: error.message }));
    return;
  }
  const fact = (name, value) => el("div", {}, el("dt", { text: name }), el("dd", { text: String(value) }));
  const labelInput = el("input", { id: "fork-label", placeholder: "new session label (optional)", "aria-label": "Fork label" });
  box.replaceChildren(
    el("header", {},
      el("strong", { text: `Turn #${turn.depth + 1}` }),
      el("span", { class: "mono muted", text: turn.id }),
      el("span", { class: "tag", text: turn.status })),
    el("dl", { class: "facts" },
      fact("model", turn.model || "—"),
      fact("input tok", turn.input_tokens),
      fact("output tok", turn.output_tokens),
      fact("total tok", turn.total_tokens),
      fact("cost", money(turn.cost)),
      fact("tool calls", turn.tool_call_count)),
    el("div", { class: "fork" }, labelInput,
      el("button", { type: "button", id: "fork-here", class: "primary", onclick: () => forkHere(turn.id, labelInput.value) },
        "Fork here")),
    el("div", { class: "messages detail" }, ...turn.messages.map(messageBubble)),
    turn.tool_calls.length
      ? el("div", { class: "tools-list" }, el("h2", { text: "Tool calls" }),
          ...turn.tool_calls.map((call) => el("div", { class: "tool " + (call.status === "error" ? "failed" : "completed"),
            text: `${call.tool_name} ${short(JSON.stringify(call.arguments), 100)} — ${call.status}${call.error ? ": " + call.error : ""}` })))
      : null);
}

async function forkHere(turnId, label) {
  const body = { turn_id: turnId };
  if (label && label.trim()) body.label = label.trim();
  try {
    const created = await api(`/v1/sessions/${enc(state.session)}/fork`, { method: "POST", json: body });
    await loadSessions();
    selectSession(created.label);
    notice(`Forked into session “${created.label}”.`, "ok");
  } catch (error) {
    notice(`Fork failed: ${error.message}`);
    show("chat");
  }
}

// -- chat: history and live events ------------------------------------------------------------

function messageBubble(message) {
  if (message.role === "tool_result") {
    return el("div", { class: "msg tool_result" },
      el("span", { class: "who", text: `${message.tool_name} result${message.is_error ? " (error)" : ""}` }),
      short(textOf(message.content), 600));
  }
  const bubble = el("div", { class: "msg " + message.role },
    el("span", { class: "who", text: message.role === "user" ? "you" : message.model || "assistant" }),
    textOf(message.content));
  const calls = Array.isArray(message.content) ? message.content.filter((b) => b.type === "tool_call") : [];
  if (calls.length) {
    bubble.append(el("div", { class: "tools" },
      ...calls.map((c) => el("span", { class: "tool completed", text: `${c.name} ${short(JSON.stringify(c.arguments), 80)}` }))));
  }
  return bubble;
}

async function loadHistory() {
  const label = state.session;
  let history;
  try {
    history = await api(`/v1/sessions/${enc(label)}/history`);
  } catch (error) {
    notice(error.message);
    return;
  }
  if (label !== state.session) return;
  const box = $("messages");
  const nodes = history.turns.flatMap((turn) => turn.messages.map(messageBubble));
  if (!nodes.length) nodes.push(el("p", { class: "muted", text: "No messages yet." }));
  if (state.live && state.live.running) nodes.push(state.live.node);
  box.replaceChildren(...nodes);
  box.scrollTop = box.scrollHeight;
}

function liveBubble() {
  if (state.live) return state.live;
  const text = document.createTextNode("");
  const node = el("div", { class: "msg assistant live" }, el("span", { class: "who", text: "assistant · live" }), text);
  const tools = el("div", { class: "tools" });
  node.append(tools);
  $("messages").append(node);
  state.live = { node, text, tools, reasoning: null, toolNodes: new Map(), running: true };
  return state.live;
}

function stickToBottom(fn) {
  const box = $("messages");
  const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  fn();
  if (atBottom) box.scrollTop = box.scrollHeight;
}

const handlers = {
  stream_start() {
    state.live = null;
    liveBubble();
    updateComposer();
  },
  token(data) { liveBubble().text.appendData(data.text || ""); },
  reasoning(data) {
    const live = liveBubble();
    if (!live.reasoning) {
      live.reasoning = el("div", { class: "reasoning" });
      live.node.insertBefore(live.reasoning, live.text);
    }
    live.reasoning.append(data.text || "");
  },
  tool_status(data) {
    const live = liveBubble();
    let node = live.toolNodes.get(data.toolCallId);
    if (!node) {
      node = el("span", { "data-call": data.toolCallId });
      live.toolNodes.set(data.toolCallId, node);
      live.tools.append(node);
    }
    const mark = { started: "…", completed: "✓", failed: "✗" }[data.status] || "";
    node.className = "tool " + data.status;
    node.textContent = `${mark} ${data.toolName}${data.summary ? " — " + data.summary : ""}`;
  },
  stream_end(data) {
    if (!data.final || !state.live) return;
    state.live.running = false;
    state.live.node.classList.remove("live");
    state.live.node.querySelector(".who").textContent = "assistant";
    state.live = null;
    updateComposer();
    setTimeout(() => { loadHistory(); loadTree(); loadAgents(); }, 300);
  },
  stream_error(data) {
    const live = liveBubble();
    live.node.append(el("div", { class: "error", text: `Run failed: ${data.error}` }));
    live.running = false;
    state.live = null;
    updateComposer();
  },
  reset(data) {
    notice(`Some live events were missed (${data.reason}); the session was reloaded.`);
    state.live = null;
    loadHistory();
    loadTree();
  },
};

function handleFrame(frame) {
  let event = "message";
  let id = null;
  const data = [];
  for (const line of frame.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") event = value;
    else if (field === "id") id = value;
    else if (field === "data") data.push(value);
  }
  if (id !== null) state.lastEventId = id;
  const handler = handlers[event];
  if (!handler || !data.length) return;
  let parsed;
  try { parsed = JSON.parse(data.join("\n")); } catch (_) { return; }
  stickToBottom(() => handler(parsed));
}

function setLive(on) {
  const badge = $("live");
  badge.textContent = on ? "live" : "offline";
  badge.className = "badge " + (on ? "on" : "off");
}

function closeStream() {
  if (state.stream) state.stream.abort();
  state.stream = null;
  setLive(false);
}

// fetch, not EventSource: EventSource cannot send the Authorization header.
async function openStream(label) {
  closeStream();
  const controller = new AbortController();
  state.stream = controller;
  let backoff = 1000;
  while (!controller.signal.aborted) {
    try {
      const headers = authHeaders(state.lastEventId ? { "Last-Event-ID": state.lastEventId } : {});
      const response = await fetch(`/v1/sessions/${enc(label)}/events`, { headers, signal: controller.signal });
      if (response.status === 401) { await askToken("The server asks for a token to stream events."); continue; }
      if (!response.ok) throw new Error(`events answered ${response.status}`);
      setLive(true);
      backoff = 1000;
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          handleFrame(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
      }
    } catch (error) {
      if (controller.signal.aborted) return;
    }
    setLive(false);
    await sleep(backoff);
    backoff = Math.min(backoff * 2, 15000);
  }
}

// -- send and abort ----------------------------------------------------------------------------

function sessionAgent() {
  return state.agents.find((agent) => agent.session_label === state.session) || null;
}

function updateComposer() {
  const agent = sessionAgent();
  $("send").disabled = !agent;
  $("abort").disabled = !agent;
  $("text").placeholder = agent
    ? `Message ${agent.id}…`
    : state.session ? "No agent works on this session (register one with POST /v1/agents)." : "Pick a session.";
}

function explain(action, agent, error) {
  if (error.status === 404 || error.status === 405) {
    return `This server cannot ${action} over HTTP yet: POST /v1/agents/${agent.id}/${action === "send messages" ? "messages" : "abort"} answered ${error.status} (${error.message}).`;
  }
  return `Could not ${action}: ${error.message}`;
}

async function send(event) {
  event.preventDefault();
  const agent = sessionAgent();
  const content = $("text").value.trim();
  if (!agent || !content) return;
  try {
    const accepted = await api(`/v1/agents/${enc(agent.id)}/messages`, { method: "POST", json: { content } });
    $("text").value = "";
    $("messages").append(el("div", { class: "msg user" }, el("span", { class: "who", text: "you · queued" }), content));
    notice(`Queued as ${accepted && accepted.queue_item_id ? accepted.queue_item_id : "a new message"}.`, "ok");
    loadAgents();
  } catch (error) {
    notice(explain("send messages", agent, error));
  }
}

async function abortRun() {
  const agent = sessionAgent();
  if (!agent) return;
  try {
    await api(`/v1/agents/${enc(agent.id)}/abort`, { method: "POST", json: {} });
    notice(`Asked ${agent.id} to stop.`, "ok");
  } catch (error) {
    notice(explain("abort runs", agent, error));
  }
}

// -- start -------------------------------------------------------------------------------------

// `nexus serve` prints the page's address with #token=… when it made the token itself
// (require_token): keep it for this tab, and take it out of the address (history, bookmarks).
function takeTokenFromAddress() {
  const params = new URLSearchParams(location.hash.slice(1));
  const token = params.get("token");
  if (!token) return;
  state.token = token;
  sessionStorage.setItem(TOKEN_KEY, token);
  params.delete("token");
  const rest = params.toString();
  history.replaceState(null, "", location.pathname + location.search + (rest ? "#" + rest : ""));
}

async function start() {
  takeTokenFromAddress();
  for (const button of document.querySelectorAll(".views button")) {
    button.addEventListener("click", () => show(button.dataset.show));
  }
  $("composer").addEventListener("submit", send);
  $("abort").addEventListener("click", abortRun);
  $("text").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) send(event);
  });
  updateComposer();
  await loadSessions();
  await loadAgents();
  const wanted = new URLSearchParams(location.hash.slice(1)).get("s");
  if (wanted) selectSession(wanted);
  setInterval(() => { if (!document.hidden) loadAgents(); }, 5000);
}

document.addEventListener("DOMContentLoaded", () => {
  start().catch((error) => setConn(false, error.message));
});
