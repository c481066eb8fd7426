// The page's client of sluice's public API: bearer key from local storage, OpenAI error
// bodies turned into exceptions, and server-sent events read from a fetch body.

const KEY_STORAGE = "sluice.apiKey";

/** An HTTP error with the server's OpenAI error message. */
export class ApiError extends Error {
  constructor(status, message, code) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** The API key kept in this browser, or "". */
export function apiKey() {
  return localStorage.getItem(KEY_STORAGE) || "";
}

/** Keeps (or with "" forgets) the API key in this browser only. */
export function setApiKey(key) {
  if (key) localStorage.setItem(KEY_STORAGE, key);
  else localStorage.removeItem(KEY_STORAGE);
}

/** Called with the failed request's ApiError whenever the server answers 401. */
let onUnauthorized = () => {};
export function whenUnauthorized(callback) {
  onUnauthorized = callback;
}

function headers(json) {
  const h = {};
  if (json) h["Content-Type"] = "application/json";
  const key = apiKey();
  if (key) h.Authorization = `Bearer ${key}`;
  return h;
}

async function failure(res) {
  let message = `${res.status} ${res.statusText}`;
  let code;
  try {
    const body = await res.json();
    if (body && body.error) {
      message = body.error.message || message;
      code = body.error.code;
    }
  } catch {
    // Not JSON: keep the status line.
  }
  const err = new ApiError(res.status, message, code);
  if (res.status === 401) onUnauthorized(err);
  return err;
}

/**
 * GET or POST a JSON API route; throws ApiError on a non-2xx answer. A POST is always JSON
 * (`{}` where the route takes no body): the admin routes refuse any other content type.
 */
export async function request(path, { method = "GET", body, signal } = {}) {
  const json = body === undefined && method !== "GET" ? {} : body;
  const res = await fetch(path, {
    method,
    headers: headers(json !== undefined),
    body: json === undefined ? undefined : JSON.stringify(json),
    signal,
  });
  if (!res.ok) throw await failure(res);
  const type = res.headers.get("content-type") || "";
  return type.includes("json") ? res.json() : res.text();
}

/**
 * POSTs a streaming request and calls onEvent(json) for every `data:` event until `[DONE]`.
 * Aborting `signal` closes the connection, which is how the server learns to stop.
 */
export async function stream(path, body, onEvent, signal) {
  const res = await fetch(path, {
    method: "POST",
    headers: headers(true),
    body: JSON.stringify({ ...body, stream: true }),
    signal,
  });
  if (!res.ok) throw await failure(res);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = event
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trimStart())
        .join("\n");
      if (!data) continue;
      if (data === "[DONE]") return;
      const json = JSON.parse(data);
      if (json.error) throw new ApiError(0, json.error.message || "stream error", json.error.code);
      onEvent(json);
    }
  }
}
