// The timeline's chart: the counts /chart.json gives for the page's range and filters
// (fetched, so the feed is served without waiting for them), stacked by resource
// (creates and updates), with observed and inferred deletes on top in their own colours.
// A resource's colour is a hash of its name into a fixed palette, so it keeps its colour
// whatever the range or the filters; the ops have theirs. Health (the versions that went
// bad, and recovered) is drawn as two lines over the stacked bars, not stacked. Times are shown in the page's
// zone (#chart's data-tz: UTC unless the URL's tz names one), 24-hour, with the zone on
// the axis; counts have whole-number ticks. Dragging across the chart navigates to the
// same view over the selected range (from/to in the URL, so the zoomed view can be
// shared). Without this script the page still shows the feed, the range presets and the
// filters.
(function () {
  "use strict";
  // The "local" toggle names the browser's zone, which only the browser knows.
  var local = document.getElementById("tz-local");
  if (local && window.Intl && Intl.DateTimeFormat) {
    var zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
    if (zone) {
      var u = new URL(local.href, window.location.href);
      u.searchParams.set("tz", zone);
      local.href = u.pathname + u.search;
      local.textContent = "local (" + zone + ")";
    }
  }
  var el = document.getElementById("chart");
  if (!el || !el.dataset.src || typeof uPlot === "undefined" || !window.fetch) return;
  fetch(el.dataset.src, { credentials: "same-origin" })
    .then(function (r) { if (!r.ok) throw new Error(r.status + " " + r.statusText); return r.json(); })
    .then(draw)
    .catch(function (e) { el.textContent = "The chart could not be drawn: " + e.message; });

// Resources' colours; the ops' (reds and orange) are kept out of it.
var palette = ["#4c78a8", "#72b7b2", "#54a24b", "#b279a2", "#9d755d", "#eeca3b", "#ff9da6", "#17becf", "#8c6d31", "#393b79"];
var opColors = { "delete": "#d62728", "inferred": "#ff7f0e", "unhealthy": "#9c27b0", "recovered": "#2ca02c" };
// Health transitions are counts of their own, drawn as lines over the stacked changes.
var unstacked = { "unhealthy": true, "recovered": true };
var otherColor = "#bab0ac";

// colorOf is the resource's colour: FNV-1a of its name into the palette.
function colorOf(label) {
  if (label === "other") return otherColor;
  var h = 0x811c9dc5;
  for (var i = 0; i < label.length; i++) {
    h ^= label.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return palette[h % palette.length];
}

function draw(c) {
  if (!c.t || c.t.length === 0) return;
  var tz = el.dataset.tz || "UTC";
  var inZone = function (ts) { return uPlot.tzDate(new Date(ts * 1e3), tz); };
  var fmtDay = uPlot.fmtDate("{YYYY}-{MM}-{DD}");
  var fmtDayMin = uPlot.fmtDate("{MM}-{DD} {HH}:{mm}");
  var fmtMin = uPlot.fmtDate("{HH}:{mm}");
  var fmtSec = uPlot.fmtDate("{HH}:{mm}:{ss}");
  var fmtFull = uPlot.fmtDate("{YYYY}-{MM}-{DD} {HH}:{mm}:{ss}");
  // Cumulative sums, bottom to top; drawn from the top down so each fill shows its band.
  var acc = c.t.map(function () { return 0; });
  var stacked = c.series.map(function (s) {
    if (unstacked[s.kind]) return s.data.slice();
    acc = acc.map(function (v, i) { return v + s.data[i]; });
    return acc.slice();
  });
  var order = c.series.map(function (_, i) { return i; }).reverse();
  var bars = uPlot.paths && uPlot.paths.bars ? uPlot.paths.bars({ size: [0.9, 40] }) : undefined;
  var x = { label: "time (" + tz + ")", value: function (u, v) { return v == null ? "" : fmtFull(inZone(v)) + " " + tz; } };
  var series = [x].concat(order.map(function (i) {
    var s = c.series[i];
    var color = opColors[s.kind] || colorOf(s.label);
    if (unstacked[s.kind]) {
      return {
        label: s.label, stroke: color, width: 2, points: { show: true, size: 6, fill: color },
        value: function (u, v, si, di) { return di == null ? "" : String(s.data[di]); }
      };
    }
    return {
      label: s.label, stroke: color, fill: color, width: 0, paths: bars, points: { show: false },
      value: function (u, v, si, di) { return di == null ? "" : String(s.data[di]); }
    };
  }));
  var data = [c.t].concat(order.map(function (i) { return stacked[i]; }));
  // What the axes show, kept on the element: the browser tests read them (they are
  // drawn on a canvas).
  var xTicks = function (u, splits, ai, space, incr) {
    var lastDay = null;
    var out = splits.map(function (v) {
      if (v == null) return "";
      var d = inZone(v);
      var day = fmtDay(d);
      var s;
      if (incr >= 86400) s = day;
      else if (incr < 60) s = fmtSec(d);
      else s = day === lastDay ? fmtMin(d) : fmtDayMin(d);
      lastDay = day;
      return s;
    });
    el.dataset.xticks = JSON.stringify(out);
    return out;
  };
  var yTicks = function (u, splits) {
    var out = splits.map(function (v) { return v == null ? "" : String(v); });
    el.dataset.yticks = JSON.stringify(out);
    return out;
  };
  var wholes = [];
  for (var m = 1; m <= 1e9; m *= 10) wholes.push(m, 2 * m, 5 * m);
  var opts = {
    width: Math.max(el.clientWidth, 320), height: 240,
    tzDate: inZone,
    scales: { x: { time: true, range: function () { return [c.from, c.to]; } }, y: { range: function (u, min, max) { return [0, Math.max(1, max)]; } } },
    axes: [
      { label: "time (" + tz + ")", values: xTicks },
      { label: "changes / " + (c.step >= 3600 ? (c.step / 3600) + " h" : (c.step / 60) + " min"), incrs: wholes, values: yTicks }
    ],
    cursor: { drag: { x: true, y: false, setScale: false } },
    series: series,
    hooks: {
      setSelect: [function (u) {
        if (u.select.width < 4) return;
        var from = Math.floor(u.posToVal(u.select.left, "x"));
        var to = Math.ceil(u.posToVal(u.select.left + u.select.width, "x"));
        // A selection that reaches the right edge means "up to the end": a pixel there is
        // seconds wide, and the newest changes are in them.
        if (u.select.left + u.select.width >= u.bbox.width / (window.devicePixelRatio || 1) - 3) to = c.to + 1;
        var q = new URLSearchParams(window.location.search);
        q.delete("range"); q.delete("before");
        q.set("from", new Date(from * 1000).toISOString().replace(/\.\d+Z$/, "Z"));
        q.set("to", new Date(to * 1000).toISOString().replace(/\.\d+Z$/, "Z"));
        window.location.search = q.toString();
      }]
    }
  };
  var plot = new uPlot(opts, data, el);
  window.addEventListener("resize", function () { plot.setSize({ width: Math.max(el.clientWidth, 320), height: 240 }); });
  el.setAttribute("data-drawn", "true");
}
})();
