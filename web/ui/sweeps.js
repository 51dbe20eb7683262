// Pure helpers of the sweep view (views/sweep.js), tested in
// tests/e2e/format.test.mjs without a browser.

// The trials sorted by their objective, best first (goal 'min' or 'max');
// trials without one last, by index.
export function sortTrials(trials, goal) {
  const better = goal === 'max' ? (a, b) => b - a : (a, b) => a - b;
  return [...trials].sort((a, b) => {
    const x = typeof a.objective === 'number';
    const y = typeof b.objective === 'number';
    if (x !== y) return x ? -1 : 1;
    if (!x) return a.index - b.index;
    return better(a.objective, b.objective) || a.index - b.index;
  });
}

// The parameter names of every trial, in order of first appearance.
export function paramNames(trials) {
  const names = [];
  for (const t of trials) for (const n of Object.keys(t.params || {})) if (!names.includes(n)) names.push(n);
  return names;
}

// Curves of several trials on one x axis, for uPlot: {x: [steps...],
// ys: [[value or null per x] per curve]}. Each curve is {step: [...],
// value: [...]}; a later point of the same step replaces an earlier one (a
// restart from a checkpoint), as the service reads a trial's curve.
export function overlayCurves(curves) {
  const perCurve = curves.map((c) => {
    const m = new Map();
    (c.step || []).forEach((s, i) => m.set(s, c.value[i]));
    return m;
  });
  const x = [...new Set(perCurve.flatMap((m) => [...m.keys()]))].sort((a, b) => a - b);
  const ys = perCurve.map((m) => x.map((s) => (m.has(s) ? m.get(s) : null)));
  return { x, ys };
}

export function sweepHref(id) {
  return `#/sweeps/${encodeURIComponent(id)}`;
}
