// A live run's page: asks its /api twin every data-poll-ms until the run has ended, and writes the
// figures into the elements marked data-live="key.path", the charts redrawn. Each new publish seen
// is counted on #tp-live (data-updates, and the "done" counts in data-seen, the newest 1000). A run
// marks its figures ended a moment before its result is stored: the page asks on (at most
// STORED_POLLS more times) until the stored run is there, then marks itself ended (data-ended).
(function () {
  "use strict";
  var root = document.getElementById("tp-live");
  if (!root) return;
  var api = root.dataset.api;
  var poll = Number(root.dataset.pollMs) || 500;
  var last = root.dataset.updated;
  var updates = 0;
  var seen = [];
  var STORED_POLLS = 40;
  var afterEnd = 0;

  function fmt(v, digits) {
    if (v === null || v === undefined) return "-";
    if (typeof v === "boolean") return v ? "yes" : "no";
    if (typeof v !== "number") return String(v);
    if (Number.isInteger(v)) return v.toLocaleString("en-US");
    if (Math.abs(v) >= 1000) return Math.round(v).toLocaleString("en-US");
    if (v !== 0 && Math.abs(v) < 0.1) return String(Number(v.toPrecision(3)));
    return v.toFixed(digits === undefined ? 1 : digits);
  }

  function at(obj, path) {
    return path.split(".").reduce(function (o, k) { return o === null || o === undefined ? undefined : o[k]; }, obj);
  }

  function redraw(d) {
    var series = (d.figures && d.figures.series) || [];
    var t = series.map(function (p) { return p.t; });
    var ttft = document.getElementById("tp-fig-1");
    var tokens = document.getElementById("tp-fig-2");
    if (!window.Plotly) return;
    if (ttft && ttft.data) {
      Plotly.react(ttft, [
        { x: t, y: series.map(function (p) { return p.ttft_p50; }), name: "P50", mode: "lines+markers", type: "scatter" },
        { x: t, y: series.map(function (p) { return p.ttft_p95; }), name: "P95", mode: "lines+markers", type: "scatter" }
      ], ttft.layout);
    }
    if (tokens && tokens.data) {
      Plotly.react(tokens, [
        { x: t, y: series.map(function (p) { return p.tok_s; }), name: "tokens/s", mode: "lines+markers", type: "scatter" }
      ], tokens.layout);
    }
  }

  function show(d) {
    document.querySelectorAll("[data-live]").forEach(function (el) {
      var key = el.dataset.live;
      if (key === "state") el.textContent = d.run.state;
      else if (key === "errors") el.textContent = JSON.stringify(d.figures.errors || {});
      else if (key === "stored-link") el.hidden = !d.stored;
      else el.textContent = fmt(at(d.figures, key), key === "error_rate" ? 4 : 1);
    });
    redraw(d);
  }

  function schedule() { window.setTimeout(tick, poll); }

  function tick() {
    fetch(api, { credentials: "same-origin", cache: "no-store" })
      .then(function (resp) { return resp.ok ? resp.json() : null; })
      .then(function (d) {
        if (!d) { schedule(); return; }
        if (String(d.run.updated_unix) !== last) {
          last = String(d.run.updated_unix);
          updates += 1;
          seen.push(d.figures.done);
          if (seen.length > 1000) seen.shift();
          root.dataset.updates = String(updates);
          root.dataset.seen = seen.join(",");
          show(d);
        }
        if (d.run.ended && !d.stored && afterEnd < STORED_POLLS) { afterEnd += 1; show(d); schedule(); return; }
        if (d.run.ended) { root.dataset.ended = "1"; show(d); return; }
        schedule();
      })
      .catch(function () { schedule(); });
  }

  if (!root.dataset.ended) schedule();
})();
