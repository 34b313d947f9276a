// crawlfleet manager: a crawl's progress chart (items per minute and in total, from MongoDB's fetched_at), redrawn
// whenever the live refresh brings new data (manager.js swaps the summary that holds it). The current minute is not
// over: its count is drawn apart ("this minute so far", dashed), never as a full minute's dip.
"use strict";
(function () {
  const element = document.getElementById("chart-progress");
  if (!element) return;
  let plot = null;
  let shown = "";
  window.crawlfleetProgress = { rows: [[], [], []] };  // the browser test reads the points

  function draw() {
    const data = document.getElementById("progress-data");
    if (!data || data.textContent === shown) return;
    shown = data.textContent;
    const points = JSON.parse(shown);
    const last = points.length - 1;
    const partial = last >= 0 && points[last].partial;
    // per minute: the finished minutes; so far: the current minute, joined to the last finished one by a dash
    const rows = [points.map((p) => Date.parse(p.minute + ":00Z") / 1000),
                  points.map((p, i) => (partial && i === last ? null : p.items)), points.map((p) => p.total),
                  points.map((p, i) => (partial && i >= last - 1 ? p.items : null))];
    window.crawlfleetProgress.rows = rows;
    if (rows[0].length === 1) rows.forEach((row, i) => row.unshift(i === 0 ? row[0] - 60 : (i === 3 ? null : 0)));
    if (plot) { plot.setData(rows); return; }
    const color = window.crawlfleetColor;
    plot = new uPlot({ width: Math.min(900, window.innerWidth - 60), height: 240,
                       series: [{}, { label: "items per minute", stroke: color(0), width: 2,
                                     points: { show: true, size: 6 } },
                                { label: "items in total", stroke: color(2), width: 2, scale: "total",
                                  points: { show: true, size: 6 } },
                                { label: "this minute so far", stroke: color(0), width: 2, dash: [6, 4],
                                  points: { show: true, size: 6, fill: "#fff" } }],
                       axes: [{}, { size: 50 }, { side: 1, scale: "total", size: 60 }],
                       scales: { x: { time: true } }, hooks: window.crawlfleetLatestInLegend }, rows, element);
  }

  draw();
  window.setInterval(draw, 1000);
})();
