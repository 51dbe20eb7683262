// Line charts of training scalars, drawn by uPlot (web/ui/vendor/uplot/, a
// committed copy of the npm package web/package.json pins; see
// web/README.md for why uPlot).
//
// One chart is one <figure>: a caption, uPlot's canvas and legend (hidden
// from screen readers: the table of latest values under the charts is the
// accessible alternative) and a line naming the restarts. Each attempt is a
// line of its own; the first step of each attempt after the first is marked
// with a dashed line labelled "attempt N". A chart is created once and then
// fed with setData(): polling never rebuilds a canvas whose data did not
// change, and keeps the one whose data did.
import { h } from '../dom.js';
import { forLogScale, formatClock, formatScalar, formatTick, logTicks, timeTicks, xRange } from '../scalars.js';

// uPlot is 145 KB: loaded with the first chart, not with every page.
let uPlotPromise = null;
export function loadUPlot() {
  uPlotPromise ??= import('../vendor/uplot/uPlot.esm.js').then((m) => m.default);
  return uPlotPromise;
}

// Okabe and Ito's palette (told apart with the common color-vision
// deficiencies), attempt 1 first; the legend and the markers name each
// attempt, so color is never the only clue.
const ATTEMPT_COLORS = ['#0072b2', '#d55e00', '#009e73', '#cc79a7', '#e69f00', '#56b4e9', '#000000'];
export function attemptColor(attempt) {
  return ATTEMPT_COLORS[(attempt - 1) % ATTEMPT_COLORS.length];
}

const HEIGHT = 170;

// Tick increments for steps: whole numbers only (uPlot's default list has
// 2.5, 0.5, ...), 1, 2, 2.5 (from 10 on), 5 times powers of ten.
const STEP_INCRS = [];
for (let p = 1; p <= 1e12; p *= 10) STEP_INCRS.push(p, 2 * p, ...(p >= 10 ? [2.5 * p] : []), 5 * p);

// A chart in `figure` (already in the document, so that it has a width).
//   spec: {aligned: {x, attempts, ys}, markers: [{attempt, x}], time: bool,
//          xLabel: 'step' | 'time', log: bool (a log y scale)}
export class Chart {
  constructor(uPlot, figure, spec) {
    this.uPlot = uPlot;
    this.figure = figure;
    this.plotBox = h('div', { class: 'chart-plot', 'aria-hidden': 'true' });
    figure.append(this.plotBox);
    this.build(spec);
  }

  build(spec) {
    this.attemptsKey = spec.aligned.attempts.join(',');
    this.markers = spec.markers;
    this.log = Boolean(spec.log);
    this.rawYs = spec.aligned.ys;
    const many = spec.aligned.attempts.length > 1;
    const time = spec.time;
    const opts = {
      width: this.width(),
      height: HEIGHT,
      scales: {
        // With a single x, uPlot hands a time scale [x, x + 86400 / ms]: a
        // thousand days for times in seconds. The data says it is one point.
        x: { time, range: (u, min, max) => (u.data?.[0]?.length === 1 ? xRange(u.data[0][0], u.data[0][0], { time }) : xRange(min, max, { time })) },
        // distr 3: log10. Its values must be above 0 (see toUPlot).
        y: this.log ? { distr: 3 } : {},
      },
      series: [
        // The legend shows the values under the cursor ("—" when it is
        // elsewhere, or the attempt has no point there).
        {
          label: spec.xLabel,
          value: (u, v) => (v === null || v === undefined ? '—' : spec.time ? formatClock(v, { seconds: true }) : String(v)),
        },
        ...spec.aligned.attempts.map((a) => ({
          label: many ? `attempt ${a}` : spec.yLabel || 'value',
          stroke: attemptColor(a),
          width: 1.5,
          // The value as reported, also where the log scale cannot draw it.
          value: (u, v, si, idx) => {
            const raw = idx === null || idx === undefined ? undefined : this.rawYs[si - 1]?.[idx];
            return raw === undefined ? '—' : formatScalar(raw);
          },
        })),
      ],
      axes: [
        // (An option set to undefined would replace uPlot's default: each
        // axis gets only the keys it sets.)
        spec.time
          ? {
              // "19:27:47" needs more room than uPlot's default 50 px a tick.
              space: 62,
              values: (u, splits, ai, space, incr) => timeTicks(splits, incr),
            }
          : { incrs: STEP_INCRS, values: (u, splits, ai, space, incr) => splits.map((v) => formatTick(v, incr)) },
        this.log
          ? { values: (u, splits) => logTicks(splits), size: 52 }
          : { values: (u, splits, ai, space, incr) => splits.map((v) => formatTick(v, incr)), size: 52 },
      ],
      legend: { live: true },
      cursor: { drag: { x: true, y: false } },
      hooks: { draw: [(u) => drawMarkers(u, this.markers)] },
    };
    this.u = new this.uPlot(opts, toUPlot(spec.aligned, this.log), this.plotBox);
    // The e2e tests read the drawn data here (tests/e2e/dashboard.test.mjs).
    this.figure.uplot = this.u;
    this.figure.dataset.attempts = this.attemptsKey;
  }

  // New data: setData() on the same canvas, unless an attempt appeared (a
  // new line) or the scale changed: uPlot's series and scales are fixed at
  // creation, so the chart is rebuilt.
  update(spec) {
    if (spec.aligned.attempts.join(',') !== this.attemptsKey || Boolean(spec.log) !== this.log) {
      this.u.destroy();
      this.build(spec);
      return;
    }
    this.markers = spec.markers;
    this.rawYs = spec.aligned.ys;
    this.u.setData(toUPlot(spec.aligned, this.log));
  }

  width() {
    // The plot box is a block: as wide as the figure's content, whatever
    // the canvas in it measures.
    return Math.max(160, Math.floor(this.plotBox.clientWidth || 300));
  }

  resize() {
    const w = this.width();
    if (w !== this.u.width) this.u.setSize({ width: w, height: HEIGHT });
  }

  destroy() {
    this.u.destroy();
    this.figure.uplot = null;
  }
}

function toUPlot(aligned, log) {
  return [aligned.x, ...(log ? forLogScale(aligned.ys).ys : aligned.ys)];
}

// Restart markers: a dashed line at each attempt's start and its name,
// drawn on uPlot's canvas after the series. Restarts close together (in
// place, a second apart on a time axis) would print their names over each
// other: a name that would overlap one already drawn goes a row lower.
function drawMarkers(u, markers) {
  if (!markers || !markers.length) return;
  const { ctx } = u;
  const { left, top, width, height } = u.bbox;
  const px = devicePixelRatio || 1;
  ctx.save();
  ctx.font = `${Math.round(11 * px)}px system-ui, sans-serif`;
  ctx.textBaseline = 'top';
  const placed = []; // label boxes drawn: {x0, x1, row}
  const rowHeight = 15 * px;
  const rows = Math.max(1, Math.floor((height - 4 * px) / rowHeight));
  for (const m of markers) {
    const x = Math.round(u.valToPos(m.x, 'x', true));
    if (!(x >= left && x <= left + width)) continue;
    ctx.strokeStyle = attemptColor(m.attempt);
    ctx.lineWidth = px;
    ctx.setLineDash([4 * px, 3 * px]);
    ctx.beginPath();
    ctx.moveTo(x + 0.5, top);
    ctx.lineTo(x + 0.5, top + height);
    ctx.stroke();
    const label = `attempt ${m.attempt}`;
    const tw = ctx.measureText(label).width;
    // Right of the line, or left of it near the right edge.
    const tx = x + 4 * px + tw <= left + width ? x + 4 * px : x - 4 * px - tw;
    const box = { x0: tx - 2 * px, x1: tx + tw + 2 * px };
    box.row = labelRow(placed, box, rows);
    placed.push(box);
    const ty = top + 2 * px + box.row * rowHeight;
    ctx.fillStyle = 'rgba(255,255,255,0.85)';
    ctx.fillRect(box.x0, ty, box.x1 - box.x0, 14 * px);
    ctx.fillStyle = attemptColor(m.attempt);
    ctx.fillText(label, tx, ty + px);
  }
  ctx.restore();
  // The e2e tests read where each name went.
  u.root.dataset.markerLabels = JSON.stringify(placed.map((b) => ({ x0: Math.round(b.x0), x1: Math.round(b.x1), row: b.row })));
}

// The first row (0 at the top) where `box` overlaps no label placed there;
// with every row taken, the row of the fewest.
export function labelRow(placed, box, rows) {
  const counts = new Array(rows).fill(0);
  for (let row = 0; row < rows; row++) {
    const clash = placed.filter((p) => p.row === row && p.x0 < box.x1 && box.x0 < p.x1);
    if (!clash.length) return row;
    counts[row] = clash.length;
  }
  return counts.indexOf(Math.min(...counts));
}
