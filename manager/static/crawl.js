// crawlfleet manager: a crawl's progress chart (items per minute and in total, from MongoDB's fetched_at), redrawn
// whenever the live refresh brings new data (manager.js swaps the summary that holds it).
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
    const rows = [points.map((p) => Date.parse(p.minute + ":00Z") / 1000), points.map((p) => p.items),
                  points.map((p) => p.total)];
    window.crawlfleetProgress.rows = rows;
    if (rows[0].length === 1) rows.forEach((row, i) => row.unshift(i === 0 ? row[0] - 60 : 0));  // none before
    if (plot) { plot.setData(rows); return; }
    plot = new uPlot({ width: Math.min(900, window.innerWidth - 60), height: 240,
                       series: [{}, { label: "items per minute", stroke: "#1f6fd1", width: 2,
                                     points: { show: true, size: 6 } },
                                { label: "items in total", stroke: "#2e9d57", width: 2, scale: "total",
                                  points: { show: true, size: 6 } }],
                       axes: [{}, { size: 50 }, { side: 1, scale: "total", size: 60 }],
                       scales: { x: { time: true } } }, rows, element);
  }

  draw();
  window.setInterval(draw, 1000);
})();
