// The lab client's report of the same run, below the panels (labs/report.py's pieces as JSON).
"use strict";

(function () {
  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }

  function row(table, cells, header) {
    const tr = el("tr");
    for (const cell of cells) tr.appendChild(el(header ? "th" : "td", cell));
    table.appendChild(tr);
    return tr;
  }

  const ms = (v) => (v === null || v === undefined ? "-" : `${Math.round(v).toLocaleString("en")} ms`);
  const pair = (b, l, f) => `${b ? f(b) : "-"} / ${f(l)}`;

  function comparison(table, rows) {
    table.replaceChildren();
    const many = rows.some((r) => r.lab.streams > 1);
    row(table, ["variant (browser / lab client)", "TTFT", "E2E", "events", "reads", "outcome",
                ...(many ? ["every stream", "latest TTFT"] : [])], true);
    for (const r of rows) {
      const cells = [r.variant, pair(r.browser, r.lab, (x) => ms(x.ttft_ms)), pair(r.browser, r.lab, (x) => ms(x.e2e_ms)),
                     pair(r.browser, r.lab, (x) => x.events), pair(r.browser, r.lab, (x) => x.reads),
                     pair(r.browser, r.lab, (x) => x.outcome)];
      if (many) cells.push(pair(r.browser, r.lab, (x) => x.outcomes), pair(r.browser, r.lab, (x) => ms(x.ttft_max_ms)));
      row(table, cells).dataset.variant = r.variant;
    }
  }

  function explanation(box, scenario) {
    box.replaceChildren(el("p", scenario.explanation), el("p", `Fix: ${scenario.fix}`));
    if (scenario.finding) box.appendChild(el("p", scenario.finding, "finding"));
    if (scenario.scaled.length) {
      box.appendChild(el("p", "Scaled down so the lab takes seconds: " + scenario.scaled.map(
        (s) => `${s.setting} ${s.lab_value} stands for ${s.real_default}`).join("; ")));
    }
    const sources = el("p", "Sources: ");
    for (const url of scenario.sources) {
      const a = el("a", url); a.href = url; a.rel = "noreferrer"; sources.append(a, " ");
    }
    if (scenario.sources.length) box.appendChild(sources);
  }

  function show(section, data) {
    comparison(section.querySelector(".comparison"), data.comparison);
    const rows = section.querySelector(".rows");
    rows.replaceChildren();
    row(rows, ["measured", "broken", "fixed"], true);
    for (const [label, values] of data.rows) row(rows, [label, values.broken, values.fixed]);
    const verdict = data.report.verdict;
    row(rows, ["verdict", verdict.broken, verdict.fixed]).className = "verdict";
    const checks = section.querySelector(".checks");
    checks.replaceChildren();
    row(checks, ["variant", "expectation", "observed", ""], true);
    for (const [variant, label, observed, passed] of data.checks) {
      row(checks, [variant, label, observed, passed ? "ok" : "FAIL"]).className = passed ? "ok" : "fail";
    }
    const diff = section.querySelector(".diff");
    diff.replaceChildren();
    for (const line of (data.diff || "(no difference in config)").split("\n")) {
      diff.appendChild(el("span", line + "\n", line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : ""));
    }
    explanation(section.querySelector(".explanation"), data.report.scenario);
    const evidence = [];
    for (const [variant, v] of Object.entries(data.report.variants)) {
      for (const line of v.evidence.slice(-8)) evidence.push(`[${variant}] ${line}`);
    }
    section.querySelector(".evidence").textContent = evidence.join("\n") || "(no proxy on this path)";
    const files = section.querySelector(".files");
    files.replaceChildren("Written: ");
    for (const [kind, href] of Object.entries(data.files)) {
      const a = el("a", href.split("/").pop()); a.href = href; files.append(a, " ");
      if (kind === "png") { const img = el("img", null, "picture"); img.src = href + "?t=" + Date.now(); img.alt = "timeline.png"; files.appendChild(img); }
    }
    section.hidden = false;
  }

  window.StreamlabReport = {show};
})();
