// The chat playground: conversations, streaming replies rendered as Markdown, reasoning
// folded away, stop / regenerate / edit-and-branch, sampling parameters and per-reply speed.

import { stream, ApiError } from "./api.js";
import { initAttachments, messageContent, takeAttachments, thumbnails } from "./attachments.js";
import * as store from "./conversations.js";
import { $, h, download, formatSeconds } from "./dom.js";
import { renderMarkdown } from "./markdown.js";
import { ensureLoaded, initModelPicker, refreshModels, selectedModel } from "./models.js";

const PARAMS = ["temperature", "top_p", "top_k", "min_p", "max_tokens", "seed"];
const SETTINGS = "sluice.settings";

let conversations = [];
let current = null;
let running = null; // {controller, conv} while a reply streams

/** Splits `<think>…</think>` reasoning (as Qwen3-style models write it) from the answer. */
export function splitReasoning(text) {
  const open = text.indexOf("<think>");
  if (open < 0 || text.slice(0, open).trim()) return { reasoning: "", answer: text };
  const close = text.indexOf("</think>", open);
  if (close < 0) return { reasoning: text.slice(open + 7), answer: "" };
  return { reasoning: text.slice(open + 7, close).trim(), answer: text.slice(close + 8).trimStart() };
}

function saveSettings() {
  const s = { system: $("system").value, format: $("p-format").value, schema: $("p-schema").value };
  for (const p of PARAMS) s[p] = $(`p-${p}`).value;
  localStorage.setItem(SETTINGS, JSON.stringify(s));
}

function restoreSettings() {
  let s = {};
  try { s = JSON.parse(localStorage.getItem(SETTINGS) || "{}"); } catch { s = {}; }
  for (const p of PARAMS) if (s[p] !== undefined) $(`p-${p}`).value = s[p];
  if (s.system !== undefined) $("system").value = s.system;
  if (s.format) $("p-format").value = s.format;
  if (s.schema) $("p-schema").value = s.schema;
  showSchema();
}

function showSchema() {
  const on = $("p-format").value === "json_schema";
  $("p-schema").hidden = !on;
  $("p-schema-label").hidden = !on;
}

/** The sampling fields of a request body; empty inputs are left to the server's defaults. */
export function samplingBody() {
  const body = {};
  for (const p of PARAMS) {
    const raw = $(`p-${p}`).value.trim();
    if (raw === "") continue;
    const n = Number(raw);
    if (!Number.isFinite(n)) throw new Error(`${p} is not a number`);
    if (p === "top_k" && n === -1) continue;
    body[p] = n;
  }
  const format = $("p-format").value;
  if (format === "json_object") body.response_format = { type: "json_object" };
  if (format === "json_schema") {
    let schema;
    try { schema = JSON.parse($("p-schema").value); } catch (e) { throw new Error(`the JSON schema does not parse: ${e.message}`); }
    body.response_format = { type: "json_schema", json_schema: { name: "schema", schema, strict: true } };
  }
  return body;
}

function persist() {
  try { store.saveAll(conversations); } catch (e) { console.warn("could not save conversations", e); }
}

function select(conv) {
  current = conv;
  renderList();
  renderMessages();
}

function renderList() {
  $("conversation-list").replaceChildren(...conversations.map((c) =>
    h("li", { "aria-current": c === current ? "true" : "false" },
      h("button", { type: "button", class: "open", title: c.title, onclick: () => select(c) }, c.title),
      h("button", {
        type: "button", class: "delete", "aria-label": `Delete ${c.title}`,
        onclick: () => {
          conversations = conversations.filter((x) => x !== c);
          if (current === c) current = conversations[0] || newConversation();
          persist();
          renderList();
          renderMessages();
        },
      }, "×"))));
}

function newConversation() {
  const conv = store.create(selectedModel());
  conversations.unshift(conv);
  return conv;
}

function statsLine(m) {
  const s = m.stats || {};
  const parts = [];
  if (s.model) parts.push(s.model);
  if (s.ttft !== undefined) parts.push(`TTFT ${formatSeconds(s.ttft)}`);
  if (s.tokensPerSecond !== undefined) parts.push(`${s.tokensPerSecond.toFixed(1)} tok/s`);
  if (s.completionTokens !== undefined) parts.push(`${s.completionTokens} tokens`);
  if (s.promptTokens !== undefined) parts.push(`prompt ${s.promptTokens}`);
  if (s.finish) parts.push(`finish: ${s.finish}`);
  const line = h("div", { class: "meta" }, parts.join(" · "));
  if (s.stopped) line.prepend(h("span", { class: "stopped" }, "stopped · "));
  if (s.error) line.append(h("div", { class: "failed" }, s.error));
  return line;
}

function messageBody(m) {
  const body = h("div", { class: "body" });
  const { reasoning, answer } = m.reasoning !== undefined && m.reasoning !== ""
    ? { reasoning: m.reasoning, answer: m.content } : splitReasoning(m.content);
  if (reasoning) {
    body.append(h("details", { class: "reasoning" },
      h("summary", {}, `Reasoning (${reasoning.split(/\s+/).filter(Boolean).length} words)`),
      renderMarkdown(reasoning)));
  }
  body.append(thumbnails(m.images) || "");
  body.append(m.role === "assistant" ? renderMarkdown(answer) : h("p", { style: "white-space:pre-wrap;margin:0" }, answer));
  return body;
}

function messageItem(m, index) {
  const actions = h("span", { class: "actions" });
  if (m.role === "user" && !running) {
    actions.append(h("button", { type: "button", "aria-label": "Edit and branch", onclick: () => edit(index) }, "Edit"));
  }
  actions.append(h("button", {
    type: "button", "aria-label": "Copy message",
    onclick: () => navigator.clipboard && navigator.clipboard.writeText(m.content).catch(() => {}),
  }, "Copy"));
  return h("li", { class: `message ${m.role}`, dataset: { index: String(index) } },
    h("div", { class: "who" }, m.role, actions),
    messageBody(m),
    m.role === "assistant" ? statsLine(m) : null);
}

function renderMessages() {
  const list = $("messages");
  const items = [];
  const system = $("system").value.trim();
  if (system) items.push(h("li", { class: "message system" }, h("div", { class: "who" }, "system"), system));
  current.messages.forEach((m, i) => items.push(messageItem(m, i)));
  list.replaceChildren(...items);
  list.scrollTop = list.scrollHeight;
  updateButtons();
}

function updateButtons() {
  $("send").disabled = !!running;
  $("stop").disabled = !running;
  const last = current.messages[current.messages.length - 1];
  $("regenerate").disabled = !!running || !last || last.role !== "assistant";
}

function edit(index) {
  const item = $("messages").querySelector(`[data-index="${index}"]`);
  const m = current.messages[index];
  const area = h("textarea", { rows: "3", "aria-label": "Edited message" });
  area.value = m.content;
  const save = () => {
    const conv = store.branch(current, index);
    conv.messages.push({ role: "user", content: area.value, ...(m.images ? { images: m.images } : {}) });
    conversations.unshift(conv);
    select(conv);
    persist();
    generate();
  };
  item.classList.add("editing");
  item.querySelector(".body").replaceWith(h("div", { class: "body" }, area,
    h("div", { class: "row" },
      h("button", { type: "button", onclick: save }, "Save as branch and send"),
      h("button", { type: "button", class: "ghost", onclick: renderMessages }, "Cancel"))));
  area.focus();
}

/** Streams a reply to the current conversation's messages. */
async function generate() {
  const conv = current;
  const model = selectedModel();
  let body;
  try {
    body = { model, ...samplingBody(), stream_options: { include_usage: true } };
  } catch (e) {
    conv.messages.push({ role: "assistant", content: "", stats: { error: e.message } });
    renderMessages();
    return;
  }
  const system = $("system").value.trim();
  body.messages = [...(system ? [{ role: "system", content: system }] : []),
    ...conv.messages.map((m) => ({ role: m.role, content: messageContent(m) }))];
  conv.model = model;
  const reply = { role: "assistant", content: "", reasoning: "", stats: { model } };
  conv.messages.push(reply);
  running = { controller: new AbortController(), conv };
  renderMessages();
  const item = $("messages").lastChild;
  item.querySelector(".body").classList.add("cursor");
  let frame = 0;
  const redraw = () => {
    frame = 0;
    const fresh = messageBody(reply);
    fresh.classList.add("cursor");
    item.querySelector(".body").replaceWith(fresh);
    $("messages").scrollTop = $("messages").scrollHeight;
  };
  const sent = performance.now();
  let first = 0;
  let chunks = 0;
  try {
    await ensureLoaded(model);
    await stream("/v1/chat/completions", body, (chunk) => {
      if (chunk.usage) {
        reply.stats.completionTokens = chunk.usage.completion_tokens;
        reply.stats.promptTokens = chunk.usage.prompt_tokens;
      }
      const choice = chunk.choices && chunk.choices[0];
      if (!choice) return;
      const delta = choice.delta || {};
      const piece = (delta.content || "") + (delta.reasoning_content || delta.reasoning || "");
      if (piece) {
        if (!first) first = performance.now();
        chunks += 1;
        reply.content += delta.content || "";
        reply.reasoning += delta.reasoning_content || delta.reasoning || "";
        if (!frame) frame = requestAnimationFrame(redraw);
      }
      if (choice.finish_reason) reply.stats.finish = choice.finish_reason;
    }, running.controller.signal);
  } catch (e) {
    if (e.name === "AbortError") reply.stats.stopped = true;
    else reply.stats.error = e instanceof ApiError ? `${e.status || "stream"}: ${e.message}` : e.message;
  } finally {
    if (frame) cancelAnimationFrame(frame);
    const end = performance.now();
    if (first) {
      reply.stats.ttft = (first - sent) / 1000;
      const tokens = reply.stats.completionTokens ?? chunks;
      if (reply.stats.completionTokens === undefined) reply.stats.completionTokens = chunks;
      if (end > first && tokens > 1) reply.stats.tokensPerSecond = (tokens - 1) / ((end - first) / 1000);
    }
    running = null;
    conv.updated = Date.now();
    persist();
    if (current === conv) renderMessages();
    renderList();
  }
}

function send(event) {
  event.preventDefault();
  const text = $("prompt").value;
  const hasImages = $("attachments").childElementCount > 0;
  if ((!text.trim() && !hasImages) || running) return;
  if (!current.messages.length) current.title = store.titleFrom(text || "Image");
  const images = takeAttachments();
  current.messages.push({ role: "user", content: text, ...(images.length ? { images } : {}) });
  $("prompt").value = "";
  generate();
}

/** Wires the playground: restores settings and conversations, lists the models. */
export async function initPlayground() {
  restoreSettings();
  conversations = store.loadAll();
  current = conversations[0] || null;
  initModelPicker(() => {});
  initAttachments();
  await refreshModels().catch((e) => console.warn("models:", e.message));
  if (!current) current = newConversation();
  renderList();
  renderMessages();

  $("composer").addEventListener("submit", send);
  $("prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) send(e);
  });
  $("stop").addEventListener("click", () => running && running.controller.abort());
  $("regenerate").addEventListener("click", () => {
    const last = current.messages[current.messages.length - 1];
    if (running || !last || last.role !== "assistant") return;
    current.messages.pop();
    generate();
  });
  $("new-chat").addEventListener("click", () => { select(newConversation()); $("prompt").focus(); });
  $("export-chats").addEventListener("click", () =>
    download(`sluice-conversations-${new Date().toISOString().slice(0, 10)}.json`, store.exportText(conversations)));
  $("import-chats").addEventListener("change", async (e) => {
    const file = e.target.files[0];
    e.target.value = "";
    if (!file) return;
    try {
      const n = store.importText(conversations, await file.text());
      persist();
      renderList();
      $("model-status").textContent = `Imported ${n} conversation${n === 1 ? "" : "s"}`;
    } catch (err) {
      $("model-status").textContent = `Import failed: ${err.message}`;
    }
  });
  for (const p of PARAMS) $(`p-${p}`).addEventListener("change", saveSettings);
  $("system").addEventListener("change", () => { saveSettings(); renderMessages(); });
  $("p-schema").addEventListener("change", saveSettings);
  $("p-format").addEventListener("change", () => { showSchema(); saveSettings(); });
}
