// Small DOM and formatting helpers. Text from the server is always inserted as text nodes here;
// only markdown.js turns model text into elements, through a sanitizer.

export const $ = (id) => document.getElementById(id);

// el("button", {class: "x", onclick: fn, text: "Go"}, child, …): null/undefined/false children are skipped.
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

// Append children, skipping null/undefined/false (replaceChildren(null) would show the text "null").
export function append(node, children) {
  for (const child of children.flat()) {
    if (child !== null && child !== undefined && child !== false) node.append(child);
  }
  return node;
}

export function replace(node, ...children) {
  node.replaceChildren();
  return append(node, children);
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
export const enc = encodeURIComponent;

export function short(text, n) {
  const flat = (text || "").replace(/\s+/g, " ").trim();
  return flat.length > n ? flat.slice(0, n - 1) + "…" : flat;
}

export function textOf(content) {
  if (typeof content === "string") return content;
  return (content || []).filter((b) => b.type === "text").map((b) => b.text).join("");
}

// "just now", "5 min ago", "3 h ago", then the date.
export function ago(ms) {
  if (!ms) return "";
  const seconds = (Date.now() - ms) / 1000;
  if (seconds < 60) return "just now";
  if (seconds < 3600) return Math.round(seconds / 60) + " min ago";
  if (seconds < 86400) return Math.round(seconds / 3600) + " h ago";
  return new Date(ms).toLocaleDateString();
}

// A timestamp element: the clock time (the date too when not today), the full date on hover.
export function stamp(ms) {
  if (!ms) return null;
  const date = new Date(ms);
  const today = date.toDateString() === new Date().toDateString();
  const shown = today
    ? date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })
    : date.toLocaleString([], { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
  return el("time", { class: "stamp", datetime: date.toISOString(), title: date.toLocaleString(), text: shown });
}

export const money = (cost) => "$" + (cost || 0).toFixed(cost >= 1 ? 2 : 4);
export const tokens = (n) => (n >= 10000 ? (n / 1000).toFixed(1) + "k" : String(n || 0)) + " tok";

export function pretty(value) {
  try { return JSON.stringify(value, null, 2); } catch (_) { return String(value); }
}

// Copy text to the clipboard; a page served over plain http from another host has no
// navigator.clipboard, so fall back to a selected textarea.
export async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    await navigator.clipboard.writeText(text);
    return;
  }
  const area = el("textarea", { class: "offscreen", readonly: true });
  area.value = text;
  document.body.append(area);
  area.select();
  document.execCommand("copy");
  area.remove();
}

// A small button that copies what `get()` returns and says so for a moment.
export function copyButton(get, label) {
  const button = el("button", { type: "button", class: "copy", title: "Copy", text: label || "Copy" });
  button.addEventListener("click", async (event) => {
    event.stopPropagation();
    try {
      await copyText(get());
      button.textContent = "Copied";
      button.classList.add("done");
    } catch (_) {
      button.textContent = "Copy failed";
    }
    setTimeout(() => { button.textContent = label || "Copy"; button.classList.remove("done"); }, 1500);
  });
  return button;
}
