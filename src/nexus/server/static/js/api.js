// The API client: bearer token (kept in this tab's sessionStorage), JSON in and out, one error shape.

import { $ } from "./dom.js";

const TOKEN_KEY = "nexus-token";
let token = sessionStorage.getItem(TOKEN_KEY) || "";
let tokenAsk = null; // a pending token prompt (one at a time)

export class ApiError extends Error {
  constructor(status, type, message) {
    super(message);
    this.status = status;
    this.type = type;
  }
}

export function authHeaders(extra) {
  const headers = Object.assign({}, extra || {});
  if (token) headers.Authorization = "Bearer " + token;
  return headers;
}

// api(path, {method, json}) → the answer's JSON (null for 204); throws ApiError with the server's message.
export async function api(path, options) {
  const opts = options || {};
  const headers = authHeaders(opts.json !== undefined ? { "Content-Type": "application/json" } : {});
  const body = opts.json !== undefined ? JSON.stringify(opts.json) : undefined;
  let response;
  try {
    response = await fetch(path, { method: opts.method || "GET", headers, body });
  } catch (error) {
    setConn(false);
    throw new ApiError(0, "network", "cannot reach the server (" + error.message + ")");
  }
  if (response.status === 401) {
    await askToken(token ? "The server refused that token. Enter another one." : null);
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

export function askToken(why) {
  if (tokenAsk) return tokenAsk;
  const dialog = $("token-dialog");
  if (why) $("token-why").textContent = why;
  tokenAsk = new Promise((resolve) => {
    $("token-form").onsubmit = (event) => {
      event.preventDefault();
      setToken($("token-input").value.trim());
      dialog.close();
      tokenAsk = null;
      resolve();
    };
  });
  if (!dialog.open) dialog.showModal();
  $("token-input").focus();
  return tokenAsk;
}

function setToken(value) {
  token = value;
  sessionStorage.setItem(TOKEN_KEY, token);
}

// `nexus serve` prints the page's address with #token=… when it made the token itself
// (require_token): keep it for this tab, and take it out of the address (history, bookmarks).
export function takeTokenFromAddress() {
  const params = new URLSearchParams(location.hash.slice(1));
  const given = params.get("token");
  if (!given) return;
  setToken(given);
  params.delete("token");
  const rest = params.toString();
  history.replaceState(null, "", location.pathname + location.search + (rest ? "#" + rest : ""));
}

export function setConn(ok, message) {
  const conn = $("conn");
  conn.textContent = ok ? "connected" : message || "cannot reach the server";
  conn.classList.toggle("bad", !ok);
}
