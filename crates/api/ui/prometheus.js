// Reads sluice's /metrics (Prometheus text format 0.0.4) into samples and derives what the
// dashboard plots: rates from counter deltas and percentiles from histogram bucket deltas.

/** Parses the text format into [{name, labels, value}]; comments and blank lines are skipped. */
export function parseMetrics(text) {
  const samples = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][\w:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    if (m[3]) {
      for (const l of m[3].matchAll(/([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"/g)) {
        labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
      }
    }
    samples.push({ name: m[1], labels, value: parseFloat(m[4]) });
  }
  return samples;
}

/** One scrape indexed by metric name and model: value(name, model, extraLabels?). */
export class Scrape {
  constructor(text, time) {
    this.time = time;
    this.byName = new Map();
    for (const s of parseMetrics(text)) {
      if (!this.byName.has(s.name)) this.byName.set(s.name, []);
      this.byName.get(s.name).push(s);
    }
  }

  /** Models that have engine metrics (loaded ones). */
  models() {
    return [...new Set((this.byName.get("vllm:num_requests_running") || []).map((s) => s.labels.model_name))];
  }

  /** The sum of `name` over samples whose labels include `match` (and model_name = model). */
  value(name, model, match = {}) {
    let total = 0;
    let found = false;
    for (const s of this.byName.get(name) || []) {
      if (model !== undefined && s.labels.model_name !== model) continue;
      if (!Object.entries(match).every(([k, v]) => s.labels[k] === v)) continue;
      total += s.value;
      found = true;
    }
    return found ? total : undefined;
  }

  /** Cumulative bucket counts of histogram `name` for `model`: [[le, count]] by le. */
  buckets(name, model) {
    return (this.byName.get(`${name}_bucket`) || [])
      .filter((s) => s.labels.model_name === model)
      .map((s) => [s.labels.le === "+Inf" ? Infinity : parseFloat(s.labels.le), s.value])
      .sort((a, b) => a[0] - b[0]);
  }
}

/** Per-second rate of a counter between two scrapes; a restart (counter went down) is null. */
export function rate(before, after, name, model, match) {
  const a = before.value(name, model, match);
  const b = after.value(name, model, match);
  const dt = (after.time - before.time) / 1000;
  if (a === undefined || b === undefined || dt <= 0 || b < a) return null;
  return (b - a) / dt;
}

/** The increase of a counter between two scrapes (null when unknown or reset). */
export function increase(before, after, name, model) {
  const a = before.value(name, model);
  const b = after.value(name, model);
  if (a === undefined || b === undefined || b < a) return null;
  return b - a;
}

/**
 * The q-quantile of the observations a histogram gained between two scrapes, interpolated
 * linearly inside the bucket as Prometheus' histogram_quantile does; null without observations.
 */
export function quantile(q, before, after, name, model) {
  const b = after.buckets(name, model);
  const a = new Map(before.buckets(name, model));
  const counts = b.map(([le, c]) => [le, c - (a.get(le) || 0)]);
  const total = counts.length ? counts[counts.length - 1][1] : 0;
  if (!(total > 0)) return null;
  const rank = q * total;
  let prevLe = 0;
  let prevCount = 0;
  for (const [le, c] of counts) {
    if (c >= rank) {
      if (le === Infinity) return prevLe;
      const inBucket = c - prevCount;
      return inBucket > 0 ? prevLe + (le - prevLe) * ((rank - prevCount) / inBucket) : le;
    }
    prevLe = le;
    prevCount = c;
  }
  return prevLe;
}
