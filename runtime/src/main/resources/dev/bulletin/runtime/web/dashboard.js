// The bulletin dashboard: polls the runtime's JSON API (/api/...) with the user's token as a
// bearer header. The token lives in this tab's sessionStorage, never in a URL. Every value
// from the API is written with textContent, never as HTML: call names are users' text.
"use strict";

const TOKEN_KEY = "bulletin.token";
const POLL_MILLIS = 2000;
let pollTimer = null;

const $ = (id) => document.getElementById(id);

class RefusedError extends Error {}

async function api(path, token) {
  const response = await fetch(path, {
    headers: { "Authorization": "Bearer " + token },
    cache: "no-store",
    credentials: "omit",
  });
  let body = null;
  try {
    body = await response.json();
  } catch (e) {
    body = null;
  }
  if (response.status === 401 || response.status === 403) {
    throw new RefusedError((body && body.error) || ("refused (" + response.status + ")"));
  }
  if (!response.ok) {
    throw new Error((body && body.error) || ("the runtime answered " + response.status));
  }
  return body;
}

function showLogin(message) {
  stopPolling();
  $("dashboard").hidden = true;
  $("logout").hidden = true;
  $("login").hidden = false;
  $("who").textContent = "";
  const error = $("login-error");
  error.textContent = message || "";
  error.hidden = !message;
}

async function logIn(token) {
  try {
    const me = await api("/api/whoami", token);
    sessionStorage.setItem(TOKEN_KEY, token);
    $("who").textContent = "logged in as " + me.user + " (" + me.group + ")"
      + (me.sees_all ? ", sees every call" : ", sees own calls");
    $("login").hidden = true;
    $("login-error").hidden = true;
    $("dashboard").hidden = false;
    $("logout").hidden = false;
    startPolling();
  } catch (e) {
    sessionStorage.removeItem(TOKEN_KEY);
    showLogin(e instanceof RefusedError ? "Refused: " + e.message
      : "Cannot reach the runtime: " + e.message);
  }
}

function startPolling() {
  stopPolling();
  poll();
  pollTimer = setInterval(poll, POLL_MILLIS);
}

function stopPolling() {
  if (pollTimer !== null) {
    clearInterval(pollTimer);
    pollTimer = null;
  }
}

async function poll() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (!token) {
    showLogin();
    return;
  }
  try {
    const [status, usage, history] = await Promise.all([
      api("/api/status", token), api("/api/usage", token), api("/api/history", token)]);
    $("poll-error").hidden = true;
    renderStatus(status);
    renderUsage(usage);
    renderChart(history);
    document.body.dataset.updated = String(Date.now());
  } catch (e) {
    if (e instanceof RefusedError) {
      sessionStorage.removeItem(TOKEN_KEY);
      showLogin("Refused: " + e.message);
    } else {
      $("poll-error").textContent = "Cannot reach the runtime: " + e.message;
      $("poll-error").hidden = false;
    }
  }
}

function cell(row, value, className) {
  const td = document.createElement("td");
  td.textContent = value === null || value === undefined ? "" : String(value);
  if (className) {
    td.className = className;
  }
  row.appendChild(td);
  return td;
}

function fill(tableId, items, columns) {
  const body = $(tableId).tBodies[0];
  const rows = items.map((item) => {
    const tr = document.createElement("tr");
    columns(item).forEach((value) => cell(tr, value));
    return tr;
  });
  body.replaceChildren(...rows);
}

function seconds(value) {
  if (value < 60) return value.toFixed(0) + " s";
  if (value < 3600) return (value / 60).toFixed(1) + " min";
  return (value / 3600).toFixed(1) + " h";
}

function clock(epochSeconds) {
  return new Date(epochSeconds * 1000).toLocaleTimeString();
}

// GPUs fractional calls share, after the reserved count: " (GPU 0 shared: 0.75)".
function sharedGpus(shared) {
  const parts = Object.entries(shared || {}).map(([gpu, share]) => "GPU " + gpu + " shared: " + share);
  return parts.length ? " (" + parts.join(", ") + ")" : "";
}

function renderStatus(status) {
  $("cluster").textContent = "cluster " + status.cluster_id;
  const g = status.gpus;
  $("gpu-summary").textContent = g.total + " GPUs: " + (g.total - g.reserved) + " free, "
    + g.reserved + " reserved, " + g.running + " running a call";
  fill("workers", status.workers, (w) => [w.id, w.host, w.pool || "-", w.state,
    w.gpus.total + (w.simulated_gpus ? " (simulated)" : ""), w.gpus.total - w.gpus.reserved,
    w.gpus.reserved + sharedGpus(w.gpus.shared), w.gpus.running, typeof w.gpus.busy === "number" ? w.gpus.busy.toFixed(2) : "no samples",
    w.idle_executors + " idle of " + w.executors]);
  fill("running", status.running, (c) => [c.name, c.task_id, c.user, c.worker, c.gpus, c.qos,
    c.started_at ? seconds(Math.max(0, status.now - c.started_at)) : "starting"]);
  $("others-running").textContent = [
    status.running_not_listed ? status.running_not_listed + " more of yours (not listed)" : "",
    status.others_running ? status.others_running + " running call(s) of other users (not shown)"
      : ""].filter((text) => text).join("; ");
  fill("queue", status.queue, (c) => [c.position, c.name, c.task_id, c.user, c.gpus, c.reason,
    c.estimated_start ? clock(c.estimated_start) : "unknown"]);
  const notes = [];
  if (status.not_listed) {
    notes.push(status.not_listed + " more of your queued calls behind these (not listed)");
  }
  if (status.others_queued) {
    notes.push(status.others_queued + " queued call(s) of other users (not shown)");
  }
  $("others-queued").textContent = notes.length ? notes.join("; ")
    : (status.queue.length ? "" : "Nothing waits.");
  fill("pools", status.pools, (p) => [p.name, p.provider, p.starting, p.idle, p.busy,
    p.draining, p.max_workers, p.workers.join(", ")]);
  $("no-pools").hidden = status.pools.length > 0;
}

function renderUsage(usage) {
  const quota = (value) => value === null ? "none" : value;
  fill("groups", usage.groups, (g) => [g.name, g.gpus_held, quota(g.max_gpus),
    g.gpu_hours.toFixed(3), g.gpu_hours_quota === null ? "none" : g.gpu_hours_quota,
    g.credits.toFixed(2)]);
  fill("users", usage.users, (u) => [u.name, u.recent_gpu_hours.toFixed(3)]);
}

// Lines of GPUs total (grey), reserved (blue) and busy (orange) over the samples' time span.
function renderChart(history) {
  const canvas = $("chart");
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, pad = 30;
  ctx.clearRect(0, 0, w, h);
  const samples = history.samples;
  canvas.dataset.samples = String(samples.length);
  $("chart-note").textContent = (history.busy_sampled ? ""
    : "No utilisation samples: busy GPUs appear once workers report utilisation. ")
    + (samples.length < 2 ? "Collecting samples (one every " + history.interval_seconds
      + " s)." : "Last " + seconds(samples[samples.length - 1][0] - samples[0][0]) + ".");
  if (samples.length < 2) {
    return;
  }
  const t0 = samples[0][0], t1 = samples[samples.length - 1][0];
  const top = Math.max(1, ...samples.map((s) => s[1]));
  const x = (t) => pad + (w - 2 * pad) * (t - t0) / Math.max(1e-9, t1 - t0);
  const y = (v) => h - pad - (h - 2 * pad) * v / top;
  ctx.strokeStyle = "#ccc";
  ctx.fillStyle = "#666";
  ctx.font = "11px sans-serif";
  ctx.beginPath();
  ctx.moveTo(pad, y(0));
  ctx.lineTo(w - pad, y(0));
  ctx.moveTo(pad, y(top));
  ctx.lineTo(w - pad, y(top));
  ctx.stroke();
  ctx.fillText("0", 8, y(0) + 4);
  ctx.fillText(String(top), 8, y(top) + 4);
  ctx.fillText(clock(t0), pad, h - 8);
  ctx.fillText(clock(t1), w - pad - 60, h - 8);
  const line = (index, color) => {
    ctx.strokeStyle = color;
    ctx.lineWidth = 2;
    ctx.beginPath();
    let drawing = false;
    for (const s of samples) {
      if (s[index] === null) {
        drawing = false;
        continue;
      }
      if (drawing) {
        ctx.lineTo(x(s[0]), y(s[index]));
      } else {
        ctx.moveTo(x(s[0]), y(s[index]));
        drawing = true;
      }
    }
    ctx.stroke();
  };
  line(1, "#999");
  line(2, "#1f6fd1");
  line(3, "#e8710a");
}

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const token = $("token").value.trim();
    $("token").value = "";
    logIn(token);
  });
  $("logout").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    showLogin("Logged out.");
  });
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) {
    logIn(token);
  } else {
    showLogin();
  }
});
