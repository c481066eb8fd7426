// Raw completion mode: the prompt goes to /v1/completions as is (no chat template) and every
// generated token is shown with its log-probability and the top alternatives on hover or
// keyboard focus (arrow keys move between tokens).

import { stream, ApiError } from "./api.js";
import { $, h, formatSeconds } from "./dom.js";
import { ensureLoaded, selectedModel } from "./models.js";
import { samplingBody } from "./playground.js";

const TOP_LOGPROBS = 5;
let controller = null;

function shade(logprob) {
  const p = Math.exp(logprob);
  return p >= 0.6 ? "p-high" : p >= 0.2 ? "p-mid" : "p-low";
}

function percent(logprob) {
  return `${(Math.exp(logprob) * 100).toFixed(1)}%`;
}

function showTip(span) {
  const tip = $("token-tip");
  const out = $("raw-output");
  for (const el of out.querySelectorAll(".tok.active")) el.classList.remove("active");
  span.classList.add("active");
  const chosen = span.dataset.token;
  const logprob = Number(span.dataset.logprob);
  const top = JSON.parse(span.dataset.top || "{}");
  const rows = Object.entries(top).sort((a, b) => b[1] - a[1]).map(([tok, lp]) =>
    h("tr", { class: tok === chosen ? "chosen" : "" },
      h("td", {}, h("code", {}, JSON.stringify(tok))), h("td", {}, lp.toFixed(3)), h("td", {}, percent(lp))));
  tip.replaceChildren(
    h("div", {}, h("code", {}, JSON.stringify(chosen)), ` logprob ${logprob.toFixed(3)} (${percent(logprob)})`),
    rows.length ? h("table", {}, h("tbody", {}, rows)) : "");
  tip.hidden = false;
  const r = span.getBoundingClientRect();
  const left = Math.min(r.left, window.innerWidth - tip.offsetWidth - 8);
  const below = r.bottom + 6 + tip.offsetHeight < window.innerHeight;
  tip.style.left = `${Math.max(8, left)}px`;
  tip.style.top = `${below ? r.bottom + 6 : r.top - tip.offsetHeight - 6}px`;
}

function hideTip() {
  $("token-tip").hidden = true;
  for (const el of $("raw-output").querySelectorAll(".tok.active")) el.classList.remove("active");
}

async function run() {
  const out = $("raw-output");
  const stats = $("raw-stats");
  const model = selectedModel();
  let body;
  try {
    body = { model, prompt: $("raw-prompt").value, logprobs: TOP_LOGPROBS, ...samplingBody() };
    delete body.response_format;
  } catch (e) {
    stats.textContent = e.message;
    return;
  }
  out.replaceChildren(h("span", { class: "prompt" }, body.prompt));
  hideTip();
  controller = new AbortController();
  $("raw-run").disabled = true;
  $("raw-stop").disabled = false;
  stats.textContent = "…";
  const sent = performance.now();
  let first = 0;
  let tokens = 0;
  let finish = "";
  try {
    await ensureLoaded(model);
    await stream("/v1/completions", body, (chunk) => {
      const choice = chunk.choices && chunk.choices[0];
      if (!choice) return;
      if (choice.finish_reason) finish = choice.finish_reason;
      const lp = choice.logprobs;
      if (!lp || !lp.tokens || !lp.tokens.length) {
        if (choice.text) out.append(choice.text);
        return;
      }
      if (!first) first = performance.now();
      lp.tokens.forEach((token, i) => {
        const logprob = lp.token_logprobs[i] ?? 0;
        const top = (lp.top_logprobs && lp.top_logprobs[i]) || {};
        out.append(h("span", {
          class: `tok ${shade(logprob)}`, tabindex: "-1",
          dataset: { token, logprob: String(logprob), top: JSON.stringify(top) },
        }, token));
        tokens += 1;
      });
    }, controller.signal);
  } catch (e) {
    if (e.name !== "AbortError") {
      stats.textContent = e instanceof ApiError ? `${e.status || "stream"}: ${e.message}` : e.message;
      return;
    }
    finish = "stopped";
  } finally {
    controller = null;
    $("raw-run").disabled = false;
    $("raw-stop").disabled = true;
  }
  const end = performance.now();
  const parts = [`${tokens} tokens`];
  if (first) parts.push(`TTFT ${formatSeconds((first - sent) / 1000)}`);
  if (first && tokens > 1) parts.push(`${((tokens - 1) / ((end - first) / 1000)).toFixed(1)} tok/s`);
  if (finish) parts.push(`finish: ${finish}`);
  stats.textContent = parts.join(" · ");
}

/** Wires the raw completion pane. */
export function initRaw() {
  const out = $("raw-output");
  $("raw-run").addEventListener("click", run);
  $("raw-stop").addEventListener("click", () => controller && controller.abort());
  out.addEventListener("mouseover", (e) => { if (e.target.classList.contains("tok")) showTip(e.target); });
  out.addEventListener("mouseleave", hideTip);
  out.addEventListener("focusin", (e) => { if (e.target.classList.contains("tok")) showTip(e.target); });
  out.addEventListener("keydown", (e) => {
    if (!["ArrowLeft", "ArrowRight", "Home", "End", "Escape"].includes(e.key)) return;
    const toks = [...out.querySelectorAll(".tok")];
    if (!toks.length) return;
    e.preventDefault();
    if (e.key === "Escape") { hideTip(); out.focus(); return; }
    let i = toks.indexOf(document.activeElement);
    if (e.key === "Home") i = 0;
    else if (e.key === "End") i = toks.length - 1;
    else if (i < 0) i = 0;
    else i = Math.max(0, Math.min(toks.length - 1, i + (e.key === "ArrowRight" ? 1 : -1)));
    toks[i].focus();
  });
}
