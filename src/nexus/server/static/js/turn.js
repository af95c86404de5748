// A turn's detail: its facts (model, tokens, cost, times), the event context the model was given,
// its messages and tool calls, and the ways to go on from it: fork here (for an agent, so the fork
// is continuable), regenerate (a fork with the same question), copy the reply.

import { api } from "./api.js";
import { forkAt, regenerate } from "./branch.js";
import { $, copyButton, el, enc, money, replace, stamp } from "./dom.js";
import { replyText, turnBubbles, userText } from "./render.js";
import { actions, agentOf, notice, state } from "./state.js";
import { markCurrentTurn, statusWord, treeTurn } from "./tree.js";

export async function openTurn(turnId) {
  state.turn = turnId;
  markCurrentTurn(turnId);
  const box = $("turn");
  box.hidden = false;
  replace(box, el("span", { class: "muted", text: "loading turn…" }));
  let turn;
  try {
    turn = await api(`/v1/turns/${enc(turnId)}`);
  } catch (error) {
    replace(box, el("p", { class: "error", text: error.message }));
    return;
  }
  if (state.turn !== turnId) return;
  const user = turn.messages.find((m) => m.role === "user");
  const fact = (name, value) => el("div", {}, el("dt", { text: name }), el("dd", {}, value));
  const seconds = turn.completed_at ? ((turn.completed_at - turn.started_at) / 1000).toFixed(1) + " s" : "—";
  replace(box,
    el("header", {},
      el("strong", { text: `Turn #${turn.depth + 1}` }),
      el("span", { class: "tag " + turn.status, text: statusWord(turn.status) }),
      stamp(turn.started_at),
      el("span", { class: "mono muted id", text: turn.id })),
    turn.error ? el("p", { class: turn.status === "aborted" ? "stopped" : "error", text: turn.error }) : null,
    el("dl", { class: "facts" },
      fact("model", turn.model || "—"),
      fact("input tok", String(turn.input_tokens)),
      fact("output tok", String(turn.output_tokens)),
      fact("total tok", String(turn.total_tokens)),
      fact("cost", money(turn.cost)),
      fact("tool calls", String(turn.tool_call_count)),
      fact("took", seconds)),
    user && user.event_context
      ? el("details", { class: "event-context" }, el("summary", { text: "Event context (what the model was told first)" }),
          el("pre", { text: user.event_context }))
      : null,
    branchControls(turn),
    el("div", { class: "messages detail" }, turnBubbles(turn)));
}

function agentPicker(id, preferred) {
  const select = el("select", { id, "aria-label": "Agent to continue with" });
  for (const agent of state.agents) {
    select.append(el("option", { value: agent.id, text: agent.id, selected: agent.id === preferred }));
  }
  if (!state.agents.length) select.append(el("option", { value: "", text: "no agent registered" }));
  return select;
}

function branchControls(turn) {
  const own = agentOf(state.sessionInfo);
  const picker = agentPicker("fork-agent", own ? own.id : null);
  const title = el("input", { id: "fork-title", placeholder: "title of the fork (optional)", "aria-label": "Fork title" });
  return el("div", { class: "branching" },
    el("div", { class: "fork" }, title, el("label", { class: "muted", text: "with" }), picker,
      el("button", { type: "button", id: "fork-here", class: "primary",
                     onclick: () => forkHere(turn, picker.value, title.value) }, "Fork here")),
    el("div", { class: "fork" },
      el("button", { type: "button", id: "regenerate", class: "small", onclick: () => regenerateTurn(turn, picker.value),
                     title: "Ask the same again on a new branch (this answer stays in the tree)" }, "Regenerate"),
      copyButton(() => replyText(turn), "Copy reply"),
      copyButton(() => userText(turn), "Copy message")));
}

function forkSource(turn) {
  const known = treeTurn(turn.id);
  return known && known.on_path ? state.session : turn.session_label;
}

async function forkHere(turn, agentId, title) {
  try {
    const created = await forkAt(forkSource(turn), turn.id, agentId || null, title.trim() || null);
    await actions.loadSessions();
    await actions.selectSession(created.label);
    actions.show("chat");
    notice(created.agent
      ? `Forked: “${created.title || created.label}” continues with ${created.agent}.`
      : `Forked into “${created.label}”; no agent works on it (+ New agent registers one).`, "ok");
  } catch (error) {
    notice(`Fork failed: ${error.message}`, "bad");
  }
}

async function regenerateTurn(turn, agentId) {
  try {
    await regenerate(turn, agentId || null);
    actions.show("chat");
  } catch (error) {
    notice(`Could not regenerate: ${error.message}`, "bad");
  }
}

export { regenerateTurn };
