// The model picker: every model from /v1/models with its pool status. Picking an unloaded
// model asks the pool to load it (POST /admin/models/{id}/load) and shows progress: the pool
// reports states, not bytes, so the bar is indeterminate with the elapsed time and the state
// polled from /admin/models.

import { request } from "./api.js";
import { $, h, formatSeconds } from "./dom.js";

const SELECTED = "sluice.model";
let models = [];
let loading = null;

/** The chosen model id. */
export function selectedModel() {
  return $("model").value;
}

/** The status of `id` as last listed ("loaded", "unloaded", ...). */
export function statusOf(id) {
  const m = models.find((x) => x.id === id);
  return m ? m.status || "loaded" : "unknown";
}

/** What the prompts of `id` may hold (`["text", "image"]`), or null while that is unknown
 * (a pooled model not loaded yet: its files decide). */
export function inputModalities(id) {
  const m = models.find((x) => x.id === id);
  return m && m.input_modalities ? m.input_modalities : null;
}

/** Whether `id` is known to take images. */
export function takesImages(id) {
  return (inputModalities(id) || []).includes("image");
}

/** Re-reads /v1/models (the picker then fires a `listed` event) and redraws the picker, keeping the selection. */
export async function refreshModels() {
  const list = await request("/v1/models");
  models = list.data;
  const select = $("model");
  const keep = select.value || localStorage.getItem(SELECTED);
  select.replaceChildren(...models.map((m) =>
    h("option", { value: m.id }, `${m.id} (${m.status || "loaded"})`)));
  if (models.some((m) => m.id === keep)) select.value = keep;
  showStatus();
  select.dispatchEvent(new Event("listed"));
  return models;
}

function showStatus() {
  const id = selectedModel();
  const status = statusOf(id);
  $("model-status").replaceChildren(id ? h("span", {}, `${id} `, h("span", { class: `badge ${status}` }, status)) : "no model");
}

/** Loads `id` if it is not loaded yet; resolves when it is. Shows progress meanwhile. */
export async function ensureLoaded(id) {
  if (statusOf(id) === "loaded") return;
  if (loading && loading.id === id) return loading.done;
  const panel = $("load-progress");
  const text = panel.querySelector(".text");
  panel.hidden = false;
  panel.classList.remove("done", "failed");
  const started = performance.now();
  let state = "loading";
  const tick = setInterval(async () => {
    text.textContent = `Loading ${id}: ${state}, ${formatSeconds((performance.now() - started) / 1000)}`;
    try {
      const pool = await request("/admin/models");
      const m = pool.data.find((x) => x.id === id);
      if (m) state = m.status;
    } catch {
      // The load request itself reports failures.
    }
  }, 250);
  text.textContent = `Loading ${id}…`;
  const done = request(`/admin/models/${encodeURIComponent(id).replace(/%2F/g, "/")}/load`, { method: "POST" })
    .then(() => {
      panel.classList.add("done");
      text.textContent = `${id} loaded in ${formatSeconds((performance.now() - started) / 1000)}`;
      setTimeout(() => { if (!loading) panel.hidden = true; }, 4000);
    })
    .catch((err) => {
      panel.classList.add("failed");
      text.textContent = `Loading ${id} failed (${err.status || "network"}): ${err.message}`;
      throw err;
    })
    .finally(async () => {
      clearInterval(tick);
      loading = null;
      await refreshModels().catch(() => {});
    });
  loading = { id, done };
  showStatus();
  return done;
}

/** Wires the picker: remembers the choice and loads an unloaded model when it is picked. */
export function initModelPicker(onChange) {
  $("model").addEventListener("change", () => {
    const id = selectedModel();
    localStorage.setItem(SELECTED, id);
    showStatus();
    onChange(id);
    ensureLoaded(id).catch(() => {});
  });
}
