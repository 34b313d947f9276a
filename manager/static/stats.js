// crawlfleet manager: the Stats page's charts (uPlot, vendored): the last two hours from /api/history (one sample
// per minute, kept in Redis by the managers), then live points from /api/stats every 2 seconds.
"use strict";
(function () {
  const KEEP = 600;  // points per series: two hours of history and the live points since
  const charts = { pages: { id: "chart-pages", names: [], rows: [[]], plot: null },
                   other: { id: "chart-other", names: [], rows: [[]], plot: null },
                   queues: { id: "chart-queues", names: ["seeds", "queued", "leased"], rows: [[], [], [], []], plot: null } };
  window.crawlfleetCharts = charts;  // the browser test reads the points
  const color = window.crawlfleetColor;  // manager.js: a distinct colour for every series of a chart

  function build(chart) {
    const element = document.getElementById(chart.id);
    if (chart.plot) chart.plot.destroy();
    const series = [{}].concat(chart.names.map((name, i) => ({ label: name, stroke: color(i), width: 2 })));
    chart.plot = new uPlot({ width: Math.min(720, window.innerWidth - 60), height: 260, series: series,
                             axes: [{}, { size: 50 }], scales: { x: { time: true } },
                             hooks: window.crawlfleetLatestInLegend }, chart.rows, element);
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

  // HTTP statuses (and "error": no response) go to the status chart; the crawler's other page counts (rendered,
  // static, robots noindex, metadata broken…) to their own
  const isStatus = (status) => /^[0-9]{3}$/.test(status) || status === "error";

  function pagesOf(perMinute, statuses) {
    const pages = {};
    for (const [type, counts] of Object.entries(perMinute))
      for (const [status, count] of Object.entries(counts))
        if (isStatus(status) === statuses) pages[type + " " + status] = count;
    return pages;
  }

  function addPages(time, perMinute) {
    add(charts.pages, time, pagesOf(perMinute, true));
    add(charts.other, time, pagesOf(perMinute, false));
  }

  async function preload() {
    try {
      const answer = await fetch("/api/history", { credentials: "same-origin" });
      const data = await answer.json();
      if (data.status !== "ok") return;
      for (const point of data.history) {
        addPages(point.time, point.pages_per_minute);
        add(charts.queues, point.time, { seeds: point.seeds, queued: point.queued, leased: point.leased });
      }
    } catch (e) {
      // no history yet: the live points start the charts
    }
  }

  async function refresh() {
    try {
      const answer = await fetch("/api/stats", { credentials: "same-origin" });
      const data = await answer.json();
      if (data.status !== "ok") throw new Error(data.message);
      addPages(data.time, data.pages_per_minute);
      add(charts.queues, data.time, { seeds: data.seeds, queued: data.queued, leased: data.leased });
      workers(data.workers);
      document.getElementById("updated").textContent = "updated " + new Date(data.time * 1000).toLocaleTimeString();
    } catch (e) {
      document.getElementById("updated").textContent = "not updated: " + e.message;
    }
  }

  preload().then(() => { refresh(); setInterval(refresh, 2000); });
})();
