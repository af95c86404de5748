// Markdown for replies: markdown-it renders, DOMPurify sanitizes, and only its DOM fragment is inserted.
// Raw HTML in model text is escaped by markdown-it (html: false) and anything that still looks like
// markup is dropped by DOMPurify, so a reply can never run script or load content from elsewhere.
// Both libraries are vendored (static/vendor/, licences in LICENSES.md): no build step, no CDN.

import { copyButton, el } from "./dom.js";

const md = window.markdownit({ html: false, linkify: true, breaks: true, typographer: false });
md.disable("image"); // an image would be fetched from wherever the model says; its link is shown instead

const PURIFY = { RETURN_DOM_FRAGMENT: true, FORBID_TAGS: ["style", "form", "input", "img"], FORBID_ATTR: ["style"] };

// The sanitized elements of `text` rendered as Markdown, with copy buttons on code blocks.
export function renderMarkdown(text) {
  const fragment = window.DOMPurify.sanitize(md.render(text || ""), PURIFY);
  for (const link of fragment.querySelectorAll("a[href]")) {
    link.setAttribute("target", "_blank");
    link.setAttribute("rel", "noopener noreferrer");
  }
  for (const pre of fragment.querySelectorAll("pre")) {
    const code = pre.querySelector("code");
    const language = code && /language-([\w+-]+)/.exec(code.className || "");
    const bar = el("div", { class: "code-bar" },
      el("span", { class: "lang", text: language ? language[1] : "" }),
      copyButton(() => (code || pre).textContent));
    const block = el("div", { class: "code" });
    pre.replaceWith(block);
    block.append(bar, pre);
  }
  return fragment;
}

// A reply that grows while it streams: the text is kept raw and the Markdown re-rendered at most
// every RENDER_MS (an unclosed code fence renders as a code block until it closes).
const RENDER_MS = 60;

export class LiveMarkdown {
  constructor(node, onRender) {
    this.node = node;
    this.text = "";
    this.timer = null;
    this.onRender = onRender || (() => {});
  }

  append(piece) {
    this.text += piece;
    if (this.timer === null) this.timer = setTimeout(() => this.flush(), RENDER_MS);
  }

  flush() {
    clearTimeout(this.timer);
    this.timer = null;
    this.node.replaceChildren(renderMarkdown(this.text));
    this.onRender();
  }
}
