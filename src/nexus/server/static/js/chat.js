// The chat: the session's turns from the ledger (each with its time, tokens, cost and actions), the
// messages the user sent that wait in the queue, the live reply, and the composer with its queue mode.

import { api } from "./api.js";
import { forkAt, sendMessage } from "./branch.js";
import { $, copyButton, el, enc, money, replace, short, stamp, tokens } from "./dom.js";
import { grew, keepPlace, toBottom } from "./follow.js";
import { askedToStop, forgetLive, handlers, isRunning, liveNode, runStartsAfter, settled } from "./live.js";
import { replyText, turnBubbles } from "./render.js";
import { actions, agentOf, displayName, notice, sendTarget, state, stopTarget } from "./state.js";
import { statusWord } from "./tree.js";
import { regenerateTurn } from "./turn.js";

let pending = []; // messages sent from this page that no turn has taken yet: {itemId, text, status, label}
const mine = () => pending.filter((entry) => entry.label === state.session);

export async function loadHistory() {
  const label = state.session;
  let history;
  try {
    history = await api(`/v1/sessions/${enc(label)}/history`);
  } catch (error) {
    notice(error.message, "bad");
    if (label === state.session) replayEarly();
    return;
  }
  if (label !== state.session) return;
  state.history = history;
  replayEarly();
  await refreshPending();
  if (!settled(newestTurnId()) && retries < SETTLE_RETRIES) {
    retries += 1; // the run ended but its turn is not written yet: look again shortly
    setTimeout(() => { if (label === state.session) loadHistory(); }, 500);
  } else {
    retries = 0;
  }
  renderChat();
}

const SETTLE_RETRIES = 6;
let retries = 0;

function newestTurnId() {
  const turns = (state.history && state.history.turns) || [];
  return turns.length ? turns[turns.length - 1].id : null;
}

function renderChat() {
  const turns = (state.history && state.history.turns) || [];
  const waiting = mine();
  keepPlace(() => replace($("messages"),
    turns.length || waiting.length || isRunning() ? null : el("p", { class: "muted empty", text: "No messages yet." }),
    turns.map(turnGroup),
    waiting.map(pendingBubble),
    liveNode()));
}

function turnGroup(turn) {
  return el("section", { class: "turn-group" + (turn.status !== "completed" ? " " + turn.status : ""), "data-turn": turn.id },
    turnBubbles(turn), turnFooter(turn));
}

function turnFooter(turn) {
  const status = turn.status !== "completed"
    ? el("span", { class: "tag " + turn.status, title: turn.error || "", text: statusWord(turn.status) }) : null;
  return el("footer", { class: "turn-foot" },
    stamp(turn.started_at), turn.model ? el("span", { text: turn.model }) : null,
    el("span", { class: "tok", title: `${turn.input_tokens} in, ${turn.output_tokens} out`, text: tokens(turn.total_tokens) }),
    el("span", { class: "cost", text: money(turn.cost) }), status,
    turn.error && turn.status === "failed" ? el("span", { class: "error", text: turn.error }) : null,
    el("span", { class: "spacer" }),
    copyButton(() => replyText(turn)),
    el("button", { type: "button", class: "regenerate", title: "Ask the same again on a new branch",
                   onclick: () => regenerateTurn(turn, null), text: "Regenerate" }),
    el("button", { type: "button", class: "details", title: "Details, event context and fork",
                   onclick: () => { actions.openTurn(turn.id); actions.show("tree"); }, text: "Details" }));
}

function pendingBubble(entry) {
  const shown = entry.status === "processing" ? null : entry.status === "failed" ? "failed" : "queued";
  return el("div", { class: "msg user pending-msg", "data-item": entry.itemId },
    el("span", { class: "who" }, "you", shown ? el("span", { class: "pending", text: " · " + shown }) : null),
    el("div", { class: "body plain", text: entry.text }));
}

// Ask the queue what became of the messages sent from here: a message a turn consumed is in the history now.
async function refreshPending() {
  const target = sendTarget();
  if (!mine().length || !target) return;
  let items;
  try {
    items = (await api(`/v1/agents/${enc(target.agent.id)}/queue`)).items;
  } catch (_) {
    return;
  }
  const byId = new Map(items.map((item) => [item.id, item]));
  pending = pending.filter((entry) => entry.label !== state.session || byId.has(entry.itemId));
  for (const entry of mine()) entry.status = byId.get(entry.itemId).status;
}

export async function submit(text, mode) {
  const target = sendTarget();
  if (!target) throw new Error("no agent works on this session");
  const receipt = await sendMessage(target, text, mode);
  pending.push({ itemId: receipt.queue_item_id, text, status: "queued", label: state.session });
  const info = state.sessionInfo;
  if (info && !info.title && target.session && info.channel === "web") { // a new chat is named by its first message
    info.title = short(text, 60);
    api(`/v1/sessions/${enc(info.label)}`, { method: "PATCH", json: { title: info.title } })
      .then(() => actions.loadSessions()).catch(() => {});
    $("chat-title").textContent = info.title;
  }
  toBottom();
  renderChat();
  await refreshPending();
  renderChat();
  actions.loadAgents();
}

async function send(event) {
  event.preventDefault();
  const content = $("text").value;
  if (!content.trim() || !sendTarget()) return;
  try {
    await submit(content, $("mode").value || undefined);
    $("text").value = "";
    notice("");
  } catch (error) {
    notice(`Could not send: ${error.message}`, "bad");
  }
}

async function stop() {
  const target = stopTarget();
  if (!target) return;
  const query = target.session ? "?session=" + enc(target.session) : "";
  askedToStop();
  try {
    const answer = await api(`/v1/agents/${enc(target.agent.id)}/abort${query}`, { method: "POST" });
    if (!answer.aborted) notice(`Nothing of ${target.agent.id} was running here.`, "ok");
  } catch (error) {
    notice(`Could not stop: ${error.message}`, "bad");
  }
}

// A session no registered agent can run here: offer to continue it, in a fork (or a new chat), with an agent.
async function continueWith() {
  const agent = $("continue-agent").value;
  const info = state.sessionInfo;
  if (!agent || !info) return;
  try {
    const created = info.head_turn_id
      ? await forkAt(info.label, info.head_turn_id, agent, displayName(info))
      : await api("/v1/sessions", { method: "POST", json: { agent } });
    await actions.loadSessions();
    await actions.selectSession(created.label);
    notice(`Continuing with ${agent} in a fork of “${displayName(info)}”.`, "ok");
  } catch (error) {
    notice(`Could not continue: ${error.message}`, "bad");
  }
}

export function updateComposer() {
  const target = sendTarget();
  const info = state.sessionInfo;
  $("send").disabled = !target;
  $("stop").disabled = !stopTarget();
  $("mode").disabled = !target;
  const owner = agentOf(info);
  $("text").placeholder = target ? `Message ${target.agent.id}… (Ctrl+Enter sends)` : info ? "Pick an agent to continue this session." : "Pick a session.";
  const box = $("continue");
  box.hidden = Boolean(target) || !info;
  if (!box.hidden) {
    $("continue-why").textContent = owner
      ? `This session is ${owner.id}'s ${info.channel} conversation; continue it in a fork with`
      : info.agent ? `Agent ${info.agent} is not registered any more; continue with` : "No agent works on this session; continue with";
    $("continue-go").disabled = !state.agents.length;
    replace($("continue-agent"), state.agents.length
      ? state.agents.map((a) => el("option", { value: a.id, text: a.id }))
      : el("option", { value: "", text: "no agent: + New agent" }));
  }
  $("chat-agent").textContent = info ? [info.agent || "no agent", info.channel].join(" · ") : "";
}

export function resetChat() {
  forgetLive();
  early = [];
  replace($("messages"));
}

// Events that came before the session's first history (null once it came): a run is placed after the
// newest turn the page knew when it started, so until the history arrives they wait (else the history's
// turns look like the run's reply and the reply vanishes).
let early = null;

function replayEarly() {
  const events = early || [];
  early = null;
  for (const [event, data] of events) onEvent(event, data);
}

// A StreamEvent of the selected session; at the run's end the chat, tree and agents reload from the ledger.
export function onEvent(event, data) {
  if (early && event !== "reset") {
    early.push([event, data]);
    return;
  }
  if (event === "reset") {
    notice(`Some live events were missed (${data.reason}); the session was reloaded.`);
    if (early) early = [];
    forgetLive();
    actions.reloadSession();
    return;
  }
  const handler = handlers[event];
  if (!handler) return;
  if (event === "stream_start") {
    runStartsAfter(newestTurnId());
    refreshPending().then(renderChat);
  }
  if (handler(data)) {
    setTimeout(() => actions.reloadSession(), 250);
  }
  grew();
}

export function wireChat() {
  $("composer").addEventListener("submit", send);
  $("stop").addEventListener("click", stop);
  $("continue-go").addEventListener("click", continueWith);
  $("text").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) send(event);
  });
}
