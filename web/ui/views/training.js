// The experiment page's "Training" section: the training scalars the
// reporting task's agent sends (TensorBoard event files under MODEL_DIR, or
// lines of $TFSLURM_SCALARS_FILE), from GET /experiments/{id}/metrics.
//
// One small chart per tag (value against step, a line per attempt, restarts
// marked), one of steps per second against wall time, then the latest value
// of every tag as a table (the text alternative to the canvases) and the
// TensorBoard command. Refreshed on the page's polling loop while the
// experiment is open; once it has ended, until an answer repeats itself.
import { getJson } from '../api.js';
import { fill, h, renderIfChanged } from '../dom.js';
import { isOpen, zoneOf } from '../format.js';
import { MAX_CHARTS, alignByAttempt, attemptStarts, attemptStartsOf, chooseTags, forLogScale, formatClock, formatScalar, metricsPath } from '../scalars.js';
import { emptyRow } from '../widgets.js';
import { Chart, attemptColor, loadUPlot } from './charts.js';

// Where a user reads how to report scalars (shown as text: tfslurmd does not
// serve the docs).
const DOCS_REF = 'docs/scalars.md';
// A large answer (many tags of up to 1000 points each) is not fetched on
// every 1.5 s poll: above this many points, at most every SLOW_MS.
const LARGE_POINTS = 20000;
const SLOW_MS = 10000;
const FILTER_FROM_TAGS = 5; // the filter box shows from this many tags on

// The charts drawn on a log scale, by key ('tag:NAME' or 'rate'), kept in
// the browser for every experiment: a loss wanted on a log scale once is
// wanted so for the next run too.
const LOG_STORAGE_KEY = 'tfslurm.logScaleCharts';
const LOG_KEYS_KEPT = 200;
function loadLogKeys() {
  try {
    const v = JSON.parse(localStorage.getItem(LOG_STORAGE_KEY) || '[]');
    return new Set(Array.isArray(v) ? v.filter((k) => typeof k === 'string') : []);
  } catch {
    return new Set(); // storage disabled, or a value we did not write
  }
}
function saveLogKeys(keys) {
  try {
    localStorage.setItem(LOG_STORAGE_KEY, JSON.stringify([...keys].slice(-LOG_KEYS_KEPT)));
  } catch {
    // Storage disabled or full: the choice lasts as long as the page.
  }
}

export class TrainingSection {
  constructor(id) {
    this.path = metricsPath(id);
    this.query = '';
    this.showAll = false;
    this.charts = new Map(); // key ('tag:NAME' or 'rate') -> {figure, chart, data}
    this.lastText = null; // the last answer, to skip unchanged ones
    this.lastFetchAt = 0;
    this.slow = false;
    this.settled = false; // ended, and an answer since then repeated the one before
    this.metrics = null;
    this.logKeys = loadLogKeys();
    this.resizer = new ResizeObserver(() => this.charts.forEach((c) => c.chart?.resize()));
  }

  element() {
    this.summary = h('span', { class: 'count' });
    this.filterInput = h('input', {
      type: 'search',
      id: 'tag-filter',
      placeholder: 'filter tags',
      'aria-label': 'Filter tags',
      'data-testid': 'tag-filter',
      oninput: () => {
        this.query = this.filterInput.value;
        this.render();
      },
    });
    this.filterBox = h('label', { class: 'tag-filter', hidden: true }, this.filterInput);
    this.status = h('div', { 'data-testid': 'training-status' });
    this.grid = h('div', { class: 'charts', 'data-testid': 'charts' });
    this.more = h('div', { class: 'charts-more', 'aria-live': 'polite' });
    this.tableBody = h('tbody');
    this.table = h(
      'div',
      { class: 'table-wrap', hidden: true },
      h(
        'table',
        { class: 'responsive scalars-table', 'data-testid': 'scalars-latest' },
        h('caption', { class: 'sr-only' }, 'Latest value of each training scalar'),
        h(
          'thead',
          null,
          h('tr', null, h('th', null, 'Tag'), h('th', { class: 'num' }, 'Step'), h('th', { class: 'num' }, 'Value'), h('th', { class: 'num' }, 'Attempt'), h('th', { class: 'num' }, 'Points')),
        ),
        this.tableBody,
      ),
    );
    this.tensorboard = h('div', { class: 'tensorboard', 'data-testid': 'tensorboard' });
    this.resizer.observe(this.grid);
    return h(
      'section',
      { class: 'card training', 'aria-labelledby': 'training-title', 'data-testid': 'training' },
      h('div', { class: 'card-head' }, h('h2', { id: 'training-title' }, 'Training'), this.summary, this.filterBox),
      this.status,
      this.grid,
      this.more,
      this.table,
      this.tensorboard,
    );
  }

  // Called on every poll of the experiment page; never throws (the page's
  // other parts go on when the scalars cannot be read).
  async refresh(exp) {
    const now = Date.now();
    this.starts = attemptStartsOf(exp.attempts);
    const open = isOpen(exp.state);
    if (open) this.settled = false;
    else if (this.settled) return;
    if (this.slow && now - this.lastFetchAt < SLOW_MS) return;
    this.lastFetchAt = now;
    let metrics;
    try {
      metrics = await getJson(this.path);
    } catch (e) {
      if (this.disposed) return;
      this.lastText = null; // the next answer replaces this notice, even if unchanged
      const why =
        e.status === 404 && !/experiment/i.test(e.message)
          ? 'this tfslurmd has no GET /experiments/{id}/metrics (an older version?)'
          : e.message;
      renderIfChanged(this.status, ['error', why], () =>
        h('div', { class: 'notice notice-warn', role: 'status' }, h('strong', null, '⚠ Training scalars not loaded: '), why),
      );
      return;
    }
    if (this.disposed) return;
    const text = JSON.stringify(metrics);
    if (!open && text === this.lastText) this.settled = true;
    if (text === this.lastText) return;
    this.lastText = text;
    this.metrics = metrics;
    this.slow = metrics.series.reduce((n, s) => n + s.step.length, 0) > LARGE_POINTS;
    await this.render();
  }

  async render() {
    const m = this.metrics;
    if (!m) return;
    const tags = m.tags.map((t) => t.tag);
    const attempts = new Set(m.tags.map((t) => t.last?.attempt).filter(Boolean));
    this.summary.textContent = tags.length
      ? `${tags.length} tag${tags.length === 1 ? '' : 's'}${attempts.size ? ` · latest from attempt ${Math.max(...attempts)}` : ''}`
      : '';
    this.filterBox.hidden = tags.length < FILTER_FROM_TAGS;
    renderIfChanged(this.tensorboard, m.tensorboard, () => tensorboardLine(m.tensorboard));
    if (!tags.length) {
      renderIfChanged(this.status, ['empty'], () => emptyState());
      this.table.hidden = true;
      this.syncCharts([]);
      fill(this.more);
      return;
    }
    renderIfChanged(this.status, [], () => []);
    const choice = chooseTags(tags, this.query, { all: this.showAll });
    this.table.hidden = false;
    const byTag = new Map(m.tags.map((t) => [t.tag, t]));
    renderIfChanged(this.tableBody, [choice.matching, m.tags], () =>
      choice.matching.length ? choice.matching.map((t) => latestRow(byTag.get(t))) : emptyRow(5, `No tag contains "${this.query}".`),
    );
    this.renderMore(choice, tags.length);

    const series = new Map(m.series.map((s) => [s.tag, s]));
    const wanted = [];
    if (m.steps_per_second && m.steps_per_second.wall_time.length) {
      const r = m.steps_per_second;
      wanted.push({
        key: 'rate',
        title: 'steps per second',
        note: `from ${r.tag}, by wall time (${zoneOf(new Date())})`,
        spec: {
          aligned: alignByAttempt(r.wall_time, r.value, r.attempt),
          markers: attemptStarts(r.wall_time, r.attempt, this.starts?.times),
          time: true,
          xLabel: 'time',
          yLabel: 'steps/s',
        },
      });
    }
    for (const tag of choice.charted) {
      const s = series.get(tag);
      const t = byTag.get(tag);
      if (!s) continue;
      wanted.push({
        key: `tag:${tag}`,
        tag,
        title: tag,
        note: t && t.reported > s.step.length ? `${s.step.length} of ${t.reported} points` : `${s.step.length} point${s.step.length === 1 ? '' : 's'}`,
        spec: {
          aligned: alignByAttempt(s.step, s.value, s.attempt),
          markers: attemptStarts(s.step, s.attempt, this.starts?.steps),
          time: false,
          xLabel: 'step',
          yLabel: 'value',
        },
      });
    }
    await this.syncCharts(wanted);
  }

  renderMore(choice, total) {
    if (!choice.hidden && !this.showAll) {
      fill(this.more);
      return;
    }
    const toggle = () => {
      this.showAll = !this.showAll;
      this.render();
    };
    fill(
      this.more,
      h(
        'span',
        { class: 'muted' },
        this.showAll
          ? `Charting all ${choice.matching.length} tags${choice.matching.length < total ? ' that match' : ''}. `
          : `Charting ${choice.charted.length} of ${choice.matching.length} tags${choice.matching.length < total ? ' that match' : ''}; every tag is in the table below. `,
      ),
      choice.matching.length > MAX_CHARTS || this.showAll
        ? h('button', { class: 'btn btn-small', 'data-testid': 'show-all', onclick: toggle }, this.showAll ? `Chart the first ${MAX_CHARTS} only` : `Chart all ${choice.matching.length}`)
        : null,
    );
  }

  // Makes the grid hold exactly `wanted`'s charts, in order: a chart that
  // stays gets setData() only if its data changed; new ones are created,
  // gone ones destroyed.
  async syncCharts(wanted) {
    // Everything after this await is synchronous, so two renders in flight
    // (a poll and a keystroke in the filter) apply one after the other.
    const uPlot = wanted.length ? await loadUPlot() : null;
    if (this.disposed) return;
    const keep = new Set(wanted.map((w) => w.key));
    for (const [key, c] of this.charts) {
      if (!keep.has(key)) {
        c.chart?.destroy();
        c.figure.remove();
        this.charts.delete(key);
      }
    }
    let prev = null;
    for (const w of wanted) {
      let c = this.charts.get(w.key);
      // A log scale draws only values above 0; with none, the chart stays linear.
      const logWanted = this.logKeys.has(w.key);
      const { hidden, positive } = forLogScale(w.spec.aligned.ys);
      w.spec.log = logWanted && positive > 0;
      const data = JSON.stringify(w.spec);
      if (!c) {
        const key = w.key;
        const toggle = h('input', {
          type: 'checkbox',
          'data-testid': 'log-toggle',
          onchange: () => this.setLog(key, toggle.checked),
        });
        const figure = h(
          'figure',
          { class: 'chart', 'data-key': w.key, 'data-tag': w.tag ?? null, 'data-testid': w.key === 'rate' ? 'rate-chart' : 'chart' },
          h(
            'figcaption',
            null,
            h('span', { class: 'chart-title' }, w.title),
            ' ',
            h('span', { class: 'chart-note muted small' }, w.note),
            h('label', { class: 'chart-log small', title: 'Draw the values on a logarithmic scale (remembered for this chart in this browser)' }, toggle, ' log scale'),
          ),
        );
        figure.setAttribute('aria-label', `${w.title}: chart, ${w.key === 'rate' ? 'steps per second against time' : 'value against step'}`);
        c = { figure, toggle, chart: null, data: null };
        this.charts.set(w.key, c);
      }
      c.toggle.checked = logWanted;
      c.figure.dataset.log = String(w.spec.log);
      renderLogNote(c.figure, logWanted, w.spec.log, hidden);
      // In order: after the previous chart (a tag that came back goes back
      // to its place).
      const want = prev ? prev.nextSibling : this.grid.firstChild;
      if (want !== c.figure) this.grid.insertBefore(c.figure, want);
      prev = c.figure;
      c.figure.querySelector('.chart-note').textContent = w.note;
      if (c.data !== data) {
        if (c.chart) c.chart.update(w.spec);
        else c.chart = new Chart(uPlot, c.figure, w.spec);
        c.data = data;
        renderRestarts(c.figure, w.spec);
      }
    }
  }

  setLog(key, on) {
    if (on) this.logKeys.add(key);
    else this.logKeys.delete(key);
    saveLogKeys(this.logKeys);
    this.render();
  }

  dispose() {
    this.disposed = true;
    this.resizer.disconnect();
    for (const c of this.charts.values()) c.chart?.destroy();
    this.charts.clear();
  }
}

// Under a chart on a log scale, what it cannot draw: values at or below 0
// (gaps in the line), or, with nothing above 0, that it stays linear.
function renderLogNote(figure, wanted, drawn, hidden) {
  const text = !wanted
    ? ''
    : !drawn
      ? 'No value above 0: drawn on a linear scale.'
      : hidden
        ? `${hidden} value${hidden === 1 ? '' : 's'} at or below 0 not drawn on the log scale.`
        : '';
  let p = figure.querySelector('.chart-lognote');
  if (!text) {
    p?.remove();
    return;
  }
  if (!p) {
    p = h('p', { class: 'chart-lognote small muted', 'data-testid': 'log-note' });
    figure.querySelector('figcaption').after(p);
  }
  p.textContent = text;
}

// Under a chart, its restarts in words: "↻ attempt 2 from step 40".
function renderRestarts(figure, spec) {
  figure.dataset.markers = JSON.stringify(spec.markers); // for the e2e tests
  let p = figure.querySelector('.chart-restarts');
  if (!spec.markers.length) {
    p?.remove();
    return;
  }
  if (!p) {
    p = h('p', { class: 'chart-restarts small' });
    figure.append(p);
  }
  const where = (x) => (spec.time ? formatClock(x, { seconds: true }) : `step ${x}`);
  fill(
    p,
    spec.markers.map((m, i) => [
      i ? ', ' : '',
      h('span', { class: 'swatch', 'data-attempt': m.attempt }, '↻'),
      ` attempt ${m.attempt} from ${where(m.x)}`,
    ]),
  );
  p.querySelectorAll('.swatch').forEach((s) => (s.style.color = attemptColor(Number(s.dataset.attempt))));
}

function latestRow(t) {
  const last = t.last;
  const bad = last && last.value === null;
  return h(
    'tr',
    { 'data-tag': t.tag, class: bad ? 'tone-row-bad' : null },
    h('td', { 'data-label': 'Tag', class: 'mono wrap' }, t.tag),
    h('td', { 'data-label': 'Step', class: 'num' }, last ? last.step : '—'),
    h('td', { 'data-label': 'Value', class: bad ? 'num exit-bad' : 'num', title: last && last.value !== null ? String(last.value) : null }, last ? `${bad ? '✗ ' : ''}${formatScalar(last.value)}` : '—'),
    h('td', { 'data-label': 'Attempt', class: 'num' }, last ? last.attempt : '—'),
    h('td', { 'data-label': 'Points', class: 'num', title: 'points kept / reported' }, t.points === t.reported ? t.points : `${t.points} / ${t.reported}`),
  );
}

function emptyState() {
  return h(
    'p',
    { class: 'muted training-empty', 'data-testid': 'training-empty' },
    'No training scalars yet: tfslurm reads TensorBoard event files under ',
    h('code', null, 'MODEL_DIR'),
    ', or lines of ',
    h('code', null, '$TFSLURM_SCALARS_FILE'),
    ' (one JSON object a line: ',
    h('code', null, '{"step": 3, "loss": 0.5}'),
    '). How: ',
    h('span', { class: 'mono' }, DOCS_REF),
    ' in the tfslurm sources.',
  );
}

function tensorboardLine(tb) {
  if (!tb) return [];
  const code = h('code', { class: 'tb-command', 'data-testid': 'tb-command' }, tb.command);
  const said = h('span', { class: 'small muted', role: 'status' });
  const copy = async () => {
    let ok = false;
    try {
      await navigator.clipboard.writeText(tb.command);
      ok = true;
    } catch {
      // No clipboard API (a page served over plain http from another host):
      // select the text, for Ctrl+C, and try the old way.
      const range = document.createRange();
      range.selectNodeContents(code);
      const sel = getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      try {
        ok = document.execCommand('copy');
      } catch {
        ok = false;
      }
    }
    said.textContent = ok ? '✓ copied' : 'selected: press Ctrl+C to copy';
    setTimeout(() => (said.textContent = ''), 4000);
  };
  return [
    h('span', { class: 'tb-label' }, 'TensorBoard '),
    code,
    ' ',
    h('button', { class: 'btn btn-small', type: 'button', onclick: copy, 'data-testid': 'tb-copy', title: 'Copy the command' }, 'copy'),
    ' ',
    said,
  ];
}
