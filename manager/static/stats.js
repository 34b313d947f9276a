// crawlfleet manager: the Stats page's live charts, from /api/stats every 2 seconds (uPlot, vendored).
"use strict";
(function () {
  const KEEP = 300;  // points per series (10 minutes)
  const COLORS = ["#1f6fd1", "#2e9d57", "#d33", "#e69a00", "#8a4fd1", "#0aa", "#c4c", "#666"];
  const charts = { pages: { id: "chart-pages", names: [], rows: [[]], plot: null },
                   queues: { id: "chart-queues", names: ["seeds", "queued", "leased"], rows: [[], [], [], []], plot: null } };
  window.crawlfleetCharts = charts;  // the browser test reads the points

  function build(chart) {
    const element = document.getElementById(chart.id);
    if (chart.plot) chart.plot.destroy();
    const series = [{}].concat(chart.names.map((name, i) => ({ label: name, stroke: COLORS[i % COLORS.length], width: 2 })));
    chart.plot = new uPlot({ width: Math.min(720, window.innerWidth - 60), height: 260, series: series,
                             axes: [{}, { size: 50 }], scales: { x: { time: true } } }, chart.rows, element);
  }

  function add(chart, time, values) {
    let rebuild = !chart.plot;
    for (const name of Object.keys(values)) {
      if (!chart.names.includes(name)) {
        chart.names.push(name);
        chart.rows.push(chart.rows[0].map(() => null));
        rebuild = true;
      }
    }
    chart.rows[0].push(time);
    chart.names.forEach((name, i) => chart.rows[i + 1].push(name in values ? values[name] : null));
    if (chart.rows[0].length > KEEP) chart.rows.forEach((row) => row.shift());
    if (rebuild) build(chart); else chart.plot.setData(chart.rows);
  }

  function cell(row, text) { const td = document.createElement("td"); td.textContent = text; row.appendChild(td); }

  function workers(list) {
    const body = document.querySelector("#workers tbody");
    body.replaceChildren();
    if (!list.length) { const row = body.insertRow(); cell(row, "no worker registered"); row.cells[0].colSpan = 8; return; }
    for (const w of list) {
      const row = body.insertRow();
      row.dataset.job = w.job;
      [w.job, w.spider_type, w.host, w.weight === null ? "new" : w.weight, w.speed, w.completed, w.queued, w.leased]
        .forEach((value) => cell(row, String(value)));
    }
  }

  async function refresh() {
    try {
      const answer = await fetch("/api/stats", { credentials: "same-origin" });
      const data = await answer.json();
      if (data.status !== "ok") throw new Error(data.message);
      const pages = {};
      for (const [type, statuses] of Object.entries(data.pages_per_minute))
        for (const [status, count] of Object.entries(statuses)) pages[type + " " + status] = count;
      add(charts.pages, data.time, pages);
      add(charts.queues, data.time, { seeds: data.seeds, queued: data.queued, leased: data.leased });
      workers(data.workers);
      document.getElementById("updated").textContent = "updated " + new Date(data.time * 1000).toLocaleTimeString();
    } catch (e) {
      document.getElementById("updated").textContent = "not updated: " + e.message;
    }
  }

  refresh();
  setInterval(refresh, 2000);
})();
