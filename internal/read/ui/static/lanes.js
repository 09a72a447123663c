// The lanes view: dragging across the drawing navigates to the same view over the
// selected range (from/to in the URL, so the zoomed view can be shared). The drawing is
// the server's SVG; without this script it is the same, without the drag.
(function () {
  "use strict";
  var svg = document.getElementById("lanes");
  var sel = document.getElementById("lanes-select");
  if (!svg || !sel || !svg.createSVGPoint) return;
  var from = Number(svg.dataset.from), to = Number(svg.dataset.to);
  var plotX = Number(svg.dataset.plotX), plotW = Number(svg.dataset.plotW);
  var start = null;
  function at(ev) {
    var p = svg.createSVGPoint();
    p.x = ev.clientX; p.y = ev.clientY;
    var q = p.matrixTransform(svg.getScreenCTM().inverse());
    return Math.min(Math.max(q.x, plotX), plotX + plotW);
  }
  svg.addEventListener("mousedown", function (ev) {
    if (ev.button !== 0 || ev.target.closest("a")) return;
    start = at(ev);
    ev.preventDefault();
  });
  svg.addEventListener("mousemove", function (ev) {
    if (start === null) return;
    var x = at(ev);
    sel.setAttribute("x", Math.min(start, x));
    sel.setAttribute("width", Math.abs(x - start));
  });
  window.addEventListener("mouseup", function (ev) {
    if (start === null) return;
    var x = at(ev), a = Math.min(start, x), b = Math.max(start, x);
    start = null;
    if (b - a < 3) { sel.setAttribute("width", 0); return; }
    var t = function (px) { return new Date(from + (px - plotX) / plotW * (to - from)); };
    var q = new URLSearchParams(window.location.search);
    q.delete("range"); q.delete("page");
    q.set("from", t(a).toISOString());
    q.set("to", t(b).toISOString());
    window.location.search = q.toString();
  });
})();
