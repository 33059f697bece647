"""The dashboard's page: one HTML document and its script, which reads the JSON API and draws
every chart with Plotly (served by the app from the ``plotly`` package)."""
from __future__ import annotations

HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>edgedp fleet</title>
<style>
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin-bottom: 1.5em; }
th, td { border: 1px solid #bbb; padding: .3em .6em; text-align: left; }
td.alert { color: #a00; }
.chart { width: 100%; max-width: 1000px; height: 340px; }
</style>
<script src="/static/plotly.min.js"></script></head>
<body>
<h1>edgedp fleet</h1>
<p>Read-only view of the registry: authenticated state as of each device's last sync
(<code>edgedp fleet sync</code>).</p>
<h2>Devices</h2>
<table id="devices"><thead><tr><th>id</th><th>board</th><th>authenticated</th><th>last seen</th>
<th>spent today</th><th>daily cap</th><th>lifetime spent</th><th>lifetime cap</th>
<th>rate limit</th><th>alerts</th></tr></thead><tbody></tbody></table>
<h2>ε spent per day</h2><div id="daily" class="chart"></div>
<h2>Lifetime spend against cap</h2><div id="lifetime" class="chart"></div>
<h2>Audit events</h2><div id="audit" class="chart"></div>
<h2>DP-SGD runs: ε over epochs</h2><div id="runs" class="chart"></div>
<script src="/static/dashboard.js"></script>
</body></html>
"""

SCRIPT = """"use strict";
async function get(path) {
  const r = await fetch(path);
  if (!r.ok) throw new Error(path + ": " + r.status);
  return r.json();
}
function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "none" : String(text);
  if (cls) td.className = cls;
  tr.appendChild(td);
}
function rate(d) {
  if (d.rate === null) return null;
  if (!d.rate.burst) return "off";
  return d.rate.burst + " burst, " + d.rate.per_minute + "/min, tarpit " + d.rate.tarpit_ms + " ms";
}
async function draw() {
  const [devices, daily, audit, runs] = await Promise.all(
    [get("/api/devices"), get("/api/daily"), get("/api/audit"), get("/api/runs")]);
  const body = document.querySelector("#devices tbody");
  for (const d of devices) {
    const tr = document.createElement("tr");
    tr.dataset.device = d.id;
    cell(tr, d.id); cell(tr, d.board + (d.note ? " (" + d.note + ")" : ""));
    cell(tr, d.authenticated ? "yes" : "no"); cell(tr, d.last_seen);
    cell(tr, d.daily_spent); cell(tr, d.daily_cap); cell(tr, d.lifetime_spent); cell(tr, d.lifetime_cap);
    cell(tr, rate(d));
    cell(tr, d.alerts.map(a => a.kind + ": " + a.message).join("; ") || "none", d.alerts.length ? "alert" : "");
    body.appendChild(tr);
  }
  const ids = Object.keys(daily);
  Plotly.newPlot("daily", ids.map(id => ({
    type: "bar", name: id, x: daily[id].map(p => p.date), y: daily[id].map(p => p.spent)})),
    {barmode: "group", xaxis: {title: {text: "day (UTC)"}, type: "category"}, yaxis: {title: {text: "ε"}}});
  Plotly.newPlot("lifetime", [
    {type: "bar", name: "spent", x: devices.map(d => d.id), y: devices.map(d => d.lifetime_spent)},
    {type: "bar", name: "cap", x: devices.map(d => d.id), y: devices.map(d => d.lifetime_cap)}],
    {barmode: "group", yaxis: {title: {text: "ε"}}});
  Plotly.newPlot("audit", [{
    type: "scatter", mode: "markers", x: audit.map(e => e.seq), y: audit.map(e => e.device),
    text: audit.map(e => e.event + (e.date ? " " + e.date : "") + (e.detail ? ": " + e.detail : "")),
    hoverinfo: "text", marker: {size: 10}}],
    {xaxis: {title: {text: "audit sequence number"}}, yaxis: {type: "category"}});
  Plotly.newPlot("runs", runs.map(r => ({
    type: "scatter", mode: "lines+markers", name: r.name + (r.epsilon === null ? " (not private)" : ""),
    x: r.per_epoch.map((e, i) => i + 1), y: r.per_epoch})),
    {xaxis: {title: {text: "epoch"}}, yaxis: {title: {text: "ε (PLD)"}}});
  document.body.dataset.ready = "1";
}
draw().catch(e => { document.body.dataset.error = String(e); document.body.prepend(String(e)); });
"""
