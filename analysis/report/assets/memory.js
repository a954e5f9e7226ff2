// Draws the memory timeline (commprof export --format memory-html) from the page's JSON data
// (docs/memory-timeline.md): one stacked step-area chart per rank and device, every chart on the
// same x scale (the shared axis spans the job's first to last record), the peak marked by a red
// line, and a read-out of time and bytes under the pointer. Strings go in as textContent only.
(function () {
  'use strict';
  var NS = 'http://www.w3.org/2000/svg';
  var W = 900, H = 64, LABEL = 170;
  var COLORS = {device: '#4e79a7', pinned: '#f28e2b', managed: '#59a14f', pageable: '#e15759', array: '#76b7b2',
    device_static: '#edc948', managed_static: '#b07aa1', unknown: '#9c755f'};
  var data = JSON.parse(document.getElementById('memory-data').textContent);
  // Records all at one instant: a 1 ms axis (a 1 ns one would print seven decimals of nothing).
  var t0 = data.start_ns, span = data.end_ns > data.start_ns ? data.end_ns - data.start_ns : 1e6;

  function x(t) { return (t - t0) / span * W; }
  function svg(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) { e.setAttribute(k, attrs[k]); }
    if (parent) { parent.appendChild(e); }
    return e;
  }
  function div(cls, parent, text) {
    var e = document.createElement('div');
    if (cls) { e.className = cls; }
    if (text !== undefined) { e.textContent = text; }
    parent.appendChild(e);
    return e;
  }
  function bytes(b) {
    var units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], i = 0, v = b;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i === 0 ? String(v) : v.toFixed(2)) + ' ' + units[i];
  }
  function ms(t) { return ((t - t0) / 1e6).toFixed(3) + ' ms'; }
  function color(cat) { return COLORS.hasOwnProperty(cat) ? COLORS[cat] : COLORS.unknown; }

  // Legend: every category that some chart has.
  var seen = [], legend = document.getElementById('legend');
  data.devices.forEach(function (d) {
    d.categories.forEach(function (c) { if (seen.indexOf(c) < 0) { seen.push(c); } });
  });
  seen.forEach(function (c) {
    var s = document.createElement('span');
    s.className = 'swatch';
    s.style.background = color(c);
    legend.appendChild(s);
    legend.appendChild(document.createTextNode(c));
  });

  // The shared axis, above the charts: ticks at round steps of milliseconds.
  var axis = svg('svg', {'class': 'axis', width: LABEL + W + 40, height: 24, id: 'axis-svg'},
                 document.getElementById('axis'));
  var spanMs = span / 1e6, raw = spanMs / 8, p = Math.pow(10, Math.floor(Math.log(raw) / Math.LN10));
  var step = raw / p < 2 ? 2 * p : raw / p < 5 ? 5 * p : 10 * p;
  var dec = Math.max(0, -Math.floor(Math.log(step) / Math.LN10));
  for (var v = 0; v <= spanMs + 1e-9; v += step) {
    var tx = LABEL + v / spanMs * W;
    svg('line', {x1: tx, x2: tx, y1: 16, y2: 24}, axis);
    var lbl = svg('text', {x: tx, y: 12, 'text-anchor': 'middle'}, axis);
    lbl.textContent = v.toFixed(dec) + (v === 0 ? ' ms' : '');
  }

  var tip = document.getElementById('tooltip'), charts = document.getElementById('charts');
  data.devices.forEach(function (d) {
    var pts = d.points, n = pts.time_ns.length;
    var row = div('chart-row', charts);
    row.setAttribute('data-rank', d.rank);
    row.setAttribute('data-device', d.label);
    var label = div('chart-label', row);
    div('', label, 'rank ' + d.rank + ' \u00b7 ' + d.label);
    // The peak's size and time on lines of their own: a long trace's time would not fit beside it.
    div('peak', label, 'peak ' + bytes(d.peak.bytes));
    if (d.peak.bytes > 0) { div('peak', label, 'at ' + ms(d.peak.time_ns)); }
    if (pts.downsampled) { div('', label, n + ' of ' + pts.records + ' points'); }
    var s = svg('svg', {'class': 'chart mem-chart', width: W, height: H}, row);
    svg('rect', {'class': 'plot-area', x: 0, y: 0, width: W, height: H}, s);
    var top = 0;
    for (var i = 0; i < n; i++) { top = Math.max(top, pts.total[i]); }
    top = Math.max(top, 1);
    function y(b) { return H - b / top * (H - 4); }
    // Stacked step areas, the first category at the bottom; each value holds until the next record,
    // the last one to the end of the axis.
    var below = new Array(n).fill(0);
    d.categories.forEach(function (cat, c) {
      var up = below.map(function (b, k) { return b + pts.by_category[c][k]; });
      var path = '';
      for (var k = 0; k < n; k++) {
        var px = x(pts.time_ns[k]).toFixed(2);
        path += (k === 0 ? 'M' + px + ',' + y(below[0]).toFixed(2) : 'L' + px + ',' + y(up[k - 1]).toFixed(2)) +
                'L' + px + ',' + y(up[k]).toFixed(2);
      }
      path += 'L' + W + ',' + y(up[n - 1]).toFixed(2) + 'L' + W + ',' + y(below[n - 1]).toFixed(2);
      for (k = n - 1; k >= 0; k--) {
        var bx = x(pts.time_ns[k]).toFixed(2);
        path += 'L' + bx + ',' + y(below[k]).toFixed(2) + (k > 0 ? 'L' + bx + ',' + y(below[k - 1]).toFixed(2) : '');
      }
      svg('path', {'class': 'area', 'data-category': cat, d: path + 'Z', fill: color(cat)}, s);
      below = up;
    });
    if (d.peak.bytes > 0) {
      var mx = x(d.peak.time_ns);
      var attrs = {'class': 'peak-marker', x1: mx, x2: mx, y1: 0, y2: H, 'data-rank': d.rank,
                   'data-time-ns': d.peak.time_ns, 'data-bytes': d.peak.bytes};
      svg('line', attrs, s);
      svg('circle', {'class': 'peak-dot', cx: mx, cy: y(d.peak.bytes), r: 3}, s);
    }
    var hover = svg('line', {'class': 'hover-line', x1: 0, x2: 0, y1: 0, y2: H, visibility: 'hidden'}, s);
    s.addEventListener('mousemove', function (ev) {
      var r = s.getBoundingClientRect(), px = Math.min(W, Math.max(0, ev.clientX - r.left));
      var t = t0 + px / W * span, lo = 0, hi = n;  // the last record at or before t
      while (lo < hi) { var mid = (lo + hi) >> 1; if (pts.time_ns[mid] <= t) { lo = mid + 1; } else { hi = mid; } }
      var i = lo - 1, parts = [];
      d.categories.forEach(function (cat, c) { parts.push(cat + ' ' + bytes(i < 0 ? 0 : pts.by_category[c][i])); });
      tip.textContent = 'rank ' + d.rank + ' \u00b7 ' + d.label + '\n' + ms(t) + ': ' +
                        bytes(i < 0 ? 0 : pts.total[i]) + ' in use\n' + parts.join(', ');
      tip.hidden = false;
      tip.style.left = (ev.clientX + 12) + 'px';
      tip.style.top = (ev.clientY + 12) + 'px';
      hover.setAttribute('x1', px);
      hover.setAttribute('x2', px);
      hover.setAttribute('visibility', 'visible');
    });
    s.addEventListener('mouseleave', function () { tip.hidden = true; hover.setAttribute('visibility', 'hidden'); });
  });
  document.documentElement.setAttribute('data-js', 'ready');
})();
