// The selected session's live events over SSE, read with fetch (EventSource cannot send the
// Authorization header), reconnecting with Last-Event-ID and backing off from 1 s to 15 s (not for a
// session the server does not know: a 404 ends it).

import { askToken, authHeaders } from "./api.js";
import { $, enc, sleep } from "./dom.js";

let controller = null;
let lastEventId = null;

function setLive(on) {
  const badge = $("live");
  badge.textContent = on ? "live" : "offline";
  badge.className = "badge " + (on ? "on" : "off");
}

export function closeStream() {
  if (controller) controller.abort();
  controller = null;
  setLive(false);
}

// Parse one SSE frame and hand {event, data} to `handle`.
function dispatch(frame, handle) {
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
  if (id !== null) lastEventId = id;
  if (!data.length) return;
  let parsed;
  try { parsed = JSON.parse(data.join("\n")); } catch (_) { return; }
  handle(event, parsed);
}

export async function openStream(label, handle) {
  closeStream();
  lastEventId = null;
  const mine = new AbortController();
  controller = mine;
  let backoff = 1000;
  while (!mine.signal.aborted) {
    try {
      const headers = authHeaders(lastEventId ? { "Last-Event-ID": lastEventId } : {});
      const response = await fetch(`/v1/sessions/${enc(label)}/events`, { headers, signal: mine.signal });
      if (response.status === 401) { await askToken("The server asks for a token to stream events."); continue; }
      if (response.status === 404) { setLive(false); return; }  // no such session: asking again will not make one
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
          dispatch(buffer.slice(0, end), handle);
          buffer = buffer.slice(end + 2);
        }
      }
    } catch (_) {
      if (mine.signal.aborted) return;
    }
    if (mine.signal.aborted) return;
    setLive(false);
    await sleep(backoff);
    backoff = Math.min(backoff * 2, 15000);
  }
}
