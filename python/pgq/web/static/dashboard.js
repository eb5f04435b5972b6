// Charts of the overview (uPlot), refreshed from /api/series; the queue table refreshes
// itself with htmx. htmx requests carry the CSRF token from the page's meta tag.
(function () {
  "use strict";
  document.addEventListener("htmx:configRequest", function (e) {
    var meta = document.querySelector('meta[name="csrf-token"]');
    if (meta) e.detail.headers["X-CSRF-Token"] = meta.content;
  });
  // The jobs page: "select this page" and the count of selected jobs (bulk actions).
  function countSelected(form) {
    var out = document.getElementById("selected-count");
    if (!out) return;
    var n = form.querySelectorAll('input[name="ids"]:checked').length;
    out.textContent = n + " selected";
  }
  document.addEventListener("change", function (e) {
    var t = e.target, form = t.form;
    if (!form) return;
    if (t.dataset && t.dataset.selectAll) {
      form.querySelectorAll('input[name="' + t.dataset.selectAll + '"]').forEach(function (box) {
        box.checked = t.checked;
      });
    }
    countSelected(form);
  });
  var charts = [];
  function seriesFor(kind) {
    if (kind === "rate") {
      return { title: "jobs per second", data: ["ok", "failed"],
        series: [{}, { label: "succeeded/s", stroke: "#1a7f37", width: 1.5 },
                     { label: "failed/s", stroke: "#b42318", width: 1.5 }] };
    }
    return { title: "latency (s)", data: ["wait50", "wait99", "run50", "run99"],
      series: [{}, { label: "wait p50", stroke: "#2f6fde", width: 1.5 },
                   { label: "wait p99", stroke: "#2f6fde", dash: [4, 3] },
                   { label: "run p50", stroke: "#b7791f", width: 1.5 },
                   { label: "run p99", stroke: "#b7791f", dash: [4, 3] }] };
  }
  function draw(el, json) {
    var spec = seriesFor(el.dataset.kind);
    var data = [json.t].concat(spec.data.map(function (k) { return json[k]; }));
    if (el._plot) { el._plot.setData(data); return; }
    // Latency has gaps (no job finished that second): points keep lone values visible.
    if (el.dataset.kind === "latency") {
      spec.series.slice(1).forEach(function (s) { s.points = { show: true, size: 5 }; });
    }
    // Time labels on one line, in UTC like every time the dashboard shows, spaced so that
    // they never overlap (uPlot's default two-line labels ran into each other).
    var short = el.dataset.window === "5m";
    var xaxis = { space: short ? 70 : 60, values: function (u, splits) {
      return splits.map(function (t) {
        return new Date(t * 1000).toISOString().slice(11, short ? 19 : 16);
      });
    } };
    el._plot = new uPlot({ title: spec.title, width: Math.max(el.clientWidth, 300), height: 200,
                           series: spec.series, axes: [xaxis, {}], tzDate: function (ts) {
                             return uPlot.tzDate(new Date(ts * 1000), "Etc/UTC");
                           }, scales: { x: { time: true } } }, data, el);
  }
  function refresh(win) {
    var els = charts.filter(function (el) { return el.dataset.window === win; });
    if (!els.length) return;
    fetch("/api/series?window=" + win, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (json) { if (json) els.forEach(function (el) { draw(el, json); }); })
      .catch(function () {});
  }
  document.addEventListener("DOMContentLoaded", function () {
    charts = Array.prototype.slice.call(document.querySelectorAll(".chart"));
    if (!charts.length || typeof uPlot === "undefined") return;
    refresh("5m"); refresh("24h");
    setInterval(function () { refresh("5m"); }, 2000);
    setInterval(function () { refresh("24h"); }, 60000);
  });
})();
