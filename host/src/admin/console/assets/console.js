// Gregor console: the live charts (polling /metrics) and the plugin
// actions (calling the admin API). No framework, no build step.
"use strict";

// Requests go to this origin only; `location.origin` never carries the
// user:password a URL may have been opened with.
const api = (path) => new URL(path, window.location.origin).toString();

// ---- Prometheus text ------------------------------------------------------

// Samples of the text format: [{name, labels, value}].
function parseMetrics(text) {
  const samples = [];
  const line = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
  const label = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
  for (const raw of text.split("\n")) {
    if (raw.startsWith("#")) continue;
    const m = line.exec(raw);
    if (!m) continue;
    const labels = {};
    for (const l of (m[2] || "").matchAll(label)) labels[l[1]] = l[2];
    samples.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return samples;
}

// Sum of `name` by the value of label `by`.
function sumBy(samples, name, by) {
  const out = {};
  for (const s of samples) {
    if (s.name !== name) continue;
    const key = by ? s.labels[by] : "";
    out[key] = (out[key] || 0) + s.value;
  }
  return out;
}

// Cumulative buckets of histogram `name` by label `by`: {key: [[le, count]]}.
function bucketsBy(samples, name, by) {
  const out = {};
  for (const s of samples) {
    if (s.name !== name + "_bucket") continue;
    const key = s.labels[by];
    const le = s.labels.le === "+Inf" ? Infinity : Number(s.labels.le);
    (out[key] = out[key] || []).push([le, s.value]);
  }
  for (const key in out) out[key].sort((a, b) => a[0] - b[0]);
  return out;
}

// The q-quantile of cumulative buckets (linear within a bucket, as
// Prometheus' histogram_quantile); null without observations.
function quantile(q, buckets) {
  if (!buckets || buckets.length === 0) return null;
  const total = buckets[buckets.length - 1][1];
  if (total <= 0) return null;
  const rank = q * total;
  let lower = 0, below = 0;
  for (const [le, count] of buckets) {
    if (count >= rank) {
      if (le === Infinity) return lower;
      const inBucket = count - below;
      return inBucket > 0 ? lower + (le - lower) * ((rank - below) / inBucket) : le;
    }
    lower = le; below = count;
  }
  return lower;
}

// Buckets of `now` minus those of `before` (the interval's observations).
function deltaBuckets(now, before) {
  if (!now) return null;
  if (!before) return now;
  return now.map(([le, count], i) => [le, count - (before[i] ? before[i][1] : 0)]);
}

// ---- charts ---------------------------------------------------------------

const COLORS = ["#2f6fde", "#e0742b", "#3a9d5d", "#b54bc4", "#c2352b", "#7a8699", "#c9a227", "#1aa3a3"];
const HISTORY = 60;       // samples kept per chart
const POLL_MS = 2000;

const series = { rate: {}, latency: {}, bytes: {} };
let previous = null;

function push(chart, key, value) {
  const s = (series[chart][key] = series[chart][key] || []);
  s.push(value);
  while (s.length > HISTORY) s.shift();
}

function draw(chart) {
  const svg = document.getElementById("chart-" + chart);
  if (!svg) return;
  const width = svg.clientWidth || 400, height = svg.clientHeight || 160, pad = 28;
  // The busiest series first; at most as many as there are colours.
  const keys = Object.keys(series[chart])
    .map((k) => [k, Math.max(0, ...series[chart][k].filter((v) => v !== null))])
    .filter(([, peak]) => peak > 0)
    .sort((a, b) => b[1] - a[1])
    .slice(0, COLORS.length)
    .map(([k]) => k);
  const max = Math.max(1e-9, ...keys.flatMap((k) => series[chart][k].filter((v) => v !== null)));
  const x = (i) => pad + (i * (width - pad - 4)) / (HISTORY - 1);
  const y = (v) => height - 14 - (v / max) * (height - 24);
  let out = `<line class="axis" x1="${pad}" y1="${height - 14}" x2="${width}" y2="${height - 14}"/>` +
    `<text x="0" y="12">${format(max)}</text><text x="0" y="${height - 14}">0</text>`;
  keys.forEach((k, n) => {
    const values = series[chart][k];
    const offset = HISTORY - values.length;
    const points = values
      .map((v, i) => (v === null ? null : `${x(i + offset).toFixed(1)},${y(v).toFixed(1)}`))
      .filter(Boolean)
      .join(" ");
    out += `<polyline fill="none" stroke="${COLORS[n]}" stroke-width="1.6" points="${points}"/>`;
  });
  svg.innerHTML = out;
  const legend = document.getElementById("legend-" + chart);
  if (legend) {
    legend.innerHTML = keys.length
      ? keys.map((k, n) => `<i style="background:${COLORS[n]}"></i>${escapeHtml(k)}`).join("")
      : "no traffic yet";
  }
}

function format(v) {
  if (v >= 1e9) return (v / 1e9).toFixed(1) + "G";
  if (v >= 1e6) return (v / 1e6).toFixed(1) + "M";
  if (v >= 1e3) return (v / 1e3).toFixed(1) + "k";
  return v >= 10 ? v.toFixed(0) : v.toFixed(2);
}

function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

async function poll() {
  let text;
  try {
    const response = await fetch(api("/metrics"), { cache: "no-store" });
    if (!response.ok) return;
    text = await response.text();
  } catch (e) {
    return;
  }
  const samples = parseMetrics(text);
  const now = {
    at: Date.now(),
    requests: sumBy(samples, "gregor_requests_total", "request"),
    latency: bucketsBy(samples, "gregor_request_total_time_ms", "request"),
    plugin: bucketsBy(samples, "gregor_plugin_call_time_ms", "plugin"),
    bytesIn: sumBy(samples, "gregor_topic_bytes_in_total", null)[""] || 0,
    bytesOut: sumBy(samples, "gregor_topic_bytes_out_total", null)[""] || 0,
  };
  // Plugin p99 since the broker started, on the plugins page.
  for (const cell of document.querySelectorAll("[data-p99]")) {
    const p99 = quantile(0.99, now.plugin[cell.dataset.p99]);
    cell.textContent = p99 === null ? "–" : p99.toFixed(3);
  }
  if (previous) {
    const seconds = Math.max(0.001, (now.at - previous.at) / 1000);
    for (const key in now.requests) {
      push("rate", key, Math.max(0, (now.requests[key] - (previous.requests[key] || 0)) / seconds));
    }
    for (const key in now.latency) {
      push("latency", key, quantile(0.99, deltaBuckets(now.latency[key], previous.latency[key])));
    }
    push("bytes", "produce", Math.max(0, (now.bytesIn - previous.bytesIn) / seconds));
    push("bytes", "fetch", Math.max(0, (now.bytesOut - previous.bytesOut) / seconds));
    for (const chart in series) draw(chart);
  }
  previous = now;
}

// ---- actions --------------------------------------------------------------

function flash(ok, message) {
  const box = document.getElementById("flash");
  if (!box) return;
  box.className = ok ? "ok" : "error";
  box.textContent = message;
}

// Calls the admin API; shows its {"result"} or {"error"}, and reloads the
// page after a success so that it shows the new state.
async function change(method, path, body) {
  let answer;
  try {
    const response = await fetch(api(path), {
      method,
      body,
      headers: { "X-Gregor-Console": "1" },
      cache: "no-store",
    });
    const text = await response.text();
    try { answer = JSON.parse(text); } catch (e) { answer = { error: text || response.statusText }; }
    if (!response.ok && !answer.error) answer.error = response.status + " " + response.statusText;
  } catch (e) {
    answer = { error: String(e) };
  }
  if (answer.error) {
    flash(false, answer.error);
    return;
  }
  flash(true, answer.result);
  sessionStorage.setItem("gregor-flash", answer.result);
  setTimeout(() => window.location.reload(), 600);
}

function wireActions() {
  const remembered = sessionStorage.getItem("gregor-flash");
  if (remembered) {
    sessionStorage.removeItem("gregor-flash");
    flash(true, remembered);
  }
  const form = document.getElementById("upload");
  if (form) {
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const name = document.getElementById("upload-name").value.trim();
      const file = document.getElementById("upload-file").files[0];
      if (!name || !file) {
        flash(false, "choose a module name and a .wasm file");
        return;
      }
      flash(true, `uploading ${file.name} as ${name}…`);
      change("PUT", "/plugins/" + encodeURIComponent(name), file);
    });
  }
  document.addEventListener("click", (event) => {
    const target = event.target;
    if (!(target instanceof HTMLElement)) return;
    if (target.dataset.unload) {
      change("DELETE", "/plugins/" + encodeURIComponent(target.dataset.unload));
    } else if (target.dataset.authorizer) {
      change("PUT", "/authorizer", target.dataset.authorizer);
    } else if (target.dataset.replace) {
      document.getElementById("upload-name").value = target.dataset.replace;
      document.getElementById("upload-file").focus();
    }
  });
}

wireActions();
if (document.querySelector("[data-chart], [data-p99]")) {
  poll();
  setInterval(poll, POLL_MS);
}
