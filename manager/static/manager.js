// crawlfleet manager: confirmations, live page parts, and the Submit page's rule check.
"use strict";

// Charts: a distinct colour for every series (a palette of 20, then golden-angle hues), and the legend showing the
// latest values whenever the pointer is not on the chart (uPlot shows "--" there by itself).
const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
                 "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354",
                 "#756bb1", "#636363"];
window.crawlfleetColor = (i) => (i < PALETTE.length ? PALETTE[i] : `hsl(${(i * 137.508) % 360}, 70%, 40%)`);
function showLatest(u) {
  if (u.cursor.idx == null && u.data[0].length) u.setLegend({ idx: u.data[0].length - 1 });
}
window.crawlfleetLatestInLegend = { ready: [showLatest], setData: [showLatest], setCursor: [showLatest] };

// A form with data-confirm asks first (Stop buttons).
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (form.dataset && form.dataset.confirm && !window.confirm(form.dataset.confirm)) event.preventDefault();
});

// Live parts: every element with data-live (and an id) is refreshed from the same page every few seconds, without
// a reload: the page is fetched again and each part swapped when it changed. The HTML is the server's own,
// rendered with autoescaping; DOMParser runs no script of it.
(function () {
  const PERIOD_MS = 2500;
  if (!document.querySelector("[data-live][id]")) return;
  let busy = false;

  async function refresh() {
    if (busy || document.hidden) return;
    busy = true;
    try {
      const url = new URL(window.location.href);
      url.searchParams.delete("flash");
      const response = await fetch(url, { credentials: "same-origin", headers: { "X-Requested-With": "live" } });
      if (!response.ok) return;
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
      for (const part of document.querySelectorAll("[data-live][id]")) {
        const next = fresh.getElementById(part.id);
        if (part.contains(document.activeElement) && document.activeElement !== document.body) continue;  // typing
        if (next && next.innerHTML !== part.innerHTML) part.replaceWith(document.importNode(next, true));
      }
      const stamp = document.getElementById("live-updated");
      if (stamp) stamp.textContent = "updated " + new Date().toLocaleTimeString();
    } catch (e) {
      // the manager restarting: the next round tries again
    } finally {
      busy = false;
    }
  }

  window.setInterval(refresh, PERIOD_MS);
})();
(function () {
  const button = document.getElementById("check-rule");
  if (!button) return;
  const out = document.getElementById("rule-check");
  const form = document.getElementById("submit-form");

  function request() {
    const value = (name) => form.elements[name].value.trim();
    const message = { url: value("url"), spider_type: value("spider_type"),
                      crawlid: value("crawlid") || "check", userid: value("userid") || "manager" };
    message.rule = JSON.parse(value("rule"));  // throws: not JSON
    for (const name of ["maxdepth", "priority"]) if (value(name)) message[name] = Number(value(name));
    if (value("cookie")) message.cookie = value("cookie");
    return message;
  }

  async function check() {
    let message;
    try { message = request(); } catch (e) { return show(false, "the rule is not JSON: " + e.message); }
    try {
      const answer = await fetch("/api/crawl?check=1", { method: "POST", credentials: "same-origin",
        headers: { "Content-Type": "application/json" }, body: JSON.stringify(message) });
      const data = await answer.json();
      return data.valid ? show(true, "valid") : show(false, data.reason || data.message);
    } catch (e) { return show(false, "could not check: " + e.message); }
  }

  function show(ok, text) {
    out.textContent = text;  // text, never HTML
    out.className = "hint " + (ok ? "ok" : "error");
    return ok;
  }

  button.addEventListener("click", check);
  form.addEventListener("submit", async (event) => {
    if (form.dataset.checked === "1") return;
    event.preventDefault();
    if (await check()) { form.dataset.checked = "1"; form.submit(); }
  });
})();
