// The live timeline of one panel: the picture labs/timeline.py draws into timeline.png.
// One stream: a staircase of content events against time, a dot per event; events that came in
// the same read share a colour block (orange: several per read, as a buffering hop delivers
// them), TTFT a green line, E2E a grey one. Many streams: one row per stream, a tick per event.
// Both panels share the time axis (maxMs), so broken and fixed compare by eye.
"use strict";

(function () {
  const STREAMED = "#1f77b4", LUMPED = "#e66101", TTFT = "#1a9850", E2E = "#404040", GRID = "#ddd";
  const PAD = {left: 44, right: 12, top: 10, bottom: 26};

  function niceStep(range) {
    const raw = range / 6, pow = Math.pow(10, Math.floor(Math.log10(raw || 1)));
    return [1, 2, 5, 10].map((m) => m * pow).find((s) => s >= raw) || pow;
  }

  function axes(ctx, w, h, maxMs, yLabel) {
    ctx.strokeStyle = GRID; ctx.fillStyle = "#555"; ctx.font = "11px sans-serif";
    const step = niceStep(maxMs);
    for (let t = 0; t <= maxMs; t += step) {
      const x = PAD.left + (t / maxMs) * (w - PAD.left - PAD.right);
      ctx.beginPath(); ctx.moveTo(x, PAD.top); ctx.lineTo(x, h - PAD.bottom); ctx.stroke();
      ctx.fillText(t >= 1000 ? (t / 1000).toFixed(step >= 1000 ? 0 : 1) + " s" : t + " ms", x - 10, h - 8);
    }
    ctx.save(); ctx.translate(11, h / 2 + 20); ctx.rotate(-Math.PI / 2); ctx.fillText(yLabel, 0, 0); ctx.restore();
  }

  function content(result) { return result.events.filter((e) => e.kind === "content"); }

  function perRead(events) {
    const counts = new Map();
    for (const e of events) counts.set(e.read, (counts.get(e.read) || 0) + 1);
    return counts;
  }

  function vline(ctx, x, h, colour) {
    ctx.strokeStyle = colour; ctx.setLineDash([4, 3]);
    ctx.beginPath(); ctx.moveTo(x, PAD.top); ctx.lineTo(x, h - PAD.bottom); ctx.stroke();
    ctx.setLineDash([]);
  }

  function drawOne(ctx, w, h, result, xOf, expected) {
    const events = content(result);
    const total = Math.max(expected || 0, events.length, 1);
    const yOf = (n) => h - PAD.bottom - (n / total) * (h - PAD.top - PAD.bottom);
    const counts = perRead(events);
    ctx.strokeStyle = "#999"; ctx.beginPath(); ctx.moveTo(xOf(0), yOf(0));
    events.forEach((e, i) => { ctx.lineTo(xOf(e.t), yOf(i)); ctx.lineTo(xOf(e.t), yOf(i + 1)); });
    ctx.stroke();
    events.forEach((e, i) => {
      ctx.fillStyle = counts.get(e.read) > 1 ? LUMPED : STREAMED;
      ctx.beginPath(); ctx.arc(xOf(e.t), yOf(i + 1), 3, 0, 2 * Math.PI); ctx.fill();
    });
    if (result.ttftMs !== null) vline(ctx, xOf(result.ttftMs), h, TTFT);
    if (result.e2eMs !== null) vline(ctx, xOf(result.e2eMs), h, E2E);
  }

  function drawMany(ctx, w, h, results, xOf) {
    const rows = results.length, rowH = (h - PAD.top - PAD.bottom) / rows;
    results.forEach((result, row) => {
      if (!result) return;
      const y = PAD.top + row * rowH + rowH / 2, offset = result.startOffsetMs || 0;
      const counts = perRead(content(result));
      for (const e of content(result)) {
        ctx.fillStyle = counts.get(e.read) > 1 ? LUMPED : STREAMED;
        ctx.fillRect(xOf(offset + e.t) - 1, y - Math.max(1, rowH * 0.4), 2, Math.max(2, rowH * 0.8));
      }
      if (result.ttftMs !== null) {
        ctx.fillStyle = TTFT; ctx.beginPath();
        ctx.arc(xOf(offset + result.ttftMs), y, Math.min(3, rowH / 2), 0, 2 * Math.PI); ctx.fill();
      }
    });
  }

  // results: the panel's streams so far (null where one has not started); maxMs: shared x range.
  function draw(canvas, results, maxMs, expectedEvents) {
    const ctx = canvas.getContext("2d"), w = canvas.width, h = canvas.height;
    ctx.clearRect(0, 0, w, h);
    const range = Math.max(maxMs, 100);
    const many = results.length > 1;
    axes(ctx, w, h, range, many ? "stream" : "events");
    const xOf = (t) => PAD.left + (Math.min(t, range) / range) * (w - PAD.left - PAD.right);
    if (many) drawMany(ctx, w, h, results, xOf);
    else if (results[0]) drawOne(ctx, w, h, results[0], xOf, expectedEvents);
  }

  window.StreamlabTimeline = {draw};
})();
