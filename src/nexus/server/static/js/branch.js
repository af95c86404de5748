// Sending, forking and regenerating. A fork made here is a session of an agent (the source session's,
// or the one picked), so it can be continued at once; regenerate = fork before the turn, send its
// message again (the original turn stays in the tree, the new answer is a branch beside it).

import { api } from "./api.js";
import { enc } from "./dom.js";
import { userText } from "./render.js";
import { actions, state } from "./state.js";

// POST the message through the agent's durable queue; `target` is {agent, session} (sendTarget()).
export async function sendMessage(target, content, mode) {
  const body = { content };
  if (target.session) body.session = target.session;
  if (mode) body.mode = mode;
  return api(`/v1/agents/${enc(target.agent.id)}/messages`, { method: "POST", json: body });
}

// A new session at `turnId` (a turn of session `fromLabel`) for agent `agentId` (none: the source's own
// agent, if it has one). Returns the new session.
export async function forkAt(fromLabel, turnId, agentId, title) {
  const body = { turn_id: turnId };
  if (agentId) body.agent = agentId;
  if (title) body.title = title;
  return api(`/v1/sessions/${enc(fromLabel)}/fork`, { method: "POST", json: body });
}

// The target that reaches a session made by forkAt or POST /v1/sessions.
// Re-run `turn` (full, with messages) as a fork: same question, a new answer on a branch of its own.
export async function regenerate(turn, agentId) {
  const text = userText(turn);
  if (!text.trim()) throw new Error("this turn has no message of the user to send again");
  const agent = agentId || (state.sessionInfo && state.sessionInfo.agent);
  if (!agent) throw new Error("no agent to answer: pick one (+ New agent registers one)");
  const from = turn.session_label;
  const created = turn.parent_turn_id
    ? await forkAt(onPath(turn) ? state.session : from, turn.parent_turn_id, agent, "Regenerated: " + text.slice(0, 60))
    : await api("/v1/sessions", { method: "POST", json: { agent, title: "Regenerated: " + text.slice(0, 60) } });
  await actions.loadSessions();
  await actions.selectSession(created.label);
  await actions.submit(text);
  return created;
}

function onPath(turn) {
  return Boolean(state.history && state.history.turns.some((t) => t.id === turn.id));
}
