// A small canvas line chart for the dashboard: one line per series, a time axis over the
// window, a y axis from zero to a rounded maximum, colours from the theme. It redraws only
// when given new data, and `dataset.points` counts the points drawn (tests read it).

import { h } from "./dom.js";

const PALETTE = ["--c1", "--c2", "--c3", "--c4", "--c5", "--c6"];

function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

/** A chart: a <figure> with a caption, a canvas and a legend. */
export class LineChart {
  constructor({ id, title, format, windowSeconds }) {
    this.format = format;
    this.windowSeconds = windowSeconds;
    this.valueEl = h("span", { class: "value" });
    this.canvas = h("canvas", { role: "img", "aria-label": title });
    this.legend = h("div", { class: "legend" });
    this.el = h("figure", { class: "chart", id, dataset: { points: "0" } },
      h("figcaption", {}, title, this.valueEl), this.canvas, this.legend);
  }

  /** Draws `series` ([{label, points: [[timeMs, value|null]], dashed?}]) ending at `now`. */
  draw(series, now) {
    const css = getComputedStyle(document.documentElement);
    const color = (i) => css.getPropertyValue(PALETTE[i % PALETTE.length]).trim();
    const ratio = window.devicePixelRatio || 1;
    const width = this.canvas.clientWidth || 320;
    const height = this.canvas.clientHeight || 140;
    if (this.canvas.width !== Math.round(width * ratio)) this.canvas.width = Math.round(width * ratio);
    if (this.canvas.height !== Math.round(height * ratio)) this.canvas.height = Math.round(height * ratio);
    const ctx = this.canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);

    const since = now - this.windowSeconds * 1000;
    const values = series.flatMap((s) => s.points.filter((p) => p[0] >= since).map((p) => p[1]).filter((v) => v !== null));
    const max = niceMax(Math.max(0, ...values));
    ctx.font = "11px system-ui, sans-serif";
    // Room for the widest y label.
    const left = 8 + Math.max(...[0, 0.5, 1].map((f) => ctx.measureText(this.format(max * f)).width));
    const bottom = height - 18;
    const x = (t) => left + ((t - (now - this.windowSeconds * 1000)) / (this.windowSeconds * 1000)) * (width - left - 4);
    const y = (v) => bottom - (v / max) * (bottom - 6);

    ctx.font = "11px system-ui, sans-serif";
    ctx.fillStyle = css.getPropertyValue("--muted").trim();
    ctx.strokeStyle = css.getPropertyValue("--border").trim();
    ctx.lineWidth = 1;
    for (const frac of [0, 0.5, 1]) {
      const yy = Math.round(y(max * frac)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(left, yy);
      ctx.lineTo(width - 4, yy);
      ctx.stroke();
      ctx.textAlign = "right";
      ctx.fillText(this.format(max * frac), left - 4, yy + 4);
    }
    ctx.textAlign = "left";
    ctx.fillText(`-${Math.round(this.windowSeconds / 60)} min`, left, height - 4);
    // Points older than the window are kept (for a wider window) but not drawn.
    const from = now - this.windowSeconds * 1000;
    ctx.textAlign = "right";
    ctx.fillText("now", width - 4, height - 4);

    let drawn = 0;
    series.forEach((s, i) => {
      ctx.strokeStyle = color(s.colorIndex ?? i);
      ctx.lineWidth = 1.8;
      ctx.setLineDash(s.dashed ? [4, 3] : []);
      ctx.beginPath();
      let pen = false;
      for (const [t, v] of s.points) {
        if (v === null || t < from) { pen = false; continue; }
        if (pen) ctx.lineTo(x(t), y(v)); else ctx.moveTo(x(t), y(v));
        pen = true;
        drawn += 1;
      }
      ctx.stroke();
    });
    ctx.setLineDash([]);
    this.el.dataset.points = String(drawn);

    this.legend.replaceChildren(...series.map((s, i) => {
      const last = [...s.points].reverse().find((p) => p[1] !== null);
      const swatch = h("i");
      swatch.style.background = color(s.colorIndex ?? i);
      return h("span", {}, swatch, `${s.label}: ${last ? this.format(last[1]) : "–"}`);
    }));
    const latest = series.map((s) => [...s.points].reverse().find((p) => p[1] !== null)).filter(Boolean);
    this.valueEl.textContent = latest.length === 1 ? this.format(latest[0][1]) : "";
  }
}
