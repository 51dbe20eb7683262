// The front page: running experiments first, at a glance; then those that
// wait (queued in Slurm, or between attempts) with why; below, every
// experiment with a state filter and paging. Route: #/?state=failed&offset=25
import { getJson } from '../api.js';
import { fill, h, renderIfChanged } from '../dom.js';
import { experimentHref, formatTime, OPEN_STATES, stateTone } from '../format.js';
import { sweepHref } from '../sweeps.js';
import { ageSpan, emptyRow, errorNotice, roleCountsList, stateBadge, tickAges } from '../widgets.js';

const PAGE = 25;
// "Running now" holds experiments whose Slurm job runs; the others that are
// open wait for Slurm (queued) or for their next attempt (restarting).
const RUNNING_STATES = ['starting', 'running'];
const WAITING_STATES = ['queued', 'restarting'];
const FILTERS = [
  { key: '', label: 'All' },
  { key: 'open', label: '▶ Open', states: OPEN_STATES },
  { key: 'succeeded', label: '✓ Succeeded', states: ['succeeded'] },
  { key: 'failed', label: '✗ Failed', states: ['failed'] },
  { key: 'cancelled', label: '⊘ Cancelled', states: ['cancelled'] },
  { key: 'restarting', label: '↻ Restarting', states: ['restarting'] },
];

export class ListView {
  constructor(params) {
    this.filter = FILTERS.find((f) => f.key === (params.state || '')) || FILTERS[0];
    this.offset = Math.max(0, parseInt(params.offset || '0', 10) || 0);
  }

  mount(root) {
    document.title = 'Experiments · tfslurm';
    this.runningBody = h('tbody');
    this.runningError = h('div');
    this.runningCount = h('span', { class: 'count' });
    this.waitingBody = h('tbody');
    this.waitingCount = h('span', { class: 'count' });
    this.allBody = h('tbody');
    this.allError = h('div');
    this.pager = h('div', { class: 'pager' });
    // Shown once there is a sweep (views/sweep.js has each one's page).
    this.sweepsList = h('ul', { class: 'sweep-list' });
    this.sweepsCard = h(
      'section',
      { class: 'card', hidden: true, 'aria-labelledby': 'sweeps-title', 'data-testid': 'sweeps' },
      h('h2', { id: 'sweeps-title' }, 'Sweeps'),
      this.sweepsList,
    );
    fill(
      root,
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'running-title', 'data-testid': 'running' },
        h('h2', { id: 'running-title' }, 'Running now ', this.runningCount),
        this.runningError,
        h(
          'div',
          { class: 'table-wrap' },
          h(
            'table',
            { class: 'responsive running-table' },
            h(
              'thead',
              null,
              h(
                'tr',
                null,
                h('th', null, 'Experiment'),
                h('th', null, 'State'),
                h('th', { class: 'num' }, 'Attempt'),
                h('th', null, 'Slurm job'),
                h('th', null, 'Nodes'),
                h('th', null, 'Tasks ', h('span', { class: 'th-note' }, 'registered/running/done')),
                h('th', { class: 'num' }, 'Checkpoint'),
                h('th', { class: 'num' }, 'Age'),
              ),
            ),
            this.runningBody,
          ),
        ),
      ),
      (this.waitingSection = h(
        'section',
        { class: 'card', 'aria-labelledby': 'waiting-title', 'data-testid': 'waiting', hidden: true },
        h('h2', { id: 'waiting-title' }, 'Waiting ', this.waitingCount, h('span', { class: 'th-note' }, ' queued in Slurm, or between attempts')),
        h(
          'div',
          { class: 'table-wrap' },
          h(
            'table',
            { class: 'responsive waiting-table' },
            h(
              'thead',
              null,
              h(
                'tr',
                null,
                h('th', null, 'Experiment'),
                h('th', null, 'State'),
                h('th', null, 'Why it waits'),
                h('th', { class: 'num' }, 'Attempt'),
                h('th', null, 'Slurm job'),
                h('th', { class: 'num' }, 'Checkpoint'),
                h('th', { class: 'num' }, 'Age'),
              ),
            ),
            this.waitingBody,
          ),
        ),
      )),
      this.sweepsCard,
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'all-title', 'data-testid': 'all' },
        h('h2', { id: 'all-title' }, 'All experiments'),
        h(
          'nav',
          { class: 'filters', 'aria-label': 'Filter by state' },
          FILTERS.map((f) =>
            h(
              'a',
              {
                href: f.key ? `#/?state=${f.key}` : '#/',
                class: ['chip', f === this.filter && 'chip-on'],
                'aria-current': f === this.filter ? 'true' : null,
                'data-filter': f.key || 'all',
              },
              f.label,
            ),
          ),
        ),
        this.allError,
        h(
          'div',
          { class: 'table-wrap' },
          h(
            'table',
            { class: 'responsive all-table' },
            h(
              'thead',
              null,
              h(
                'tr',
                null,
                h('th', null, 'Experiment'),
                h('th', null, 'State'),
                h('th', null, 'Reason'),
                h('th', { class: 'num' }, 'Attempt'),
                h('th', { class: 'num' }, 'Checkpoint'),
                h('th', null, 'Created'),
                h('th', null, 'Updated'),
              ),
            ),
            this.allBody,
          ),
        ),
        this.pager,
      ),
    );
  }

  async refresh() {
    const now = Date.now();
    const openQuery = `/experiments?state=${OPEN_STATES.join(',')}&limit=200`;
    const allQuery =
      `/experiments?limit=${PAGE}&offset=${this.offset}` +
      (this.filter.states ? `&state=${this.filter.states.join(',')}` : '');
    const [running, all, sweeps] = await Promise.allSettled([getJson(openQuery), getJson(allQuery), getJson('/sweeps')]);
    if (this.disposed) return;
    if (sweeps.status === 'fulfilled') this.showSweeps(sweeps.value.sweeps || []);
    this.showRunning(running, now);
    this.showAll(all, now);
    // Let the poller know about an outage without hiding what was shown.
    const failed = [running, all].find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  showSweeps(sweeps) {
    this.sweepsCard.hidden = sweeps.length === 0;
    renderIfChanged(this.sweepsList, sweeps, () =>
      sweeps.map((s) =>
        h('li', null, h('a', { href: sweepHref(s.id) }, s.id), ' ', stateBadge(s.state), ' ', h('span', { class: 'muted small' }, s.reason)),
      ),
    );
  }

  showRunning(result, now) {
    if (result.status === 'rejected') {
      showSectionError(this.runningError, result.reason);
      return;
    }
    renderIfChanged(this.runningError, '', () => []);
    const open = result.value.experiments;
    const items = open.filter((e) => RUNNING_STATES.includes(e.state));
    const waiting = open.filter((e) => WAITING_STATES.includes(e.state));
    this.runningCount.textContent = `(${items.length})`;
    // Rows are rebuilt only when their data changed (a click is never lost
    // to a re-render); ages tick in place.
    renderIfChanged(this.runningBody, items, () =>
      items.length
        ? items.map((e) => runningRow(e, now))
        : emptyRow(8, waiting.length ? 'Nothing is running; see what waits below.' : 'Nothing is queued or running. Submit an experiment with tfctl submit SPEC.'),
    );
    tickAges(this.runningBody, now);
    this.waitingSection.hidden = !waiting.length;
    this.waitingCount.textContent = `(${waiting.length})`;
    renderIfChanged(this.waitingBody, waiting, () => waiting.map((e) => waitingRow(e, now)));
    tickAges(this.waitingBody, now);
  }

  showAll(result, now) {
    if (result.status === 'rejected') {
      showSectionError(this.allError, result.reason);
      return;
    }
    renderIfChanged(this.allError, '', () => []);
    const { experiments, total, offset, limit } = result.value;
    renderIfChanged(this.allBody, experiments, () =>
      experiments.length
        ? experiments.map((e) => allRow(e, now))
        : emptyRow(7, this.filter.states ? `No ${this.filter.key} experiments.` : 'No experiments yet.'),
    );
    tickAges(this.allBody, now);
    const base = this.filter.key ? `#/?state=${this.filter.key}&` : '#/?';
    const to = Math.min(total, offset + experiments.length);
    fill(
      this.pager,
      h('span', null, total ? `${offset + 1}–${to} of ${total}` : ''),
      offset > 0 ? h('a', { class: 'btn', href: `${base}offset=${Math.max(0, offset - limit)}` }, '← Newer') : null,
      to < total ? h('a', { class: 'btn', href: `${base}offset=${offset + limit}` }, 'Older →') : null,
    );
  }

  dispose() {
    this.disposed = true;
  }
}

// A section's own error box. A missing or refused token is said once, by
// the page's banner with its "Enter token" button (app.js), not again in
// every section that needed it.
function showSectionError(el, err) {
  if (err.status === 401) renderIfChanged(el, '', () => []);
  else renderIfChanged(el, err.message, () => errorNotice(err));
}

function idCell(e) {
  return h(
    'td',
    { 'data-label': 'Experiment', class: 'id-cell' },
    h('a', { href: experimentHref(e.id), class: 'exp-link' }, e.id),
    e.owner && e.owner !== 'local' ? h('span', { class: 'muted owner' }, ` ${e.owner}`) : null,
  );
}

function checkpointText(e) {
  return e.checkpoint ? `step ${e.checkpoint.step}` : '—';
}

function runningRow(e, now) {
  return h(
    'tr',
    { class: `tone-row-${stateTone(e.state)}`, 'data-id': e.id, 'data-state': e.state },
    idCell(e),
    h(
      'td',
      { 'data-label': 'State' },
      stateBadge(e.state),
      e.reason && e.state !== 'running' ? h('div', { class: 'small reason' }, e.reason) : null,
    ),
    h('td', { 'data-label': 'Attempt', class: 'num' }, e.attempt, e.restarts ? h('span', { class: 'muted' }, ` (${e.restarts} restarts)`) : null),
    h('td', { 'data-label': 'Slurm job', class: 'mono' }, e.slurm_job_id ?? '—', e.slurm_state ? h('div', { class: 'small muted' }, e.slurm_state) : null),
    h('td', { 'data-label': 'Nodes', class: 'mono' }, e.nodes || '—'),
    h('td', { 'data-label': 'Tasks' }, roleCountsList(e.task_counts)),
    h('td', { 'data-label': 'Checkpoint', class: 'num' }, checkpointText(e)),
    h('td', { 'data-label': 'Age', class: 'num', title: e.created_at }, ageSpan(e.created_at)),
  );
}

function waitingRow(e, now) {
  return h(
    'tr',
    { class: `tone-row-${stateTone(e.state)}`, 'data-id': e.id, 'data-state': e.state },
    idCell(e),
    h('td', { 'data-label': 'State' }, stateBadge(e.state)),
    h(
      'td',
      { 'data-label': 'Why it waits', class: 'reason' },
      e.reason || '—',
      e.state === 'restarting' && e.next_attempt_at
        ? h('div', { class: 'small muted' }, `next attempt at ${formatTime(e.next_attempt_at, now)}`)
        : null,
    ),
    h('td', { 'data-label': 'Attempt', class: 'num' }, e.attempt, e.restarts ? h('span', { class: 'muted' }, ` (${e.restarts} restarts)`) : null),
    h('td', { 'data-label': 'Slurm job', class: 'mono' }, e.slurm_job_id ?? '—', e.slurm_state ? h('div', { class: 'small muted' }, e.slurm_state) : null),
    h('td', { 'data-label': 'Checkpoint', class: 'num' }, checkpointText(e)),
    h('td', { 'data-label': 'Age', class: 'num', title: e.created_at }, ageSpan(e.created_at)),
  );
}

function allRow(e, now) {
  const bad = stateTone(e.state) === 'bad';
  return h(
    'tr',
    { class: `tone-row-${stateTone(e.state)}`, 'data-id': e.id, 'data-state': e.state },
    idCell(e),
    h('td', { 'data-label': 'State' }, stateBadge(e.state)),
    h('td', { 'data-label': 'Reason', class: bad ? 'reason reason-bad' : 'reason' }, e.reason || '—'),
    h('td', { 'data-label': 'Attempt', class: 'num' }, e.attempt),
    h('td', { 'data-label': 'Checkpoint', class: 'num' }, checkpointText(e)),
    h('td', { 'data-label': 'Created', title: e.created_at }, formatTime(e.created_at, now)),
    h('td', { 'data-label': 'Updated', title: e.updated_at }, ageSpan(e.updated_at, { suffix: ' ago' })),
  );
}
