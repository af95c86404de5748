// The chat follows the bottom while the reader is there: a streaming reply stays in view. Scrolling
// up stops that (the reader is reading something earlier) and new output shows a "jump to latest"
// pill instead; the pill, or scrolling back to the bottom, resumes following.

import { $ } from "./dom.js";

const SLACK_PX = 48;
let following = true;

const box = () => $("messages");

function atBottom() {
  const b = box();
  return b.scrollHeight - b.scrollTop - b.clientHeight <= SLACK_PX;
}

export function isFollowing() {
  return following;
}

export function toBottom() {
  following = true;
  const b = box();
  b.scrollTop = b.scrollHeight;
  $("jump").hidden = true;
}

// Call after the chat's content changed size.
export function grew() {
  if (following) toBottom();
  else $("jump").hidden = false;
}

// Re-render without moving what the reader looks at (when they are not at the bottom).
export function keepPlace(render) {
  const b = box();
  const top = b.scrollTop;
  render();
  if (following) toBottom();
  else b.scrollTop = top;
}

export function wireFollow() {
  box().addEventListener("scroll", () => {
    following = atBottom();
    if (following) $("jump").hidden = true;
  }, { passive: true });
  $("jump").addEventListener("click", toBottom);
}
