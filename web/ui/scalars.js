// Pure helpers for the training scalars (GET /experiments/{id}/metrics): no
// DOM, no fetch, so node's test runner imports them (tests/e2e/format.test.mjs).
//
// The service sends each tag's points as columns sorted by (attempt, step).
// A restarted attempt resumes from its checkpoint, so its steps overlap the
// end of the attempt before it: one line per attempt, over the union of the
// steps, is what uPlot can draw (its x values must be ascending).

// How many charts the Training section draws before "show all": each is a
// canvas and a uPlot instance, and a page of 100 is slow to scroll.
export const MAX_CHARTS = 12;

// Columns {x, y, attempt} (one entry per point, sorted by attempt then x) to
// uPlot's aligned data: {x, attempts, ys} with x the sorted distinct values,
// attempts the attempt numbers in order and ys[k][i] attempt k's value at
// x[i]: a number; null where the reported value was not finite (NaN or inf:
// the service sends null), which uPlot draws as a gap; undefined where that
// attempt has no point, which uPlot spans (the line of one attempt is not cut
// by another attempt's steps).
export function alignByAttempt(xs, ys, attempts) {
  const n = Math.min(xs.length, ys.length, attempts.length);
  const order = [...new Set(attempts.slice(0, n))].sort((a, b) => a - b);
  const x = [...new Set(xs.slice(0, n))].sort((a, b) => a - b);
  const at = new Map(x.map((v, i) => [v, i]));
  const column = new Map(order.map((a) => [a, new Array(x.length).fill(undefined)]));
  for (let i = 0; i < n; i++) {
    const v = ys[i];
    // A later point at the same (attempt, x) replaces an earlier one.
    column.get(attempts[i])[at.get(xs[i])] = typeof v === 'number' && Number.isFinite(v) ? v : null;
  }
  return { x, attempts: order, ys: order.map((a) => column.get(a)) };
}

// Back from aligned data to points [{x, y, attempt}], sorted by (attempt, x):
// what the chart holds, in the API's shape (the e2e tests compare the two).
export function pointsOfAligned({ x, attempts, ys }) {
  const out = [];
  attempts.forEach((a, k) => {
    ys[k].forEach((y, i) => {
      if (y !== undefined) out.push({ x: x[i], y, attempt: a });
    });
  });
  return out;
}

// Where each attempt after the first begins: [{attempt, x}]. x is where the
// attempt started as the service knows it, `known` (attempt -> x: the
// checkpoint step it resumed from, or its start time), else the smallest x
// of that attempt (its first reported step, or first wall time): a program
// that logs every 10 steps and resumed from step 300 first reports 310.
// Drawn as a line labelled "attempt N" on the chart.
export function attemptStarts(xs, attempts, known = new Map()) {
  const first = new Map();
  for (let i = 0; i < Math.min(xs.length, attempts.length); i++) {
    const a = attempts[i];
    if (!first.has(a) || xs[i] < first.get(a)) first.set(a, xs[i]);
  }
  const order = [...first.keys()].sort((a, b) => a - b);
  return order.slice(1).map((attempt) => {
    const at = known.get(attempt);
    return { attempt, x: typeof at === 'number' && Number.isFinite(at) ? at : first.get(attempt) };
  });
}

// The attempts' starts as the experiment's page has them (GET
// /experiments/{id}'s attempts): {steps: attempt -> the checkpoint step it
// started from, times: attempt -> when its job ran it, in Unix seconds}.
// An attempt that found no checkpoint has no step here.
export function attemptStartsOf(attempts) {
  const steps = new Map();
  const times = new Map();
  for (const a of attempts || []) {
    if (typeof a.start_step === 'number') steps.set(a.number, a.start_step);
    const t = a.started_at ? Date.parse(a.started_at) : NaN;
    if (Number.isFinite(t)) times.set(a.number, t / 1000);
  }
  return { steps, times };
}

// A scalar for people: at most 4 significant digits, exponent form for the
// very small and the very large. null (the service's NaN or inf) is "not
// finite": a diverged loss must not read as 0 or as an empty cell.
//   0.123456 -> "0.1235", 1.5 -> "1.5", 12345.67 -> "12345.7",
//   0.00001234 -> "1.234e-5", 3e9 -> "3e+9", null -> "not finite"
export function formatScalar(v) {
  if (v === null || v === undefined || (typeof v === 'number' && !Number.isFinite(v))) return 'not finite';
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e6 || a < 1e-3) {
    const [mantissa, exp] = v.toExponential(3).split('e');
    return `${String(Number(mantissa))}e${exp}`;
  }
  if (a >= 1000) return String(Number(v.toFixed(1)));
  return String(Number(v.toPrecision(4)));
}

// An axis tick: shorter than formatScalar ("1.2k", "35M"), same exponents.
// With `incr`, the distance between ticks, as many decimals as it has, so
// that neighbours never read the same (1.985 and 1.99, not 1.99 twice).
export function formatTick(v, incr = 0) {
  if (v === null || v === undefined || !Number.isFinite(v)) return '';
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e9 || a < 1e-3) return formatScalar(v);
  const [div, suffix] = a >= 1e6 ? [1e6, 'M'] : a >= 1e3 ? [1e3, 'k'] : [1, ''];
  const x = v / div;
  if (!(incr > 0)) return `${String(Number(x.toPrecision(3)))}${suffix}`;
  const decimals = (String(Number((incr / div).toPrecision(6))).split('.')[1] ?? '').length;
  return `${String(Number(x.toFixed(Math.min(decimals, 9))))}${suffix}`;
}

// A wall time (seconds since the epoch) in local time, 24-hour: "14:05",
// "14:05:09" with seconds, "11-25 14:05" with the date.
export function formatClock(t, { seconds = false, date = false } = {}) {
  if (t === null || t === undefined || !Number.isFinite(t)) return '';
  const d = new Date(t * 1000);
  const p = (n) => String(n).padStart(2, '0');
  const hm = `${p(d.getHours())}:${p(d.getMinutes())}${seconds ? `:${p(d.getSeconds())}` : ''}`;
  return date ? `${p(d.getMonth() + 1)}-${p(d.getDate())} ${hm}` : hm;
}

// The x range a chart draws for data from `min` to `max`. A single x (one
// point: the first steps-per-second value, or a program's first step)
// gives uPlot an empty range, which it widens by orders of magnitude: a
// time axis then spans years, its ticks each 1 January at 00:00. Instead:
// a minute around a single time, a step either side of a single step.
export function xRange(min, max, { time = false } = {}) {
  if (!Number.isFinite(min) || !Number.isFinite(max)) return [min, max];
  if (min < max) return [min, max];
  const pad = time ? 30 : 1;
  return [min - pad, max + pad];
}

// Labels for a time axis's ticks (seconds since the epoch, in local time),
// spaced `incr` seconds apart: the clock for ticks under a day apart, with
// the date ("2026-11-25", on a second line) on the first tick and wherever
// the day changes; "11-25" for ticks days apart, "2026-11" months apart,
// "2026" years apart. Never the same label twice for ticks `incr` apart.
export function timeTicks(splits, incr) {
  const p = (n) => String(n).padStart(2, '0');
  let lastDay = null;
  return splits.map((t) => {
    if (!Number.isFinite(t)) return '';
    const d = new Date(t * 1000);
    const day = `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}`;
    if (incr >= 365 * 86400) return String(d.getFullYear());
    if (incr >= 28 * 86400) return `${d.getFullYear()}-${p(d.getMonth() + 1)}`;
    if (incr >= 86400) return `${p(d.getMonth() + 1)}-${p(d.getDate())}`;
    const clock = formatClock(t, { seconds: incr < 60 });
    const withDay = day !== lastDay ? `${clock}\n${day}` : clock;
    lastDay = day;
    return withDay;
  });
}

// A series for a log scale, which cannot draw 0 or a negative value: those
// become gaps (null), counted in `hidden`; undefined (no point) stays.
//   -> {ys, hidden, positive}: positive counts the points it can draw.
export function forLogScale(ys) {
  let hidden = 0;
  let positive = 0;
  const out = ys.map((col) =>
    col.map((v) => {
      if (typeof v !== 'number') return v;
      if (v > 0) {
        positive++;
        return v;
      }
      hidden++;
      return null;
    }),
  );
  return { ys: out, hidden, positive };
}

// On a log axis uPlot puts a tick at 1..9 times each power of ten; only 1,
// 2 and 5 times get a label, so that they do not run into each other.
export function logTicks(splits) {
  return splits.map((v) => {
    if (!(v > 0)) return '';
    const mantissa = Math.round((v / 10 ** Math.floor(Math.log10(v) + 1e-9)) * 1000) / 1000;
    return [1, 2, 5].includes(mantissa) ? formatTick(v) : '';
  });
}

// Tags whose name contains `query` (case-insensitive; blank: all), and of
// those the ones charted: the first MAX_CHARTS unless `all`.
//   -> {matching: [tag names], charted: [tag names], hidden: count}
export function chooseTags(tags, query = '', { all = false, max = MAX_CHARTS } = {}) {
  const q = query.trim().toLowerCase();
  const matching = tags.filter((t) => !q || t.toLowerCase().includes(q));
  const charted = all ? matching : matching.slice(0, max);
  return { matching, charted, hidden: matching.length - charted.length };
}

// GET /experiments/{id}/metrics's path.
export function metricsPath(id) {
  return `/experiments/${encodeURIComponent(id)}/metrics`;
}
