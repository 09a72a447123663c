// The timeline's chart: the counts /chart.json gives for the page's range and filters
// (fetched, so the feed is served without waiting for them), stacked by resource
// (creates and updates), with observed and inferred deletes on top in their own colours.
// Dragging across it navigates to the same view over the selected range (from/to in the
// URL, so the zoomed view can be shared). Without this script the page still shows the
// feed, the range presets and the filters.
(function () {
  "use strict";
  var el = document.getElementById("chart");
  if (!el || !el.dataset.src || typeof uPlot === "undefined" || !window.fetch) return;
  fetch(el.dataset.src, { credentials: "same-origin" })
    .then(function (r) { if (!r.ok) throw new Error(r.status + " " + r.statusText); return r.json(); })
    .then(draw)
    .catch(function (e) { el.textContent = "The chart could not be drawn: " + e.message; });

function draw(c) {
  if (!c.t || c.t.length === 0) return;
  var palette = ["#4c78a8", "#72b7b2", "#54a24b", "#b279a2", "#9d755d", "#bab0ac", "#eeca3b", "#ff9da6", "#79706e"];
  var colors = { "delete": "#d62728", "inferred": "#ff7f0e" };
  // Cumulative sums, bottom to top; drawn from the top down so each fill shows its band.
  var acc = c.t.map(function () { return 0; });
  var stacked = c.series.map(function (s) {
    acc = acc.map(function (v, i) { return v + s.data[i]; });
    return acc.slice();
  });
  var order = c.series.map(function (_, i) { return i; }).reverse();
  var bars = uPlot.paths && uPlot.paths.bars ? uPlot.paths.bars({ size: [0.9, 40] }) : undefined;
  var k = 0;
  var series = [{}].concat(order.map(function (i) {
    var s = c.series[i];
    var color = colors[s.kind] || palette[k++ % palette.length];
    return {
      label: s.label, stroke: color, fill: color, width: 0, paths: bars, points: { show: false },
      value: function (u, v, si, di) { return di == null ? "" : String(s.data[di]); }
    };
  }));
  var data = [c.t].concat(order.map(function (i) { return stacked[i]; }));
  var opts = {
    width: Math.max(el.clientWidth, 320), height: 240,
    scales: { x: { time: true, range: function () { return [c.from, c.to]; } }, y: { range: function (u, min, max) { return [0, Math.max(1, max)]; } } },
    axes: [{}, { label: "changes / " + (c.step >= 3600 ? (c.step / 3600) + " h" : (c.step / 60) + " min") }],
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
