// The operations dashboard: the model pool with load / unload / pin buttons (admin API), the
// memory budget, and live charts over the last 1, 5 or 15 minutes computed from /metrics. It
// polls only while it is on screen (one /metrics scrape a second, the pool every two), so an
// open tab costs the server one cheap text render per second and a hidden tab costs nothing.

import { request } from "./api.js";
import { $, h, ago, formatBytes, formatSeconds } from "./dom.js";
import { LineChart } from "./chart.js";
import { Scrape, increase, quantile, rate } from "./prometheus.js";
import { refreshModels } from "./models.js";

// Points are kept for the longest window the page offers; the charts show the chosen one.
const KEEP_S = 900;
const WINDOW_STORAGE = "sluice.chartWindow";
const SCRAPE_MS = 1000;
const POOL_MS = 2000;
// Percentiles and hit rates are taken over the observations of this trailing window.
const TRAILING_MS = 30000;

const fmtNum = (v) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2).replace(/\.?0+$/, "") || "0");
const fmtPct = (v) => `${(v * 100).toFixed(v < 0.1 ? 1 : 0)}%`;
const fmtSec = (v) => formatSeconds(v);

const CHARTS = [
  { id: "chart-tokens", title: "Output tokens/s", format: fmtNum },
  { id: "chart-requests", title: "Requests running (solid) / waiting (dashed)", format: fmtNum },
  { id: "chart-kv", title: "KV cache usage", format: fmtPct },
  { id: "chart-ttft", title: "Time to first token p50 / p95 (dashed)", format: fmtSec },
  { id: "chart-itl", title: "Inter-token latency p50 / p95 (dashed)", format: fmtSec },
  { id: "chart-preempt", title: "Preemptions per minute", format: fmtNum },
  { id: "chart-prefix", title: "Prefix-cache hit rate (dashed: read from the disk tier)", format: fmtPct },
  { id: "chart-spec", title: "Speculative decoding: draft tokens accepted", format: fmtPct },
  { id: "chart-memory", title: "Pool memory used / budget (dashed)", format: formatBytes },
];

const charts = new Map();
const onScreen = new Set(); // ids of charts scrolled into view; only these are drawn
const series = new Map(); // "chart|label" -> {label, points, dashed, colorIndex}
const modelOrder = [];
let scrapes = []; // the last TRAILING_MS of scrapes, oldest first
let timers = [];

function colorOf(model) {
  if (!modelOrder.includes(model)) modelOrder.push(model);
  return modelOrder.indexOf(model);
}

function push(chart, label, time, value, { dashed = false, colorIndex } = {}) {
  const key = `${chart}|${label}`;
  if (!series.has(key)) series.set(key, { chart, label, points: [], dashed, colorIndex });
  series.get(key).points.push([time, value === undefined ? null : value]);
}

function trim(now) {
  for (const s of series.values()) {
    const from = now - KEEP_S * 1000;
    while (s.points.length && s.points[0][0] < from) s.points.shift();
  }
}

function record(prev, cur, old) {
  const t = cur.time;
  const models = new Set([...cur.models(), ...prev.models()]);
  for (const m of models) {
    const c = colorOf(m);
    push("chart-tokens", m, t, rate(prev, cur, "vllm:generation_tokens_total", m), { colorIndex: c });
    push("chart-requests", `${m} running`, t, cur.value("vllm:num_requests_running", m), { colorIndex: c });
    push("chart-requests", `${m} waiting`, t, cur.value("vllm:num_requests_waiting", m), { colorIndex: c, dashed: true });
    push("chart-kv", m, t, cur.value("vllm:kv_cache_usage_perc", m), { colorIndex: c });
    for (const [chart, name] of [["chart-ttft", "vllm:time_to_first_token_seconds"], ["chart-itl", "vllm:inter_token_latency_seconds"]]) {
      push(chart, `${m} p50`, t, quantile(0.5, old, cur, name, m), { colorIndex: c });
      push(chart, `${m} p95`, t, quantile(0.95, old, cur, name, m), { colorIndex: c, dashed: true });
    }
    const preempt = rate(prev, cur, "vllm:num_preemptions_total", m);
    push("chart-preempt", m, t, preempt === null ? null : preempt * 60, { colorIndex: c });
    const queries = increase(old, cur, "vllm:prefix_cache_queries_total", m);
    const hits = increase(old, cur, "vllm:prefix_cache_hits_total", m);
    push("chart-prefix", m, t, queries > 0 && hits !== null ? hits / queries : null, { colorIndex: c });
    if (cur.value("sluice:kv_disk_bytes_limit", m) !== undefined) {
      const fromDisk = increase(old, cur, "sluice:prefix_cache_disk_hits_total", m);
      push("chart-prefix", `${m} from disk`, t, queries > 0 && fromDisk !== null ? fromDisk / queries : null, { colorIndex: c, dashed: true });
    }
    const drafted = increase(old, cur, "vllm:spec_decode_num_draft_tokens_total", m);
    if (drafted > 0) {
      const accepted = increase(old, cur, "vllm:spec_decode_num_accepted_tokens_total", m);
      push("chart-spec", m, t, accepted === null ? null : accepted / drafted, { colorIndex: c });
    }
  }
  push("chart-memory", "used", t, cur.value("sluice:pool_memory_used_bytes"), { colorIndex: 0 });
  push("chart-memory", "budget", t, cur.value("sluice:pool_memory_budget_bytes"), { colorIndex: 1, dashed: true });
}

function drawCharts(now) {
  for (const [id, chart] of charts) {
    if (!onScreen.has(id)) continue;
    chart.draw([...series.values()].filter((s) => s.chart === id), now);
  }
}

function showNow(prev, cur) {
  const models = cur.models();
  const sum = (f) => models.reduce((a, m) => a + (f(m) || 0), 0);
  const rows = [
    ["Output tokens/s", fmtNum(sum((m) => rate(prev, cur, "vllm:generation_tokens_total", m)))],
    ["Running", String(sum((m) => cur.value("vllm:num_requests_running", m)))],
    ["Waiting", String(sum((m) => cur.value("vllm:num_requests_waiting", m)))],
    ["Models loaded", String(cur.value("sluice:pool_models_loaded") ?? models.length)],
    ["Preemptions (total)", String(sum((m) => cur.value("vllm:num_preemptions_total", m)))],
  ];
  const drafted = sum((m) => cur.value("vllm:spec_decode_num_draft_tokens_total", m));
  if (drafted > 0) {
    const accepted = sum((m) => cur.value("vllm:spec_decode_num_accepted_tokens_total", m));
    rows.push(["Draft tokens accepted", `${fmtPct(accepted / drafted)} of ${drafted}`]);
  }
  // The disk tier's directory is shared by every model: its size is the same in each series.
  const disk = models.filter((m) => cur.value("sluice:kv_disk_bytes_limit", m) !== undefined);
  if (disk.length) {
    const used = cur.value("sluice:kv_disk_bytes_used", disk[0]);
    const limit = cur.value("sluice:kv_disk_bytes_limit", disk[0]);
    const writing = disk.every((m) => cur.value("sluice:kv_disk_writing", m) === 1);
    const blocks = (name) => String(sum((m) => cur.value(name, m)));
    rows.push(
      ["Disk cache", `${formatBytes(used)} of ${formatBytes(limit)}${writing ? "" : " (writing off)"}`],
      ["Disk blocks read / written", `${blocks("sluice:kv_disk_blocks_read_total")} / ${blocks("sluice:kv_disk_blocks_written_total")}`],
      ["Disk read / write errors", `${blocks("sluice:kv_disk_read_errors_total")} / ${blocks("sluice:kv_disk_write_errors_total")}`],
    );
  }
  $("now-stats").replaceChildren(...rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

async function scrape() {
  try {
    const text = await request("/metrics");
    const cur = new Scrape(text, Date.now());
    const prev = scrapes[scrapes.length - 1];
    scrapes.push(cur);
    while (scrapes.length > 2 && cur.time - scrapes[1].time > TRAILING_MS) scrapes.shift();
    if (prev) {
      record(prev, cur, scrapes[0]);
      trim(cur.time);
      drawCharts(cur.time);
      showNow(prev, cur);
    }
    const status = $("scrape-status");
    status.textContent = `updated ${new Date(cur.time).toLocaleTimeString()}`;
    // Counts the scrapes drawn, for whoever waits on the next one (the browser tests do).
    status.dataset.scrapes = String(Number(status.dataset.scrapes || 0) + 1);
  } catch (e) {
    $("scrape-status").textContent = `metrics unavailable: ${e.message}`;
  }
}

function showMemory(list) {
  const budget = list.max_memory_bytes;
  const meter = $("memory-meter");
  const used = list.memory_used_bytes;
  meter.replaceChildren(...list.data.filter((m) => m.memory_bytes > 0).map((m) => {
    const seg = h("span", { title: `${m.id}: ${formatBytes(m.memory_bytes)}` });
    seg.style.width = `${budget ? (100 * m.memory_bytes) / budget : 0}%`;
    seg.style.background = getComputedStyle(document.documentElement).getPropertyValue(`--c${(colorOf(m.id) % 6) + 1}`);
    return seg;
  }));
  meter.setAttribute("aria-label", `Memory used ${formatBytes(used)} of ${budget ? formatBytes(budget) : "no budget"}`);
  const parts = [`${formatBytes(used)} used`];
  if (budget) parts.push(`of ${formatBytes(budget)} (${fmtPct(used / budget)})`);
  if (list.max_models) parts.push(`at most ${list.max_models} models`);
  $("memory-text").textContent = parts.join(" ");
}

function message(text, ok = false) {
  const el = $("pool-message");
  el.textContent = text;
  el.classList.toggle("ok", ok);
}

const DOING = { load: "Loading", unload: "Unloading", pin: "Pinning", unpin: "Unpinning" };
const DONE = { load: "loaded", unload: "unloaded", pin: "pinned", unpin: "unpinned" };

// Each action's opposite: after Pin the row shows Unpin where Pin was.
const OPPOSITE = { Pin: "Unpin", Unpin: "Pin", Load: "Unload", Unload: "Load" };

/** Focuses the button labelled `label` in `model`'s row, or the one that replaced it (Pin
 * turning into Unpin), or the row's first action: keyboard focus survives the redraws. */
function focusRowAction(model, label) {
  const row = [...$("pool").tBodies[0].rows].find((tr) => tr.dataset.model === model);
  if (!row) return;
  const verb = (label || "").split(" ")[0];
  const candidates = [label, OPPOSITE[verb] && `${OPPOSITE[verb]} ${model}`].filter(Boolean);
  const button = candidates.map((l) => row.querySelector(`[aria-label="${CSS.escape(l)}"]`)).find(Boolean)
    || row.querySelector("td.actions button");
  if (button) button.focus();
}

async function act(model, action, button) {
  // Disabling the focused button drops its focus; it comes back to the row once redrawn.
  const hadFocus = document.activeElement === button;
  button.disabled = true;
  message(`${DOING[action]} ${model}…`, true);
  try {
    await request(`/admin/models/${encodeURIComponent(model).replace(/%2F/g, "/")}/${action}`, { method: "POST" });
    message(`${model} ${DONE[action]}`, true);
  } catch (e) {
    // A 409 is the pool refusing the change (busy, pinned or loading), not a failure.
    const why = e.status === 409 ? `Refused (409, ${e.code || "conflict"}): ${e.message}` : `${action} failed (${e.status || "network"}): ${e.message}`;
    message(why);
  } finally {
    await refreshPool();
    if (hadFocus && (!document.activeElement || document.activeElement === document.body || !document.activeElement.isConnected)) {
      focusRowAction(model, button.getAttribute("aria-label"));
    }
    refreshModels().catch(() => {});
  }
}

function actionButton(m, action, label, ghost) {
  const b = h("button", { type: "button", class: ghost ? "small ghost" : "small", "aria-label": `${label} ${m.id}` }, label);
  b.addEventListener("click", () => act(m.id, action, b));
  return b;
}

function poolRow(m) {
  const actions = h("td", { class: "actions" });
  if (m.status === "unloaded") actions.append(actionButton(m, "load", "Load", false));
  if (m.status === "loaded") actions.append(actionButton(m, "unload", "Unload", true));
  actions.append(m.pinned ? actionButton(m, "unpin", "Unpin", true) : actionButton(m, "pin", "Pin", true));
  return h("tr", { dataset: { model: m.id, status: m.status, pinned: String(m.pinned) } },
    h("th", { scope: "row" }, m.id),
    h("td", {}, h("span", { class: `badge ${m.status}` }, m.status), m.last_error ? h("div", { class: "error" }, m.last_error) : null),
    h("td", {}, m.memory_bytes ? formatBytes(m.memory_bytes) : "–"),
    h("td", { title: m.pinned ? "pinned: never unloaded, neither to make room nor by Unload" : "" }, m.pinned ? "pinned" : "no"),
    h("td", {}, m.loaded_at ? ago(m.loaded_at) : "–"),
    h("td", {}, String(m.requests)),
    h("td", {}, `${m.loads} / ${m.unloads}${m.load_failures ? ` (${m.load_failures} failed)` : ""}`),
    actions);
}

/** Re-reads /admin/models and redraws the pool table and the memory meter. */
export async function refreshPool() {
  let pool;
  try {
    pool = await request("/admin/models");
  } catch (e) {
    message(`pool unavailable (${e.status || "network"}): ${e.message}`);
    return;
  }
  drawPool(pool);
  // Counts the polls drawn, for whoever waits on the next one (the browser tests do).
  $("pool").dataset.polls = String(Number($("pool").dataset.polls || 0) + 1);
}

function drawPool(list) {
  // Rebuild the table only when something but the clock moved; otherwise refresh "loaded since".
  const shape = JSON.stringify(list.data.map((m) => ({ ...m, last_used: 0 })));
  const body = $("pool").tBodies[0];
  if (body.dataset.shape === shape) {
    for (const tr of body.rows) {
      const m = list.data.find((x) => x.id === tr.dataset.model);
      if (m) tr.cells[4].textContent = m.loaded_at ? ago(m.loaded_at) : "–";
    }
    showMemory(list);
    return;
  }
  body.dataset.shape = shape;
  const active = document.activeElement;
  const focusedLabel = body.contains(active) ? active.getAttribute("aria-label") : null;
  const focusedRow = body.contains(active) ? active.closest("tr").dataset.model : null;
  body.replaceChildren(...list.data.map(poolRow));
  if (focusedRow !== null) focusRowAction(focusedRow, focusedLabel);
  showMemory(list);
}

/** Builds the charts once. */
export function initDashboard() {
  const box = $("charts");
  // Charts scrolled out of view are not drawn: an open dashboard should cost its browser little.
  const seen = new IntersectionObserver((entries) => {
    for (const e of entries) {
      if (e.isIntersecting) {
        onScreen.add(e.target.id);
        const last = scrapes[scrapes.length - 1];
        if (last) charts.get(e.target.id).draw([...series.values()].filter((x) => x.chart === e.target.id), last.time);
      } else {
        onScreen.delete(e.target.id);
      }
    }
  });
  for (const spec of CHARTS) {
    const chart = new LineChart({ ...spec, windowSeconds: Number($("chart-window").value) });
    charts.set(spec.id, chart);
    box.append(chart.el);
    seen.observe(chart.el);
  }
  const windowSelect = $("chart-window");
  windowSelect.value = localStorage.getItem(WINDOW_STORAGE) || "300";
  const applyWindow = () => {
    for (const chart of charts.values()) chart.windowSeconds = Number(windowSelect.value);
    const last = scrapes[scrapes.length - 1];
    if (last) drawCharts(last.time);
  };
  windowSelect.addEventListener("change", () => {
    localStorage.setItem(WINDOW_STORAGE, windowSelect.value);
    applyWindow();
  });
  applyWindow();
  document.addEventListener("visibilitychange", () => {
    if (document.hidden) stopDashboard();
    else if (!$("view-dashboard").hidden) startDashboard();
  });
}

/** Starts polling (the dashboard is on screen). */
export function startDashboard() {
  if (timers.length) return;
  scrape();
  refreshPool();
  timers = [setInterval(scrape, SCRAPE_MS), setInterval(refreshPool, POOL_MS)];
}

/** Stops polling (the dashboard is hidden). A gap in the charts shows the pause. */
export function stopDashboard() {
  for (const t of timers) clearInterval(t);
  timers = [];
  scrapes = [];
}
