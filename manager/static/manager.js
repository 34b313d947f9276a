// crawlfleet manager: the Submit page's rule check (the server validates with the Kafka monitor's schemas).
"use strict";
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
