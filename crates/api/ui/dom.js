// Small DOM and formatting helpers shared by the views. Elements are built with the DOM API,
// never from HTML strings, so model output and user text can never inject markup.

/** Creates an element: h("p", {class: "x", onclick: f}, "text", child). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    // Through the CSSOM: the page's content security policy refuses style attributes.
    else if (key === "style") el.style.cssText = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key in el && typeof value !== "string") el[key] = value;
    else el.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** Shorthand for document.getElementById. */
export const $ = (id) => document.getElementById(id);

/** 1536 -> "1.5 KiB". */
export function formatBytes(bytes) {
  if (!Number.isFinite(bytes)) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (bytes >= 1024 && i < units.length - 1) { bytes /= 1024; i += 1; }
  return `${bytes.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

/** Seconds as "850 ms" or "2.31 s". */
export function formatSeconds(s) {
  if (!Number.isFinite(s)) return "–";
  if (s < 0.01) return `${(s * 1000).toFixed(1).replace(/\.0$/, "")} ms`;
  return s < 1 ? `${Math.round(s * 1000)} ms` : `${s.toFixed(2)} s`;
}

/** A unix time (seconds) as "3 min ago". */
export function ago(unixSeconds) {
  if (!unixSeconds) return "–";
  const s = Math.max(0, Date.now() / 1000 - unixSeconds);
  if (s < 60) return `${Math.round(s)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  return `${(s / 3600).toFixed(1)} h ago`;
}

/** Saves text as a file download. */
export function download(filename, text, type = "application/json") {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = h("a", { href: url, download: filename });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
