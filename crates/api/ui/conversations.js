// Conversations kept in this browser's local storage, with export to and import from a JSON
// file. A conversation: {id, title, created, updated, model, parent?, messages: [{role,
// content, images? (data URLs), reasoning?, stats?}]}. Editing an earlier message branches: a
// new conversation with the messages before it, so the original stays as it was.

const STORAGE = "sluice.conversations";
const FORMAT = "sluice.conversations.v1";

function newId() {
  return `c${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
}

/** All conversations, newest first. */
export function loadAll() {
  try {
    const list = JSON.parse(localStorage.getItem(STORAGE) || "[]");
    return Array.isArray(list) ? list.filter(valid) : [];
  } catch {
    return [];
  }
}

/** Writes the list back; a full storage quota is reported to the caller as an exception. */
export function saveAll(list) {
  list.sort((a, b) => b.updated - a.updated);
  localStorage.setItem(STORAGE, JSON.stringify(list));
}

/** A fresh, empty conversation. */
export function create(model) {
  const now = Date.now();
  return { id: newId(), title: "New chat", created: now, updated: now, model, messages: [] };
}

/** A branch of `conv` holding its messages before index `at`. */
export function branch(conv, at) {
  const copy = create(conv.model);
  copy.parent = conv.id;
  copy.title = `${conv.title} (branch)`;
  copy.messages = structuredClone(conv.messages.slice(0, at));
  return copy;
}

/** A title from the first user message. */
export function titleFrom(text) {
  const line = text.trim().split("\n")[0];
  return line.length > 48 ? `${line.slice(0, 47)}…` : line || "New chat";
}

function valid(c) {
  return c && typeof c.id === "string" && Array.isArray(c.messages) &&
    c.messages.every((m) => m && typeof m.role === "string" && typeof m.content === "string");
}

/** The export file's text. */
export function exportText(list) {
  return JSON.stringify({ format: FORMAT, exported: new Date().toISOString(), conversations: list }, null, 2);
}

/**
 * Merges an export file into `list` (same id: the newer copy wins) and returns how many
 * conversations it brought; throws on a file that is not an export.
 */
export function importText(list, text) {
  const data = JSON.parse(text);
  if (!data || data.format !== FORMAT || !Array.isArray(data.conversations)) {
    throw new Error("not a sluice conversations export");
  }
  const incoming = data.conversations.filter(valid);
  for (const conv of incoming) {
    const at = list.findIndex((c) => c.id === conv.id);
    if (at < 0) list.push(conv);
    else if ((conv.updated || 0) > (list[at].updated || 0)) list[at] = conv;
  }
  return incoming.length;
}
