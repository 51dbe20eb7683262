// A sweep's page: one chart overlaying every trial's objective curve
// (stopped trials greyed, the best drawn thick), and a table of the trials'
// parameters against the objective, best first, the best trial linked.
// Route: #/sweeps/ID
import { getJson } from '../api.js';
import { fill, h, renderIfChanged } from '../dom.js';
import { experimentHref } from '../format.js';
import { formatScalar, formatTick } from '../scalars.js';
import { overlayCurves, paramNames, sortTrials } from '../sweeps.js';
import { errorNotice, stateBadge } from '../widgets.js';
import { loadUPlot } from './charts.js';

// Okabe and Ito's palette for trials that run or ran to the end; grey for
// those stopped early.
const COLORS = ['#0072b2', '#d55e00', '#009e73', '#cc79a7', '#e69f00', '#56b4e9', '#000000'];
const STOPPED = '#b0b0b0';
const HEIGHT = 260;

export class SweepView {
  constructor(id) {
    this.id = id;
    this.curves = new Map(); // experiment id -> {step, value}; kept once a trial has ended
    this.chart = null;
    this.chartKey = '';
  }

  mount(root) {
    document.title = `${this.id} · sweep · tfslurm`;
    this.badge = h('span');
    this.summary = h('div', { class: 'facts', 'data-testid': 'sweep-summary' });
    this.error = h('div');
    this.figure = h('figure', { class: 'chart sweep-chart', 'data-testid': 'sweep-chart' });
    this.caption = h('figcaption');
    this.figure.append(this.caption);
    this.table = h('div', { class: 'table-wrap', 'data-testid': 'sweep-trials' });
    fill(
      root,
      h(
        'div',
        { class: 'page-head' },
        h('a', { href: '#/', class: 'back' }, '← All experiments'),
        h('div', { class: 'title-row' }, h('h1', { class: 'exp-id' }, `sweep ${this.id}`), this.badge),
      ),
      this.error,
      h('section', { class: 'card', 'aria-label': 'Summary' }, this.summary),
      h('section', { class: 'card', 'aria-label': 'Objective curves' }, this.figure),
      h('section', { class: 'card', 'aria-labelledby': 'trials-title' }, h('h2', { id: 'trials-title' }, 'Trials'), this.table),
    );
    this.onResize = () => this.chart && this.chart.setSize({ width: this.width(), height: HEIGHT });
    window.addEventListener('resize', this.onResize);
  }

  dispose() {
    window.removeEventListener('resize', this.onResize);
    if (this.chart) this.chart.destroy();
    this.chart = null;
  }

  width() {
    return Math.max(200, Math.floor(this.figure.clientWidth || 600));
  }

  async refresh() {
    let sweep;
    try {
      sweep = await getJson(`/sweeps/${encodeURIComponent(this.id)}`);
      fill(this.error);
    } catch (e) {
      // A missing token is the page banner's to say (app.js), once.
      fill(this.error, e.status === 401 ? [] : errorNotice(e));
      throw e;
    }
    const tag = sweep.objective?.tag || 'objective';
    await Promise.all(
      sweep.trials
        .filter((t) => t.state !== 'not_started' && !(t.state === 'ended' && this.curves.has(t.experiment_id)))
        .map(async (t) => {
          try {
            const m = await getJson(`/experiments/${encodeURIComponent(t.experiment_id)}/metrics?tag=${encodeURIComponent(tag)}`);
            const s = (m.series || []).find((x) => x.tag === tag);
            this.curves.set(t.experiment_id, s ? { step: s.step, value: s.value } : { step: [], value: [] });
          } catch {
            // A deleted trial has no curve; the table still shows it.
          }
        }),
    );
    fill(this.badge, stateBadge(sweep.state, { testid: 'sweep-state' }));
    renderIfChanged(this.summary, sweep, (s) => this.renderSummary(s, tag));
    renderIfChanged(this.table, sweep, (s) => this.renderTable(s, tag));
    await this.drawChart(sweep, tag);
  }

  renderSummary(s, tag) {
    const best = s.best_trial;
    return h(
      'dl',
      null,
      h('dt', null, 'State'),
      h('dd', null, s.reason),
      h('dt', null, 'Objective'),
      h('dd', null, `${tag}, ${s.objective?.goal}, at ${s.objective?.at}`),
      h('dt', null, 'Trials'),
      h('dd', null, `${s.trials.length} of ${s.trials_total} started; ${s.counts?.stopped_early ?? 0} stopped early`),
      h('dt', null, 'Node-hours'),
      h('dd', null, (s.node_seconds / 3600).toFixed(3)),
      h('dt', null, 'Best trial'),
      h(
        'dd',
        { 'data-testid': 'best-trial' },
        best
          ? [h('a', { href: experimentHref(best.experiment_id) }, best.experiment_id), ` · ${tag} ${formatScalar(best.objective)}`]
          : 'none yet',
      ),
    );
  }

  renderTable(s, tag) {
    const names = paramNames(s.trials);
    const bestIndex = s.best_trial?.index;
    const rows = sortTrials(s.trials, s.objective?.goal).map((t) =>
      h(
        'tr',
        { class: [t.index === bestIndex && 'best-trial', t.end_reason === 'stopped_early' && 'stopped'], 'data-trial': t.index },
        h('td', { 'data-label': 'Trial', class: 'trial-id' }, t.index === bestIndex ? '★ ' : '', h('a', { href: experimentHref(t.experiment_id) }, t.experiment_id)),
        h('td', { 'data-label': 'State' }, trialState(t)),
        ...names.map((n) => h('td', { class: 'num', 'data-label': n }, t.params?.[n] === undefined ? '' : String(t.params[n]))),
        h('td', { class: 'num', 'data-label': tag }, t.objective === null ? '—' : formatScalar(t.objective)),
        h('td', { class: 'num', 'data-label': 'Step' }, t.objective_step ?? '—'),
        h('td', { class: 'num', 'data-label': 'Last step', 'data-testid': 'last-step' }, t.last_step ?? '—'),
        h('td', { 'data-label': 'Note', class: 'small muted' }, t.note),
      ),
    );
    return h(
      'table',
      { class: 'responsive sweep-table' },
      h(
        'thead',
        null,
        h(
          'tr',
          null,
          h('th', null, 'Trial'),
          h('th', null, 'State'),
          ...names.map((n) => h('th', { class: 'num' }, n)),
          h('th', { class: 'num' }, tag),
          h('th', { class: 'num', title: 'The step of the objective\'s value (a stopped trial\'s rung)' }, 'Step'),
          h('th', { class: 'num', title: 'The last step the trial reported: where its programs stopped, once ended' }, 'Last step'),
          h('th', null, 'Note'),
        ),
      ),
      h('tbody', null, rows),
    );
  }

  async drawChart(s, tag) {
    const trials = s.trials.filter((t) => this.curves.has(t.experiment_id));
    const { x, ys } = overlayCurves(trials.map((t) => this.curves.get(t.experiment_id)));
    const key = trials.map((t) => `${t.experiment_id}:${t.end_reason}:${t.index === s.best_trial?.index}`).join(',');
    this.caption.textContent = `${tag} of every trial by step (grey: stopped early)`;
    const uPlot = await loadUPlot();
    const data = [x, ...ys];
    if (this.chart && key === this.chartKey) {
      this.chart.setData(data);
      return;
    }
    if (this.chart) this.chart.destroy();
    this.chartKey = key;
    const series = trials.map((t, i) => {
      const stopped = t.end_reason === 'stopped_early';
      const best = t.index === s.best_trial?.index;
      return {
        label: t.experiment_id,
        stroke: stopped ? STOPPED : COLORS[i % COLORS.length],
        width: best ? 3 : 1.5,
        dash: stopped ? [5, 4] : undefined,
        spanGaps: true,
        value: (u, v) => (v === null || v === undefined ? '—' : formatScalar(v)),
      };
    });
    this.chart = new uPlot(
      {
        width: this.width(),
        height: HEIGHT,
        scales: { x: { time: false } },
        series: [{ label: 'step' }, ...series],
        axes: [{}, { values: (u, splits, ai, space, incr) => splits.map((v) => formatTick(v, incr)), size: 52 }],
        legend: { live: true },
      },
      data,
      this.figure,
    );
    // The e2e test reads what was drawn here (tests/e2e/sweep.test.mjs).
    this.figure.uplot = this.chart;
    this.figure.dataset.trials = trials.map((t) => `${t.experiment_id}:${t.end_reason === 'stopped_early' ? 'stopped' : 'kept'}`).join(',');
  }
}

// A trial's state for the table: how it ended, or its experiment's state
// while it runs; an ended trial whose experiment is gone says so (its row
// stays: its parameters and objective are the sweep's results).
function trialState(t) {
  const deleted = t.state === 'ended' && !t.experiment_state;
  return `${t.end_reason || t.experiment_state || t.state}${deleted ? ' (deleted)' : ''}`;
}
