// The turn tree of the selected session, drawn as a tree: a chain of turns is one rail, a fork opens
// one branch per child (the selected session's path first), the session's head is marked, the heads
// of the other sessions are buttons that open them, and a search dims every turn that does not match.

import { api } from "./api.js";
import { $, el, enc, replace, short, stamp, tokens } from "./dom.js";
import { actions, state } from "./state.js";

let lastTree = null;
let matchIndex = -1;

export async function loadTree() {
  const label = state.session;
  let tree;
  try {
    tree = await api(`/v1/sessions/${enc(label)}/tree`);
  } catch (error) {
    replace($("tree"), el("p", { class: "error", text: error.message }));
    return;
  }
  if (label !== state.session) return;
  lastTree = tree;
  renderTree(tree);
}

function renderTree(tree) {
  const hint = $("tree-hint");
  hint.hidden = tree.turns.length > 0;
  hint.textContent = "This session has no turn yet.";
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
  const pathFirst = (a, b) => Number(b.on_path) - Number(a.on_path) || a.started_at - b.started_at;
  const chain = (start, container) => {
    let turn = start;
    while (turn) {
      const kids = (children.get(turn.id) || []).slice().sort(pathFirst);
      container.append(turnNode(turn, tree.head_turn_id, kids.length));
      if (kids.length === 1) { turn = kids[0]; continue; }
      for (const kid of kids) {
        const branch = el("div", { class: "branch" + (kid.on_path ? " on-path" : ""), "data-branch": kid.id });
        container.append(branch);
        chain(kid, branch);
      }
      turn = null;
    }
  };
  const root = el("div", { class: "rail" });
  for (const turn of roots.sort(pathFirst)) chain(turn, root);
  if (tree.truncated) root.append(el("p", { class: "muted", text: "(the tree is larger; the oldest turns are shown)" }));
  replace($("tree"), root);
  applySearch();
}

function titleOf(label) {
  const known = state.sessions.find((s) => s.label === label);
  return (known && known.title) || label;
}

function turnNode(turn, headId, forks) {
  const classes = ["turn-node"];
  if (turn.on_path) classes.push("on-path");
  if (turn.id === state.turn) classes.push("current");
  if (turn.id === headId) classes.push("head");
  const preview = turn.turn_type === "compaction" ? "⋯ conversation compacted" : turn.preview || `(turn …${turn.id.slice(-6)})`;
  const others = turn.heads_of.filter((label) => label !== state.session);
  return el("div", { class: classes.join(" "), "data-turn": turn.id,
                     "data-search": [turn.preview, turn.model, turn.id, ...turn.heads_of.map(titleOf)].join(" ").toLowerCase() },
    el("button", { type: "button", class: "node", title: turn.preview || turn.id, onclick: () => actions.openTurn(turn.id) },
      el("span", { class: "dot", "aria-hidden": "true" }),
      el("span", { class: "n", text: "#" + (turn.depth + 1) }),
      el("span", { class: "preview", text: short(preview, 120) }),
      turn.status !== "completed" ? el("span", { class: "tag " + turn.status, text: statusWord(turn.status) }) : null,
      forks > 1 ? el("span", { class: "tag fork-count", title: "forks: several turns continue from here", text: `${forks} branches` }) : null,
      turn.id === headId ? el("span", { class: "tag head-mark", text: "head" }) : null,
      el("span", { class: "tok", text: tokens(turn.total_tokens) })),
    others.length
      ? el("div", { class: "heads" }, others.map((label) => el("button", {
          type: "button", class: "tag session-tag", "data-open": label, title: `Open session ${label}`,
          text: "⇢ " + short(titleOf(label), 40), onclick: () => actions.selectSession(label) })))
      : null);
}

export function statusWord(status) {
  return status === "aborted" ? "stopped" : status;
}

// Dim what does not match the search box; Enter goes to the next match.
function applySearch() {
  const query = $("tree-search").value.trim().toLowerCase();
  const nodes = [...document.querySelectorAll("#tree .turn-node")];
  let count = 0;
  for (const node of nodes) {
    const hit = Boolean(query) && node.dataset.search.includes(query);
    node.classList.toggle("match", hit);
    node.classList.toggle("dim", Boolean(query) && !hit);
    if (hit) count += 1;
  }
  $("tree-count").textContent = query ? `${count} match${count === 1 ? "" : "es"}` : "";
  matchIndex = -1;
}

function nextMatch() {
  const matches = [...document.querySelectorAll("#tree .turn-node.match")];
  if (!matches.length) return;
  matchIndex = (matchIndex + 1) % matches.length;
  const node = matches[matchIndex];
  node.scrollIntoView({ block: "center" });
  actions.openTurn(node.dataset.turn);
}

export function markCurrentTurn(turnId) {
  for (const node of document.querySelectorAll("#tree .turn-node")) {
    node.classList.toggle("current", node.dataset.turn === turnId);
  }
}

export function treeTurn(turnId) {
  return lastTree ? lastTree.turns.find((t) => t.id === turnId) || null : null;
}

export function wireTree() {
  $("tree-search").addEventListener("input", applySearch);
  $("tree-search").addEventListener("keydown", (event) => {
    if (event.key === "Enter") { event.preventDefault(); nextMatch(); }
  });
}
