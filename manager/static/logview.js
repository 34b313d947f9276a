// crawlfleet manager: a job's log, tailed then followed (GET /api/logs/<job>?offset=N every second), filtered by
// level and searched in the browser. Lines are text nodes, never HTML.
"use strict";
(function () {
  const controls = document.getElementById("log-controls");
  if (!controls) return;
  const job = controls.dataset.job;
  const out = document.getElementById("log");
  const level = document.getElementById("log-level");
  const search = document.getElementById("log-search");
  const follow = document.getElementById("log-follow");
  const state = document.getElementById("log-state");
  const count = document.getElementById("log-count");
  const LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"];
  const KEEP = 5000;  // lines kept in the page
  let offset = null;
  let busy = false;

  function levelOf(text) {
    const match = text.match(/\b(DEBUG|INFO|WARNING|ERROR|CRITICAL)\b/);
    return match ? match[1] : "";
  }

  function visible(line) {
    const wanted = level.value;
    if (wanted && line.dataset.level && LEVELS.indexOf(line.dataset.level) < LEVELS.indexOf(wanted)) return false;
    if (wanted && !line.dataset.level) return false;
    const text = search.value.trim().toLowerCase();
    return !text || line.textContent.toLowerCase().includes(text);
  }

  function filter() {
    let shown = 0;
    for (const line of out.children) { line.hidden = !visible(line); if (!line.hidden) shown += 1; }
    count.textContent = shown + " of " + out.children.length + " lines";
  }

  function append(lines) {
    for (const text of lines) {
      const line = document.createElement("div");
      line.textContent = text;
      line.dataset.level = levelOf(text);
      line.className = "line " + line.dataset.level.toLowerCase();
      line.hidden = !visible(line);
      out.appendChild(line);
    }
    while (out.children.length > KEEP) out.removeChild(out.firstChild);
    filter();
    if (follow.checked && lines.length) out.lastElementChild.scrollIntoView({ block: "end" });
  }

  async function step() {
    if (busy || (offset !== null && !follow.checked)) return;
    busy = true;
    try {
      const query = offset === null ? "" : "?offset=" + offset;
      const answer = await fetch("/api/logs/" + encodeURIComponent(job) + query, { credentials: "same-origin" });
      const data = await answer.json();
      if (data.status !== "ok") throw new Error(data.message);
      offset = data.offset;
      append(data.lines);
      state.textContent = follow.checked ? "following" : "paused";
      state.className = "";
    } catch (e) {
      state.textContent = "not updated: " + e.message;
      state.className = "bad";
    } finally {
      busy = false;
    }
  }

  level.addEventListener("change", filter);
  search.addEventListener("input", filter);
  controls.addEventListener("submit", (event) => event.preventDefault());
  step();
  window.setInterval(step, 1000);
})();
