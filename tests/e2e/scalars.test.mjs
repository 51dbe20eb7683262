// Unit tests of the training charts' pure helpers (web/ui/scalars.js): no
// browser.  node --test tests/e2e/scalars.test.mjs
import assert from 'node:assert/strict';
process.env.TZ = 'UTC'; // formatClock writes local time
import { test } from 'node:test';
import {
  MAX_CHARTS,
  alignByAttempt,
  attemptStarts,
  chooseTags,
  formatClock,
  formatScalar,
  formatTick,
  forLogScale,
  logTicks,
  metricsPath,
  pointsOfAligned,
  timeTicks,
  xRange,
} from '../../web/ui/scalars.js';

test('one line per attempt over the union of steps: overlaps kept apart, gaps where not finite', () => {
  // Attempt 1 reached step 5; attempt 2 resumed from the checkpoint at 3.
  const step = [0, 1, 2, 3, 4, 5, 3, 4, 5, 6];
  const value = [0.9, 0.8, null, 0.6, 0.5, 0.45, 0.62, 0.51, 0.44, 0.4];
  const attempt = [1, 1, 1, 1, 1, 1, 2, 2, 2, 2];
  const a = alignByAttempt(step, value, attempt);
  assert.deepEqual(a.x, [0, 1, 2, 3, 4, 5, 6], 'x ascending and distinct, as uPlot needs');
  assert.deepEqual(a.attempts, [1, 2]);
  assert.deepEqual(a.ys[0], [0.9, 0.8, null, 0.6, 0.5, 0.45, undefined]);
  assert.deepEqual(a.ys[1], [undefined, undefined, undefined, 0.62, 0.51, 0.44, 0.4]);
  // null (a gap, drawn as one) and undefined (no point: spanned) stay apart.
  assert.equal(a.ys[0][2], null);
  assert.equal(a.ys[1][2], undefined);
  // Back to the API's points, nothing lost or invented.
  assert.deepEqual(
    pointsOfAligned(a),
    step.map((x, i) => ({ x, y: value[i], attempt: attempt[i] })),
  );
  // NaN and infinities (should a client send them) are gaps too.
  assert.deepEqual(alignByAttempt([1, 2, 3], [NaN, Infinity, 1], [1, 1, 1]).ys, [[null, null, 1]]);
  assert.deepEqual(alignByAttempt([], [], []), { x: [], attempts: [], ys: [] });
});

test('restarts are marked at the first step of each attempt after the first', () => {
  assert.deepEqual(attemptStarts([0, 1, 2, 3, 4, 5], [1, 1, 1, 1, 1, 1]), []);
  assert.deepEqual(attemptStarts([0, 5, 10, 8, 12, 20, 30], [1, 1, 1, 2, 2, 3, 3]), [
    { attempt: 2, x: 8 },
    { attempt: 3, x: 20 },
  ]);
  // An attempt with no scalar (it failed before its first) leaves no marker;
  // wall times work the same way.
  assert.deepEqual(attemptStarts([100.5, 101.5, 160.25], [1, 1, 3]), [{ attempt: 3, x: 160.25 }]);
});

test('scalars read at a glance, and a diverged value says so', () => {
  assert.equal(formatScalar(0.123456), '0.1235');
  assert.equal(formatScalar(0.12), '0.12');
  assert.equal(formatScalar(1.5), '1.5');
  assert.equal(formatScalar(-2.25), '-2.25');
  assert.equal(formatScalar(42), '42');
  assert.equal(formatScalar(999.99), '1000');
  assert.equal(formatScalar(12345.678), '12345.7');
  assert.equal(formatScalar(0.00001234), '1.234e-5');
  assert.equal(formatScalar(3e9), '3e+9');
  assert.equal(formatScalar(0), '0');
  assert.equal(formatScalar(null), 'not finite');
  assert.equal(formatScalar(NaN), 'not finite');
  assert.equal(formatTick(0), '0');
  assert.equal(formatTick(0.25), '0.25');
  assert.equal(formatTick(1500), '1.5k');
  assert.equal(formatTick(35000000), '35M');
  assert.equal(formatTick(0.0002), '2e-4');
  assert.equal(formatTick(null), '');
  // With the distance between ticks: as many decimals as it has.
  assert.deepEqual([1.98, 1.985, 1.99, 1.995].map((v) => formatTick(v, 0.005)), ['1.98', '1.985', '1.99', '1.995']);
  assert.deepEqual([0, 2.5, 5, 7.5].map((v) => formatTick(v, 2.5)), ['0', '2.5', '5', '7.5']);
  assert.deepEqual([0.1 * 3, 0.4].map((v) => formatTick(v, 0.1)), ['0.3', '0.4']);
  assert.deepEqual([1000, 1500, 2000].map((v) => formatTick(v, 500)), ['1k', '1.5k', '2k']);
  assert.deepEqual([1250, 1500].map((v) => formatTick(v, 250)), ['1.25k', '1.5k']);
  assert.equal(formatTick(20, 10), '20');
  // 2025-11-25 19:47:09.5 UTC
  assert.equal(formatClock(1764100029.5), '19:47');
  assert.equal(formatClock(1764100029.5, { seconds: true }), '19:47:09');
  assert.equal(formatClock(1764100029.5, { date: true }), '11-25 19:47');
  assert.equal(formatClock(null), '');
});

test('many tags: a filter, and at most MAX_CHARTS charts unless all are asked for', () => {
  const tags = Array.from({ length: 30 }, (_, i) => (i % 2 ? `eval/acc_${i}` : `train/loss_${i}`));
  const first = chooseTags(tags);
  assert.equal(first.matching.length, 30);
  assert.deepEqual(first.charted, tags.slice(0, MAX_CHARTS));
  assert.equal(first.hidden, 30 - MAX_CHARTS);
  assert.equal(chooseTags(tags, '', { all: true }).charted.length, 30);
  const evals = chooseTags(tags, '  EVAL/ ');
  assert.equal(evals.matching.length, 15);
  assert.ok(evals.matching.every((t) => t.startsWith('eval/')));
  assert.equal(evals.charted.length, MAX_CHARTS);
  assert.deepEqual(chooseTags(tags, 'loss_2'), { matching: ['train/loss_2', 'train/loss_20', 'train/loss_22', 'train/loss_24', 'train/loss_26', 'train/loss_28'], charted: ['train/loss_2', 'train/loss_20', 'train/loss_22', 'train/loss_24', 'train/loss_26', 'train/loss_28'], hidden: 0 });
  assert.deepEqual(chooseTags(tags, 'nothing'), { matching: [], charted: [], hidden: 0 });
  assert.equal(metricsPath('a b'), '/experiments/a%20b/metrics');
});

test('a single point gets a sensible x range: a minute around a time, a step either side of a step', () => {
  const t = 1764100029.5;
  assert.deepEqual(xRange(t, t, { time: true }), [t - 30, t + 30]);
  assert.deepEqual(xRange(7, 7), [6, 8]);
  // Real ranges are left as they are.
  assert.deepEqual(xRange(t, t + 5, { time: true }), [t, t + 5]);
  assert.deepEqual(xRange(0, 100), [0, 100]);
});

test('time ticks: the clock, with the date on the first tick and where the day changes; never one label twice', () => {
  // 2025-11-25 23:59:00 UTC and the minutes after it.
  const t0 = 1764115140;
  assert.deepEqual(timeTicks([t0, t0 + 30, t0 + 60], 30), ['23:59:00\n2025-11-25', '23:59:30', '00:00:00\n2025-11-26']);
  assert.deepEqual(timeTicks([t0 + 60, t0 + 120], 60), ['00:00\n2025-11-26', '00:01']);
  // Ticks days, months or years apart say the date itself.
  assert.deepEqual(timeTicks([t0 + 60, t0 + 60 + 86400], 86400), ['11-26', '11-27']);
  assert.deepEqual(timeTicks([Date.UTC(2025, 0, 1) / 1000, Date.UTC(2025, 1, 1) / 1000], 31 * 86400), ['2025-01', '2025-02']);
  // What the quickstart showed on a single point: 1 January of three years,
  // each "01-01 00:00". Years apart, the year is the label.
  const years = [1970, 2000, 2030].map((y) => Date.UTC(y, 0, 1) / 1000);
  const labels = timeTicks(years, 30 * 365 * 86400);
  assert.deepEqual(labels, ['1970', '2000', '2030']);
  assert.equal(new Set(labels).size, labels.length);
});

test('a log scale draws only values above 0: the others are gaps, and counted', () => {
  const r = forLogScale([[1, 0, -2, null, undefined, 0.5], [undefined, 3]]);
  assert.deepEqual(r.ys, [[1, null, null, null, undefined, 0.5], [undefined, 3]]);
  assert.equal(r.hidden, 2, '0 and -2; not the null (not finite) nor the missing point');
  assert.equal(r.positive, 3);
  assert.deepEqual(forLogScale([[0, -1]]).positive, 0);
  // Labels at 1, 2 and 5 times a power of ten only.
  assert.deepEqual(logTicks([0.01, 0.02, 0.03, 0.05, 0.07, 0.1, 0.2, 1, 3, 10]), ['0.01', '0.02', '', '0.05', '', '0.1', '0.2', '1', '', '10']);
  assert.deepEqual(logTicks([0, -1]), ['', '']);
});
