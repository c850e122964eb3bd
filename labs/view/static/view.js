// The scenario page: Run starts the scenario's path (the view's server does that), then the
// browser streams from each variant's real entry point at once, both panels live, and finally
// asks for the lab client's run of the same path.
//
// Page structure for tests: body[data-state=idle|running|done|error], body[data-api] (the
// protocol both clients spoke),
// body[data-report=waiting|ready|error], section[data-variant] with data-ttft-ms, data-e2e-ms,
// data-events, data-reads, data-outcome (the first stream; data-streams, data-outcomes and
// data-ttft-max-ms for many), and .text for the answer.
"use strict";

(function () {
  const data = JSON.parse(document.getElementById("scenario-data").textContent);
  const VARIANTS = ["broken", "fixed"];
  const body = document.body, runButton = document.getElementById("run");
  const statusLine = document.getElementById("status");
  const panels = {};
  for (const variant of VARIANTS) {
    const section = document.querySelector(`section[data-variant="${variant}"]`);
    panels[variant] = {section, results: [], done: false, startedAt: null,
                       text: section.querySelector(".text"), canvas: section.querySelector(".timeline"),
                       field: (name) => section.querySelector("." + name)};
  }

  const say = (text) => { statusLine.textContent = text; };
  const ms = (v) => (v === null || v === undefined ? "-" : `${Math.round(v).toLocaleString("en")} ms`);
  const value = (id) => document.getElementById(id).value.trim();

  async function post(url, payload) {
    const response = await fetch(url, {method: "POST", headers: {"Content-Type": "application/json"},
                                       body: JSON.stringify(payload)});
    const answer = await response.json().catch(() => ({error: `HTTP ${response.status}`}));
    if (!response.ok) throw new Error(answer.error || `HTTP ${response.status}`);
    return answer;
  }

  // While the view starts servers and proxies (seconds), show what it is doing.
  function followStatus() {
    let live = true;
    (async () => {
      while (live) {
        try { const s = await (await fetch("/api/status")).json(); if (live) say(s.status); } catch (e) { /* next poll */ }
        await new Promise((r) => setTimeout(r, 300));
      }
    })();
    return () => { live = false; };
  }

  function reset(panel) {
    panel.results = []; panel.done = false;
    panel.text.textContent = "";
    for (const name of ["ttft", "e2e", "events", "reads", "outcome", "protocol"]) panel.field(name).textContent = "-";
    panel.field("streams-summary").textContent = "";
    for (const key of Object.keys(panel.section.dataset)) if (key !== "variant") delete panel.section.dataset[key];
  }

  function contentCount(r) { return r ? StreamlabClient.contentEvents(r) : 0; }

  function showNumbers(panel) {
    const first = panel.results[0];
    if (!first) return;
    panel.text.textContent = first.text;
    panel.field("ttft").textContent = ms(first.ttftMs);
    panel.field("e2e").textContent = ms(first.e2eMs);
    panel.field("events").textContent = contentCount(first);
    panel.field("reads").textContent = first.reads;
    panel.field("outcome").textContent = panel.done ? first.outcome : "streaming…";
    // Resource Timing hides the protocol of a cross-origin response without Timing-Allow-Origin.
    panel.field("protocol").textContent = first.protocol || (panel.done ? "hidden" : "-");
    if (panel.results.length > 1) {
      const counts = {};
      for (const r of panel.results) if (r && panel.done) counts[r.outcome] = (counts[r.outcome] || 0) + 1;
      const ttfts = panel.results.filter((r) => r && r.ttftMs !== null).map((r) => r.ttftMs);
      panel.field("streams-summary").textContent = `${panel.results.length} streams` +
        (ttfts.length ? `, TTFT ${ms(Math.min(...ttfts))} to ${ms(Math.max(...ttfts))}` : "") +
        (panel.done ? ", " + Object.entries(counts).map(([k, v]) => `${k} ${v}`).join(", ") : "");
    }
  }

  function finish(panel) {
    panel.done = true;
    showNumbers(panel);
    const first = panel.results[0], d = panel.section.dataset;
    const fixed = (v) => (v === null || v === undefined ? "" : v.toFixed(1));
    d.ttftMs = fixed(first.ttftMs);
    d.e2eMs = fixed(first.e2eMs);
    d.events = String(contentCount(first));
    d.reads = String(first.reads);
    d.outcome = first.outcome;
    if (panel.results.length > 1) {
      const counts = {};
      for (const r of panel.results) counts[r.outcome] = (counts[r.outcome] || 0) + 1;
      d.streams = String(panel.results.length);
      d.outcomes = Object.entries(counts).map(([k, v]) => `${k} ${v}`).join(", ");
      d.ttftMaxMs = fixed(Math.max(...panel.results.map((r) => r.ttftMs ?? 0)));
    }
  }

  // Redraw both timelines on one time axis until both panels are done.
  function animate(startedAt) {
    let frame = null;
    const tick = () => {
      const elapsed = performance.now() - startedAt;
      let maxMs = VARIANTS.every((v) => panels[v].done) ? 0 : elapsed;
      for (const v of VARIANTS) for (const r of panels[v].results) {
        if (r) maxMs = Math.max(maxMs, (r.startOffsetMs || 0) + (r.e2eMs || 0));
      }
      const expected = Math.max(...VARIANTS.map((v) => contentCount(panels[v].results[0])));
      for (const v of VARIANTS) {
        StreamlabTimeline.draw(panels[v].canvas, panels[v].results, maxMs * 1.05, expected);
        showNumbers(panels[v]);
      }
      frame = requestAnimationFrame(tick);
    };
    tick();
    return () => { cancelAnimationFrame(frame); tick(); cancelAnimationFrame(frame); };
  }

  async function runPanel(panel, spec, plan) {
    panel.section.querySelector(".entry").textContent = `${spec.entry} (${spec.wireApi})` +
      (spec.skipped && spec.skipped.length ? ` (not applied in a browser: ${spec.skipped.join(", ")})` : "");
    panel.results = new Array(plan.streams).fill(null);
    const results = await StreamlabClient.runMany(spec, plan.streams, plan.concurrency,
      (index, result) => { panel.results[index] = result; });
    panel.results = results;
    finish(panel);
    return results;
  }

  async function run() {
    runButton.disabled = true;
    body.dataset.state = "running";
    body.dataset.report = "waiting";
    document.getElementById("report").hidden = true;
    VARIANTS.forEach((v) => reset(panels[v]));
    const stopFollowing = followStatus();
    let stopAnimation = () => {};
    try {
      const controls = {streams: value("streams"), concurrency: value("concurrency"),
                        abort_after_events: value("abort"), api: value("api")};
      const plan = await post(`/api/scenarios/${data.name}/prepare`, controls);
      body.dataset.api = plan.api;
      stopFollowing();
      say("streaming in your browser");
      stopAnimation = animate(performance.now());
      const measured = await Promise.all(VARIANTS.map((v) => runPanel(panels[v], plan.variants[v], plan)));
      stopAnimation();
      body.dataset.state = "done";
      const stopAgain = followStatus();
      const payload = Object.fromEntries(VARIANTS.map((v, i) => [v, measured[i]]));
      try {
        const report = await post(`/api/scenarios/${data.name}/report`, payload);
        StreamlabReport.show(document.getElementById("report"), report);
        body.dataset.report = "ready";
      } finally {
        stopAgain();
      }
      say("done: the browser's numbers above, the lab client's below");
    } catch (error) {
      stopFollowing(); stopAnimation();
      if (body.dataset.state === "running") body.dataset.state = "error";
      body.dataset.report = "error";
      say(`failed: ${error.message}`);
    } finally {
      runButton.disabled = false;
    }
  }

  runButton.addEventListener("click", run);
})();
