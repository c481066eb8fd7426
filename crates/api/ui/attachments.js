// Images attached to the next chat message: picked with the file button, pasted into the
// message box or dropped onto the composer, shown as removable thumbnails, and sent as
// `image_url` data-URL parts. Only offered when the selected model takes images
// (`input_modalities` in /v1/models).

import { $, h, formatBytes } from "./dom.js";
import { inputModalities, takesImages } from "./models.js";

/** Largest image attached: its data URL must fit the server's 4 MiB request body. */
const MAX_IMAGE_BYTES = 2.5 * 1024 * 1024;
/** Most images one message carries (the server takes 16 per request). */
const MAX_IMAGES = 8;

let attached = []; // [{name, url}]

/** The data URLs attached so far, emptied: the message that takes them is being sent. */
export function takeAttachments() {
  const urls = attached.map((a) => a.url);
  attached = [];
  render();
  return urls;
}

/** A message's content as the API takes it: plain text, or its images then its text. */
export function messageContent(m) {
  if (!m.images || !m.images.length) return m.content;
  return [...m.images.map((url) => ({ type: "image_url", image_url: { url } })),
    ...(m.content ? [{ type: "text", text: m.content }] : [])];
}

/** Thumbnails of a sent message's images (nothing when it has none). */
export function thumbnails(images) {
  if (!images || !images.length) return null;
  return h("div", { class: "thumbs" }, images.map((url, i) =>
    h("img", { src: url, alt: `Image ${i + 1}`, class: "thumb" })));
}

function say(text) {
  $("attach-status").textContent = text;
}

function render() {
  $("attachments").replaceChildren(...attached.map((a, i) =>
    h("li", { class: "attachment" },
      h("img", { src: a.url, alt: a.name, class: "thumb" }),
      h("button", {
        type: "button", class: "ghost remove", "aria-label": `Remove ${a.name}`,
        onclick: () => { attached.splice(i, 1); render(); say(`Removed ${a.name}`); },
      }, "×"))));
}

function readAsDataUrl(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

/** Attaches the image files among `files`; says why any is left out. */
async function attach(files) {
  const images = [...files].filter((f) => f.type.startsWith("image/"));
  if (!images.length) return;
  const why = unavailable($("model").value);
  if (why) {
    say(why);
    return;
  }
  for (const file of images) {
    const name = file.name || "pasted image";
    if (attached.length >= MAX_IMAGES) { say(`At most ${MAX_IMAGES} images per message`); break; }
    if (file.size > MAX_IMAGE_BYTES) {
      say(`${name} is ${formatBytes(file.size)}; images up to ${formatBytes(MAX_IMAGE_BYTES)} are sent`);
      continue;
    }
    attached.push({ name, url: await readAsDataUrl(file) });
    say(`Attached ${name}`);
  }
  render();
}

/** Why images cannot go to `model` now, or "" when they can. */
function unavailable(model) {
  if (!model) return "Pick a model to attach images";
  if (takesImages(model)) return "";
  if (!inputModalities(model)) return `Images: ${model} is not loaded yet, so whether it takes them is unknown`;
  return `Images: ${model} takes text only`;
}

/** Enables the attach button for a model that takes images; otherwise disables it, says why
 * and drops what was attached. */
function updateAvailability() {
  const why = unavailable($("model").value);
  const button = $("attach");
  button.disabled = !!why;
  button.title = why || "Attach images (or paste or drop them into the message box)";
  $("attach-reason").textContent = why;
  if (why && attached.length) {
    attached = [];
    render();
  }
}

/** Wires the file button, pasting into the message box and dropping onto the composer. */
export function initAttachments() {
  const input = $("attach-input");
  $("attach").addEventListener("click", () => input.click());
  input.addEventListener("change", async () => {
    const files = [...input.files];
    input.value = "";
    await attach(files);
  });
  $("prompt").addEventListener("paste", (e) => {
    const files = e.clipboardData ? [...e.clipboardData.files] : [];
    if (files.some((f) => f.type.startsWith("image/"))) {
      e.preventDefault();
      attach(files);
    }
  });
  const composer = $("composer");
  composer.addEventListener("dragover", (e) => {
    if (e.dataTransfer && [...e.dataTransfer.types].includes("Files")) {
      e.preventDefault();
      composer.classList.add("dropping");
    }
  });
  composer.addEventListener("dragleave", () => composer.classList.remove("dropping"));
  composer.addEventListener("drop", (e) => {
    composer.classList.remove("dropping");
    if (!e.dataTransfer || !e.dataTransfer.files.length) return;
    e.preventDefault();
    attach(e.dataTransfer.files);
  });
  $("model").addEventListener("change", updateAvailability);
  $("model").addEventListener("listed", updateAvailability);
  updateAvailability();
}
