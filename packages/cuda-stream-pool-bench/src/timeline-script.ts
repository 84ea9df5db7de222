// The script of the timeline page (timeline.ts), as the text that goes into its <script> element: it reads the
// embedded data and draws each mode on a canvas (one canvas per mode: 50,000 bars as DOM nodes would not stay fast),
// with a shared time axis that the wheel zooms and a drag pans, and a tooltip on hover. Plain ES2020 for any
// browser; it loads nothing.

/** Layout of every mode's canvas, in CSS pixels. The page sets these as data- attributes on each canvas too. */
export const LAYOUT = {
  labelWidth: 250,
  rightMargin: 12,
  axisHeight: 24,
  laneHeight: 34,
  lanePitch: 40,
  rowsGap: 10,
  rowHeight: 18,
  barTop: 2,
  barHeight: 14,
  /** Rows shown before the section's "show all" button: about a screen's worth. */
  collapsedRows: 24,
  /** The default zoom makes the median bar at least this wide. */
  readableBarPx: 10,
} as const;

/** Each phase's fill colour and the darker colour of its pattern (copy-in "/" stripes, kernel plain, copy-out "\"
 * stripes), so phases are told apart without colour too. */
export const PHASE_STYLE = [
  { phase: 'copy-in', color: '#4c78a8', stripe: '#1f3f66', pattern: 'rising' },
  { phase: 'kernel', color: '#f58518', stripe: '#f58518', pattern: 'plain' },
  { phase: 'copy-out', color: '#54a24b', stripe: '#23521c', pattern: 'falling' },
] as const;

/** The page's script: reads the JSON in the page's `timeline-data`, `timeline-layout` and `timeline-style` elements,
 * draws each mode with rows on `canvas-<index>`, wires the `zoom-*` buttons, the `toggle-<index>` buttons, the
 * wheel, drag and hover, and writes the view into `view-range` (text, and `data-start-ms` / `data-end-ms`). When it
 * has drawn it sets `document.body.dataset.ready` and `window.cspTimeline` ({ loadMs: ms from navigation start,
 * view(), setView(startMs, endMs), fit() }); each canvas carries its layout and `data-bars-drawn` as data- attributes. */
export const TIMELINE_SCRIPT = String.raw`
(function () {
  'use strict';
  var started = performance.now();
  var L = JSON.parse(document.getElementById('timeline-layout').textContent);
  var STYLE = JSON.parse(document.getElementById('timeline-style').textContent);
  var data = JSON.parse(document.getElementById('timeline-data').textContent);
  var modes = data.modes.filter(function (m) { return m.rows; });
  var tooltip = document.getElementById('tooltip');
  var rangeText = document.getElementById('view-range');

  var fitStart = Infinity, fitEnd = -Infinity, durations = [];
  modes.forEach(function (m) {
    fitStart = Math.min(fitStart, m.spanStartMs);
    fitEnd = Math.max(fitEnd, m.spanEndMs);
    m.rows.forEach(function (row) {
      for (var i = 0; i + 1 < row.marksMs.length; i++) if ((i & 3) !== 3) durations.push(row.marksMs[i + 1] - row.marksMs[i]);
    });
  });
  var view = { start: 0, end: 1 };

  function fmt(ms) { return ms.toFixed(3) + ' ms'; }
  function tickStep(span, count) {
    var raw = span / count, power = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / power;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * power;
  }
  function tickLabel(ms, step) {
    var digits = Math.max(0, Math.min(6, -Math.floor(Math.log10(step))));
    return ms.toFixed(digits) + ' ms';
  }

  function makePattern(ctx, style) {
    var tile = document.createElement('canvas');
    tile.width = 8; tile.height = 8;
    var t = tile.getContext('2d');
    t.fillStyle = style.color; t.fillRect(0, 0, 8, 8);
    if (style.pattern !== 'plain') {
      t.fillStyle = style.stripe;
      for (var i = 0; i < 8; i++) {
        var y = style.pattern === 'rising' ? 7 - i : i;
        t.fillRect(i, y, 1, 1); t.fillRect(i, (y + 1) % 8, 1, 1);
      }
    }
    return ctx.createPattern(tile, 'repeat');
  }

  function Section(mode, index) {
    this.mode = mode;
    this.canvas = document.getElementById('canvas-' + index);
    this.toggle = document.getElementById('toggle-' + index);
    this.expanded = mode.rows.length <= L.collapsedRows;
    var self = this;
    if (this.toggle) this.toggle.addEventListener('click', function () {
      self.expanded = !self.expanded;
      self.toggle.textContent = self.expanded ? 'Show the first ' + L.collapsedRows + ' stream rows only' : 'Show all ' + mode.rows.length + ' stream rows';
      self.layout(); self.draw();
    });
  }
  Section.prototype.layout = function () {
    var rows = this.mode.rows.length;
    this.rowsShown = this.expanded ? rows : Math.min(rows, L.collapsedRows);
    this.rowHeight = this.rowsShown > 1500 ? Math.max(2, Math.floor(30000 / this.rowsShown)) : L.rowHeight;
    this.barTop = this.rowHeight === L.rowHeight ? L.barTop : 0;
    this.barHeight = this.rowHeight === L.rowHeight ? L.barHeight : Math.max(1, this.rowHeight - 1);
    this.width = Math.max(400, this.canvas.parentElement.clientWidth);
    this.plotLeft = L.labelWidth;
    this.plotWidth = this.width - L.labelWidth - L.rightMargin;
    this.laneTop = L.axisHeight;
    this.rowsTop = L.axisHeight + 3 * L.lanePitch + L.rowsGap;
    this.height = this.rowsTop + this.rowsShown * this.rowHeight + 4;
    var dpr = window.devicePixelRatio || 1, c = this.canvas;
    c.style.width = this.width + 'px'; c.style.height = this.height + 'px';
    c.width = Math.round(this.width * dpr); c.height = Math.round(this.height * dpr);
    this.ctx = c.getContext('2d');
    this.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    this.patterns = STYLE.map(function (s) { return makePattern(this.ctx, s); }, this);
    var d = c.dataset;
    d.plotLeft = this.plotLeft; d.plotWidth = this.plotWidth; d.laneTop = this.laneTop; d.laneHeight = L.laneHeight;
    d.lanePitch = L.lanePitch; d.rowsTop = this.rowsTop; d.rowHeight = this.rowHeight; d.barTop = this.barTop;
    d.barHeight = this.barHeight; d.rowsShown = this.rowsShown;
  };
  Section.prototype.x = function (ms) { return this.plotLeft + (ms - view.start) / (view.end - view.start) * this.plotWidth; };
  Section.prototype.time = function (px) { return view.start + (px - this.plotLeft) / this.plotWidth * (view.end - view.start); };
  Section.prototype.draw = function () {
    var ctx = this.ctx, m = this.mode, self = this, right = this.plotLeft + this.plotWidth;
    ctx.clearRect(0, 0, this.width, this.height);
    ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, this.width, this.height);
    ctx.font = '11px system-ui, sans-serif'; ctx.textBaseline = 'middle';
    // Row backgrounds, then the grid and the axis above them.
    for (var r = 0; r < this.rowsShown; r++) {
      if (r % 2) { ctx.fillStyle = '#f6f6f6'; ctx.fillRect(0, this.rowsTop + r * this.rowHeight, this.width, this.rowHeight); }
    }
    var step = tickStep(view.end - view.start, Math.max(2, Math.floor(this.plotWidth / 110)));
    ctx.textAlign = 'center';
    for (var t = Math.ceil(view.start / step) * step; t <= view.end; t += step) {
      var gx = Math.round(this.x(t)) + 0.5;
      ctx.fillStyle = '#e2e2e2'; ctx.fillRect(gx - 0.5, L.axisHeight - 4, 1, this.height - L.axisHeight + 4);
      ctx.fillStyle = '#555'; ctx.fillText(tickLabel(t, step), gx, 10);
    }
    ctx.textAlign = 'left';
    // Engine lanes: the number of each phase in flight, a step area scaled to the lane's peak; idle time tinted.
    ctx.save(); ctx.beginPath(); ctx.rect(this.plotLeft, 0, this.plotWidth, this.height); ctx.clip();
    var times = m.steps.timesMs;
    for (var p = 0; p < 3; p++) {
      var top = this.laneTop + p * L.lanePitch, counts = m.steps.inFlight[p], peak = Math.max(1, m.occupancy[p].peakInFlight);
      var spanLeft = Math.max(this.plotLeft, this.x(m.spanStartMs)), spanRight = Math.min(right, this.x(m.spanEndMs));
      if (spanRight > spanLeft) { ctx.fillStyle = '#f9e3e3'; ctx.fillRect(spanLeft, top, spanRight - spanLeft, L.laneHeight); }
      for (var i = 0; i < times.length; i++) {
        if (counts[i] === 0) continue;
        // Whole pixels: steps side by side leave no light seams between them.
        var x0 = Math.round(this.x(times[i])), x1 = i + 1 < times.length ? Math.round(this.x(times[i + 1])) : x0;
        if (x1 < this.plotLeft || x0 > right) continue;
        // Any number in flight fills at least a third of the lane, so a busy engine never looks like a hairline.
        var h = (1 + 2 * counts[i] / peak) / 3 * (L.laneHeight - 2);
        ctx.fillStyle = '#fff'; ctx.fillRect(x0, top, Math.max(1, x1 - x0), L.laneHeight);
        ctx.fillStyle = this.patterns[p]; ctx.fillRect(x0, top + L.laneHeight - h, Math.max(1, x1 - x0), h);
      }
    }
    // Stream rows: three bars per task; a white line marks where each task starts.
    var drawn = 0;
    for (var r2 = 0; r2 < this.rowsShown; r2++) {
      var row = m.rows[r2], marks = row.marksMs, y = this.rowsTop + r2 * this.rowHeight + this.barTop;
      for (var k = firstVisible(marks, view.start); k < marks.length; k += 4) {
        if (marks[k] > view.end) break;
        for (var q = 0; q < 3; q++) {
          var a = this.x(marks[k + q]), b = this.x(marks[k + q + 1]);
          if (b < this.plotLeft || a > right) continue;
          ctx.fillStyle = this.patterns[q]; ctx.fillRect(a, y, Math.max(1, b - a), this.barHeight);
          drawn++;
        }
        var start = this.x(marks[k]);
        if (this.x(marks[k + 3]) - start >= 12) { ctx.fillStyle = '#fff'; ctx.fillRect(start, y, 1, this.barHeight); }
      }
    }
    ctx.restore();
    this.canvas.dataset.barsDrawn = drawn;
    // Labels last, over a plain background.
    ctx.fillStyle = '#fff'; ctx.fillRect(0, L.axisHeight - 4, this.plotLeft - 2, this.height);
    for (var p2 = 0; p2 < 3; p2++) {
      var o = m.occupancy[p2], ly = this.laneTop + p2 * L.lanePitch;
      ctx.fillStyle = this.patterns[p2]; ctx.fillRect(4, ly + 6, 14, L.laneHeight - 12);
      ctx.fillStyle = '#222'; ctx.font = 'bold 11px system-ui, sans-serif';
      ctx.fillText(o.phase + ' engine', 24, ly + 10);
      ctx.font = '11px system-ui, sans-serif'; ctx.fillStyle = '#444';
      ctx.fillText((o.busyFraction * 100).toFixed(0) + '% busy, peak ' + o.peakInFlight + ', ' + o.gaps + ' gaps', 24, ly + 24);
    }
    if (this.rowHeight >= 10) {
      for (var r3 = 0; r3 < this.rowsShown; r3++) {
        var rw = m.rows[r3], ry = this.rowsTop + r3 * this.rowHeight + this.rowHeight / 2;
        if (r3 % 2) { ctx.fillStyle = '#f6f6f6'; ctx.fillRect(0, ry - this.rowHeight / 2, this.plotLeft - 2, this.rowHeight); }
        ctx.fillStyle = '#333';
        ctx.fillText(clip(ctx, rw.label, this.plotLeft - 60), 4, ry);
        ctx.fillStyle = '#777'; ctx.textAlign = 'right';
        ctx.fillText((rw.busyFraction * 100).toFixed(0) + '% busy', this.plotLeft - 6, ry);
        ctx.textAlign = 'left';
      }
    } else {
      ctx.fillStyle = '#333'; ctx.fillText(this.rowsShown + ' streams, a row each', 4, this.rowsTop + 8);
    }
  };
  function clip(ctx, text, width) {
    if (ctx.measureText(text).width <= width) return text;
    while (text.length > 1 && ctx.measureText(text + '…').width > width) text = text.slice(0, -1);
    return text + '…';
  }
  // The first task (index into marks, a multiple of 4) whose end is at or after ms; tasks of a row are in start order
  // and do not overlap, so ends ascend too.
  function firstVisible(marks, ms) {
    var lo = 0, hi = marks.length / 4;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (marks[mid * 4 + 3] < ms) lo = mid + 1; else hi = mid; }
    return lo * 4;
  }
  // What is under the pointer: a bar of a stream row, or a moment of an engine lane.
  Section.prototype.hit = function (px, py) {
    if (px < this.plotLeft || px > this.plotLeft + this.plotWidth) return null;
    var ms = this.time(px), m = this.mode, tolerance = 2 * (view.end - view.start) / this.plotWidth;
    if (py >= this.laneTop && py < this.laneTop + 3 * L.lanePitch) {
      var p = Math.floor((py - this.laneTop) / L.lanePitch), times = m.steps.timesMs, lo = 0, hi = times.length;
      while (lo < hi) { var mid = (lo + hi) >> 1; if (times[mid] <= ms) lo = mid + 1; else hi = mid; }
      var n = lo > 0 ? m.steps.inFlight[p][lo - 1] : 0;
      return m.occupancy[p].phase + ': ' + n + ' in flight at ' + fmt(ms) + '\n' + (m.occupancy[p].busyFraction * 100).toFixed(1) + '% of the run busy';
    }
    var r = Math.floor((py - this.rowsTop) / this.rowHeight);
    if (py < this.rowsTop || r >= this.rowsShown) return null;
    var row = m.rows[r], marks = row.marksMs;
    for (var k = firstVisible(marks, ms - tolerance); k < marks.length && marks[k] <= ms + tolerance; k += 4) {
      for (var q = 0; q < 3; q++) {
        if (ms >= marks[k + q] - tolerance && ms <= marks[k + q + 1] + tolerance) {
          var task = row.tasks[k / 4], thread = row.threads[k / 4];
          return 'task ' + task + (thread ? ' (worker ' + thread + ')' : '') + ': ' + STYLE[q].phase + '\n' + row.label +
            '\nstart ' + fmt(marks[k + q]) + ', duration ' + fmt(marks[k + q + 1] - marks[k + q]);
        }
      }
    }
    return null;
  };

  var sections = modes.map(function (m) { return new Section(m, data.modes.indexOf(m)); });
  var pending = false;
  function redraw() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () { pending = false; drawAll(); });
  }
  function drawAll() {
    sections.forEach(function (s) { s.draw(); });
    rangeText.textContent = 'Showing ' + fmt(view.start) + ' to ' + fmt(view.end) + ' of ' + fmt(fitStart) + ' to ' + fmt(fitEnd) + '.';
    rangeText.dataset.startMs = view.start; rangeText.dataset.endMs = view.end;
  }
  function setView(start, end) {
    var width = Math.max(1e-4, Math.min(end - start, (fitEnd - fitStart) * 4));
    var middle = (start + end) / 2;
    view.start = middle - width / 2; view.end = middle + width / 2;
    redraw();
  }
  function fit() { var pad = (fitEnd - fitStart) * 0.01; setView(fitStart - pad, fitEnd + pad); }
  // The default zoom: from the start, wide enough that the median bar is readableBarPx wide (or the whole run).
  function readable() {
    durations = Float64Array.from(durations).sort();
    var median = durations.length ? durations[durations.length >> 1] : fitEnd - fitStart;
    var plotWidth = sections.length ? sections[0].plotWidth : 800;
    var width = median / L.readableBarPx * plotWidth;
    if (width >= fitEnd - fitStart) fit(); else setView(fitStart - width * 0.01, fitStart + width * 0.99);
  }
  function zoomAt(ms, factor) { setView(ms - (ms - view.start) * factor, ms + (view.end - ms) * factor); }

  sections.forEach(function (s) {
    var c = s.canvas, drag = null;
    c.addEventListener('wheel', function (e) {
      e.preventDefault();
      var rect = c.getBoundingClientRect();
      zoomAt(s.time(Math.max(s.plotLeft, e.clientX - rect.left)), Math.exp(e.deltaY * 0.0015));
    }, { passive: false });
    c.addEventListener('mousedown', function (e) { drag = { x: e.clientX, start: view.start, end: view.end }; c.style.cursor = 'grabbing'; });
    window.addEventListener('mouseup', function () { drag = null; c.style.cursor = ''; });
    c.addEventListener('mousemove', function (e) {
      var rect = c.getBoundingClientRect(), px = e.clientX - rect.left, py = e.clientY - rect.top;
      if (drag) {
        var shift = (e.clientX - drag.x) / s.plotWidth * (drag.end - drag.start);
        setView(drag.start - shift, drag.end - shift);
        tooltip.hidden = true;
        return;
      }
      var text = s.hit(px, py);
      tooltip.hidden = !text;
      if (text) {
        tooltip.textContent = text;
        tooltip.style.left = Math.min(e.pageX + 14, document.documentElement.scrollWidth - 320) + 'px';
        tooltip.style.top = e.pageY + 14 + 'px';
      }
    });
    c.addEventListener('mouseleave', function () { tooltip.hidden = true; });
  });
  document.getElementById('zoom-fit').addEventListener('click', fit);
  document.getElementById('zoom-readable').addEventListener('click', readable);
  document.getElementById('zoom-in').addEventListener('click', function () { zoomAt((view.start + view.end) / 2, 0.5); });
  document.getElementById('zoom-out').addEventListener('click', function () { zoomAt((view.start + view.end) / 2, 2); });
  window.addEventListener('resize', function () { sections.forEach(function (s) { s.layout(); }); redraw(); });

  sections.forEach(function (s) { s.layout(); });
  readable();
  drawAll();
  pending = false;
  window.cspTimeline = {
    loadMs: performance.now(),
    scriptMs: performance.now() - started,
    view: function () { return [view.start, view.end]; },
    setView: function (start, end) { setView(start, end); drawAll(); },
    fit: function () { fit(); drawAll(); },
  };
  document.body.dataset.ready = 'true';
})();
`;
