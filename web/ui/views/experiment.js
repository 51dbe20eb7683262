// One experiment: what it is, where it runs, how each task is doing, what
// happened, and its logs. Route: #/experiments/ID
import { ApiError, getJson, getText, request } from '../api.js';
import { confirmAction } from '../dialogs.js';
import { fill, h, renderIfChanged } from '../dom.js';
import {
  timeAgainstLimit,
  countTasks,
  describeExit,
  eventTone,
  formatDuration,
  foldCheckpoints,
  formatTime,
  isOpen,
  sortTasks,
  stateIcon,
  stateTone,
  visibleText,
} from '../format.js';
import { ageSpan, emptyRow, errorNotice, roleCountsList, stateBadge, tickAges } from '../widgets.js';
import { TrainingSection } from './training.js';

const LOG_TAIL_LINES = 200;
const STALE_HEARTBEAT_S = 15;
// Tasks asked for per poll: an experiment of 16,384 tasks is 4 MB of them,
// every 1.5 s; the table shows a page, and a filter by state finds the few
// that failed among thousands.
export const TASKS_PAGE = 100;
const TASK_FILTERS = ['failed', 'lost', 'running', 'registered', 'pending', 'succeeded', 'reaped'];

export class ExperimentView {
  constructor(id) {
    this.id = id;
    this.path = `/experiments/${encodeURIComponent(id)}`;
    this.logTask = ''; // "role:index" shown in the log panel
    this.sbatchFor = 0; // attempt whose script is shown
    this.lastLogFetch = null;
    this.taskOffset = 0;
    this.taskState = ''; // '' : every state
    this.training = new TrainingSection(id);
  }

  mount(root) {
    document.title = `${this.id} · tfslurm`;
    this.badge = h('span', { 'data-testid': 'exp-state' });
    this.cancelButton = h(
      'button',
      { class: 'btn btn-danger', hidden: true, 'data-testid': 'cancel', onclick: () => this.cancel() },
      '⊘ Cancel…',
    );
    this.resumeButton = h(
      'button',
      { class: 'btn btn-primary', hidden: true, 'data-testid': 'resume', onclick: () => this.resume() },
      '↻ Resume…',
    );
    this.actionStatus = h('div', { class: 'action-status', 'aria-live': 'polite' });
    this.banner = h('div', { 'data-testid': 'banner' });
    this.facts = h('div');
    this.timeLimit = h('div', { class: 'time-limit', 'data-testid': 'time-limit', hidden: true });
    this.taskCounts = h('div', { class: 'task-counts-line' });
    this.tasksBody = h('tbody');
    this.taskFilter = h(
      'select',
      {
        'data-testid': 'task-filter',
        'aria-label': 'Tasks in state',
        onchange: () => this.pageTasks(0, this.taskFilter.value),
      },
      h('option', { value: '' }, 'every state'),
      TASK_FILTERS.map((s) => h('option', { value: s }, s)),
    );
    this.taskFilterWrap = h('label', { class: 'task-filter', hidden: true }, 'Show ', this.taskFilter);
    this.taskPager = h('div', { class: 'pager', 'data-testid': 'task-pager' });
    this.logSelect = h('select', { id: 'log-task', onchange: () => this.selectLog(this.logSelect.value) });
    this.logMeta = h('span', { class: 'muted small' });
    this.logPre = h('pre', { class: 'log', tabindex: '0', 'data-testid': 'log' });
    this.attemptsBody = h('tbody');
    this.events = h('ol', { class: 'timeline', 'data-testid': 'events' });
    this.specPre = h('pre', { class: 'code', 'data-testid': 'spec' });
    this.sbatchPre = h('pre', { class: 'code', 'data-testid': 'sbatch' }, 'loading…');
    this.sbatchTitle = h('span', null, 'sbatch script');
    this.loadError = h('div');

    fill(
      root,
      h(
        'div',
        { class: 'page-head' },
        h('a', { href: '#/', class: 'back' }, '← All experiments'),
        h('div', { class: 'title-row' }, h('h1', { class: 'exp-id' }, this.id), this.badge),
        h('div', { class: 'actions' }, this.cancelButton, this.resumeButton),
      ),
      this.actionStatus,
      this.loadError,
      this.banner,
      h('section', { class: 'card', 'aria-label': 'Summary' }, this.timeLimit, this.facts),
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'tasks-title', 'data-testid': 'tasks' },
        h('div', { class: 'card-head' }, h('h2', { id: 'tasks-title' }, 'Tasks'), this.taskCounts, this.taskFilterWrap),
        h(
          'div',
          { class: 'table-wrap' },
          h(
            'table',
            { class: 'responsive tasks-table' },
            h(
              'thead',
              null,
              h(
                'tr',
                null,
                h('th', null, 'Task'),
                h('th', { class: 'num' }, 'Proc'),
                h('th', null, 'Node'),
                h('th', null, 'Address'),
                h('th', null, 'State'),
                h('th', null, 'Exit'),
                h('th', null, 'Heartbeat'),
                h('th', null, h('span', { class: 'sr-only' }, 'Log')),
              ),
            ),
            this.tasksBody,
          ),
        ),
        this.taskPager,
      ),
      // The charts before the log: they say at a glance how training goes;
      // the log's 200 lines are what one scrolls to.
      this.training.element(),
      h(
        'section',
        { class: 'card log-panel', 'aria-labelledby': 'log-title', 'data-testid': 'log-panel' },
        h(
          'div',
          { class: 'log-head' },
          h('h2', { id: 'log-title' }, 'Log'),
          h('label', { for: 'log-task' }, ' tail of '),
          this.logSelect,
          this.logMeta,
        ),
        this.logPre,
      ),
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'attempts-title', 'data-testid': 'attempts' },
        h('h2', { id: 'attempts-title' }, 'Attempts'),
        h(
          'div',
          { class: 'table-wrap' },
          h(
            'table',
            { class: 'responsive attempts-table' },
            h(
              'thead',
              null,
              h(
                'tr',
                null,
                h('th', { class: 'num' }, '#'),
                h('th', null, 'Slurm job'),
                h('th', null, 'State'),
                h('th', null, 'Reason'),
                h('th', null, 'Nodes'),
                h('th', null, 'Submitted'),
                h('th', null, 'Started'),
                h('th', null, 'Ended'),
              ),
            ),
            this.attemptsBody,
          ),
        ),
      ),
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'events-title' },
        h('h2', { id: 'events-title' }, 'Events ', h('span', { class: 'th-note' }, 'newest first')),
        this.events,
      ),
      h(
        'div',
        { class: 'two-col' },
        h(
          'section',
          { class: 'card' },
          h('details', { open: true }, h('summary', null, h('h2', null, 'Spec')), this.specPre),
        ),
        h(
          'section',
          { class: 'card' },
          h('details', { open: true }, h('summary', null, h('h2', null, this.sbatchTitle)), this.sbatchPre),
        ),
      ),
    );
  }

  async refresh() {
    let exp;
    try {
      exp = await getJson(this.tasksQuery());
    } catch (e) {
      if (this.disposed) return;
      if (e instanceof ApiError && e.status === 404) {
        renderIfChanged(this.loadError, e.message, () =>
          errorNotice(e, { prefix: `No experiment "${this.id}". ` }),
        );
        return;
      }
      throw e;
    }
    if (this.disposed) return;
    renderIfChanged(this.loadError, '', () => []);
    this.show(exp);
    await Promise.all([this.refreshSbatch(exp), this.refreshLog(exp), this.training.refresh(exp)]);
  }

  // GET /experiments/{id} for the page of tasks shown.
  tasksQuery() {
    const state = this.taskState ? `&task_state=${this.taskState}` : '';
    return `${this.path}?tasks_offset=${this.taskOffset}&tasks_limit=${TASKS_PAGE}${state}`;
  }

  pageTasks(offset, state = this.taskState) {
    this.taskOffset = Math.max(0, offset);
    this.taskState = state;
    this.refresh().catch(() => {});
  }

  showTaskPager(exp) {
    const total = exp.tasks_total ?? exp.tasks.length;
    const all = Object.values(exp.task_counts ?? {}).reduce((n, c) => n + c.total, 0);
    // The filter once there is more than a page of tasks, or one is chosen.
    this.taskFilterWrap.hidden = all <= TASKS_PAGE && !this.taskState;
    const from = this.taskOffset;
    const to = Math.min(from + TASKS_PAGE, total);
    renderIfChanged(this.taskPager, [from, total, this.taskState], () =>
      total <= TASKS_PAGE && from === 0
        ? []
        : [
            h('span', null, total ? `${from + 1}–${to} of ${total}${this.taskState ? ` ${this.taskState}` : ''}` : `none ${this.taskState}`),
            from > 0 ? h('button', { class: 'btn', onclick: () => this.pageTasks(from - TASKS_PAGE) }, '← Previous') : null,
            to < total ? h('button', { class: 'btn', onclick: () => this.pageTasks(from + TASKS_PAGE) }, 'Next →') : null,
          ],
    );
  }

  show(exp) {
    this.exp = exp;
    const now = Date.now();
    renderIfChanged(this.badge, exp.state, () => stateBadge(exp.state));
    this.cancelButton.hidden = !isOpen(exp.state);
    this.resumeButton.hidden = isOpen(exp.state);
    renderIfChanged(this.banner, [exp.state, exp.reason, exp.next_attempt_at], () => banner(exp, now));
    renderIfChanged(this.facts, factsData(exp), () => facts(exp, now));
    // Ages tick every poll without re-rendering (and unselecting) the rest.
    tickAges(this.facts, now);
    showTimeLimit(this.timeLimit, exp, now);
    renderIfChanged(this.taskCounts, exp.task_counts, () => roleCountsList(exp.task_counts ?? countTasks(exp.tasks)));
    // Task rows are rebuilt when a task changes; heartbeat ages, which move
    // every poll, are written in place (a click on "log" is never lost).
    this.updateLogChoices(exp);  // first: the rows mark the task whose log is shown
    const shape = exp.tasks.map(({ heartbeat_age_s, ...t }) => [t, heartbeat_age_s > STALE_HEARTBEAT_S]);
    renderIfChanged(this.tasksBody, [shape, exp.spares, this.logTask, exp.state, this.taskState], () =>
      [].concat(taskRows(exp, this.logTask, (key) => this.selectLog(key), this.taskState), spareRows(exp)),
    );
    this.showTaskPager(exp);
    for (const t of exp.tasks) {
      const cell = this.tasksBody.querySelector(`tr[data-task="${t.role}:${t.index}"] [data-label=Heartbeat]`);
      if (cell) cell.textContent = heartbeatText(t.heartbeat_age_s);
    }
    renderIfChanged(this.attemptsBody, exp.attempts, () => attemptRows(exp.attempts, now));
    renderIfChanged(this.events, exp.events, () => eventItems(exp.events, now));
    renderIfChanged(this.specPre, exp.spec, () => JSON.stringify(exp.spec, null, 2));
  }

  async refreshSbatch(exp) {
    if (!exp.attempts.length) {
      this.sbatchPre.textContent = 'No attempt yet.';
      return;
    }
    const n = exp.attempts[exp.attempts.length - 1].number;
    if (n === this.sbatchFor) return;
    try {
      const script = await getText(`${this.path}/sbatch?attempt=${n}`);
      if (this.disposed) return;
      this.sbatchPre.textContent = visibleText(script);
      this.sbatchTitle.textContent = `sbatch script (attempt ${n})`;
      this.sbatchFor = n;
    } catch (e) {
      this.sbatchPre.textContent = `✗ The script could not be loaded: ${e.message}`;
    }
  }

  // The log panel offers every task. Until one is picked by hand it shows
  // the task that failed, since its log says why; else the chief, else
  // worker 0.
  updateLogChoices(exp) {
    const tasks = sortTasks(exp.tasks);
    const keys = tasks.map((t) => `${t.role}:${t.index}`);
    if (!this.logPicked || !keys.includes(this.logTask)) {
      const failed = tasks.find((t) => t.state === 'failed');
      const preferred = failed
        ? `${failed.role}:${failed.index}`
        : keys.find((k) => k === 'chief:0') || keys.find((k) => k === 'worker:0') || keys[0] || '';
      if (preferred !== this.logTask) {
        this.logTask = preferred;
        this.lastLogFetch = null;
      }
    }
    renderIfChanged(this.logSelect, [keys, this.logTask], () =>
      tasks.map((t) => {
        const key = `${t.role}:${t.index}`;
        return h('option', { value: key, selected: key === this.logTask }, `${t.role} ${t.index}`);
      }),
    );
  }

  selectLog(key) {
    this.logPicked = true;
    if (key === this.logTask) return;
    this.logTask = key;
    this.logSelect.value = key;
    this.lastLogFetch = null;
    this.logPre.textContent = 'loading…';
    if (this.exp) {
      this.show(this.exp);
      this.refreshLog(this.exp);
    }
  }

  async refreshLog(exp) {
    const key = this.logTask;
    if (!key) {
      this.logPre.textContent = 'No tasks yet.';
      return;
    }
    const task = exp.tasks.find((t) => `${t.role}:${t.index}` === key);
    // A finished task's log no longer changes: fetch it once more, then stop.
    const settled = task && !['pending', 'registered', 'running'].includes(task.state);
    const stamp = `${key}|${exp.attempt}|${task ? task.state : ''}`;
    if (settled && this.lastLogFetch === stamp) return;
    const url = `${this.path}/logs?task=${encodeURIComponent(key)}&tail=${LOG_TAIL_LINES}`;
    let text;
    let failure = null;
    try {
      text = await getText(url);
    } catch (e) {
      failure = e;
    }
    if (this.disposed || key !== this.logTask) return;
    this.lastLogFetch = stamp;
    const atBottom = this.logPre.scrollHeight - this.logPre.scrollTop - this.logPre.clientHeight < 24;
    if (failure) {
      this.logPre.classList.add('log-missing');
      this.logMeta.textContent = '';
      this.logPre.textContent = logUnavailable(failure, key, task);
      return;
    }
    this.logPre.classList.remove('log-missing');
    this.logMeta.textContent = ` last ${LOG_TAIL_LINES} lines · attempt ${exp.attempt}`;
    if (this.logPre.textContent !== text) {
      this.logPre.textContent = visibleText(text) || `(the log of ${key} is empty so far)`;
      if (atBottom) this.logPre.scrollTop = this.logPre.scrollHeight;
    }
  }

  async cancel() {
    const exp = this.exp;
    const ok = await confirmAction({
      title: `Cancel ${this.id}?`,
      body: [
        h(
          'p',
          null,
          exp && exp.slurm_job_id
            ? `Slurm job ${exp.slurm_job_id} is cancelled and every task of attempt ${exp.attempt} stops.`
            : 'The experiment is stopped before it runs.',
        ),
        h('p', null, 'Checkpoints stay in the model directory; Resume starts a new attempt from the latest one.'),
      ],
      confirm: '⊘ Cancel experiment',
      cancel: 'Keep running',
      danger: true,
    });
    if (ok) await this.act('DELETE', this.path, 'Cancelled');
  }

  async resume() {
    const exp = this.exp;
    const ok = await confirmAction({
      title: `Resume ${this.id}?`,
      body: [
        h('p', null, `A new Slurm job (attempt ${exp ? exp.attempt + 1 : ''}) is submitted with the same model directory.`),
        h(
          'p',
          null,
          exp && exp.checkpoint
            ? `Training continues from the checkpoint at step ${exp.checkpoint.step}.`
            : 'No checkpoint was found: training starts from the beginning.',
        ),
      ],
      confirm: '↻ Resume',
      cancel: 'Back',
    });
    if (ok) await this.act('POST', `${this.path}/resume`, 'Resumed');
  }

  async act(method, url, done) {
    this.cancelButton.disabled = this.resumeButton.disabled = true;
    fill(this.actionStatus, h('div', { class: 'notice' }, '… working'));
    try {
      const exp = await request(method, url);
      if (this.disposed) return;
      const note = h('div', { class: 'notice notice-ok', role: 'status' }, `✓ ${done}: the experiment is now ${exp.state}.`);
      fill(this.actionStatus, note);
      setTimeout(() => note.remove(), 15000);
      if (exp && exp.id) this.show(exp);
    } catch (e) {
      fill(this.actionStatus, errorNotice(e, { prefix: `${done === 'Cancelled' ? 'Cancel' : 'Resume'} failed: ` }));
    } finally {
      this.cancelButton.disabled = this.resumeButton.disabled = false;
    }
  }

  dispose() {
    this.disposed = true;
    this.training.dispose();
  }
}

// Why the log panel shows no log: the service's answer (a task that has not
// started or wrote nothing yet is a 404 with a message saying so).
function logUnavailable(e, key, task) {
  if (e.status === 0) return `Log not loaded: ${e.message}`;
  const pending = task && task.state === 'pending' ? ' The task has not started yet.' : '';
  return `No log for ${key}: ${e.message}.${pending}`;
}

function banner(exp, now) {
  const reason = exp.reason || '';
  const tone = stateTone(exp.state);
  const text = {
    failed: 'Failed',
    cancelled: 'Cancelled',
    restarting: 'Restarting',
    succeeded: 'Succeeded',
  }[exp.state];
  if (!text && !reason) return [];
  const extra =
    exp.state === 'restarting' && exp.next_attempt_at ? ` Next attempt at ${formatTime(exp.next_attempt_at, now)}.` : '';
  return h(
    'div',
    {
      class: `notice notice-${tone}`,
      role: tone === 'bad' ? 'alert' : 'status',
      'data-testid': 'reason',
    },
    h('strong', null, `${stateIcon(exp.state)} ${text || exp.state}`),
    reason ? ` — ${reason}` : '',
    extra,
  );
}

// While the job runs: how much of its Slurm time limit is used and how much
// is left, as words and a meter. The limit is the job's, so an attempt
// restarted in place shares it with those before it in the same job.
function showTimeLimit(box, exp, now) {
  const t = exp.state === 'running' || exp.state === 'starting' ? timeAgainstLimit(exp, now) : null;
  box.hidden = !t;
  if (!t) return;
  const over = t.left_s < 0;
  const key = [t.used_s, t.limit_s].map((x) => Math.floor(x)).join('/');
  if (box.dataset.key === key) return;
  box.dataset.key = key;
  box.dataset.usedS = String(Math.floor(t.used_s));
  box.dataset.limitS = String(t.limit_s);
  fill(
    box,
    h('span', { class: 'time-label' }, 'Time limit '),
    h('meter', { min: '0', max: String(t.limit_s), value: String(Math.min(t.used_s, t.limit_s)), low: String(t.limit_s * 0.75), high: String(t.limit_s * 0.9), optimum: '0', 'aria-label': 'time used' }),
    ' ',
    h('span', { 'data-testid': 'time-used' }, `${formatDuration(t.used_s)} used of ${formatDuration(t.limit_s)}`),
    ' · ',
    h(
      'span',
      { 'data-testid': 'time-left', class: over || t.left_s < t.limit_s * 0.1 ? 'exit-bad' : null },
      over ? `⚠ ${formatDuration(-t.left_s)} over: Slurm ends the job` : `${formatDuration(t.left_s)} left`,
    ),
    t.job ? h('span', { class: 'muted small' }, ` (Slurm job ${t.job} started ${formatTime(t.started_at, now)})`) : null,
  );
}

// What the summary shows, minus what moves every second.
function factsData(exp) {
  const { tasks, events, attempts, task_counts, ...rest } = exp;
  return rest;
}

function facts(exp, now) {
  const spec = exp.spec || {};
  const res = spec.resources || {};
  const cluster = Object.entries(spec.cluster || {})
    .filter(([, n]) => n > 0)
    .map(([r, n]) => `${n} ${r}`)
    .join(', ');
  const item = (label, value, cls) => [h('dt', null, label), h('dd', { class: cls }, value ?? '—')];
  return h(
    'dl',
    { class: 'facts' },
    item('Attempt', [String(exp.attempt), exp.restarts ? ` (${exp.restarts} automatic restarts)` : '']),
    item('Slurm job', exp.slurm_job_id ? [String(exp.slurm_job_id), exp.slurm_state ? ` · ${exp.slurm_state}` : ''] : '—', 'mono'),
    item('Nodes', exp.nodes || '—', 'mono'),
    item('Checkpoint', exp.checkpoint ? [`step ${exp.checkpoint.step} `, h('span', { class: 'muted mono small' }, exp.checkpoint.path)] : 'none yet'),
    spec.framework === 'pytorch' || spec.framework === 'jax'
      ? item('Framework', `${spec.framework === 'jax' ? 'JAX' : 'PyTorch'} · ${(res.nodes ?? 0) * (res.tasks_per_node ?? 0)} ${spec.framework === 'jax' ? 'processes' : 'ranks'} · success: every rank exits 0`)
      : item('Cluster', [cluster || '—', spec.placement ? ` · placement ${Array.isArray(spec.placement) ? 'explicit' : spec.placement}` : '', spec.success ? ` · success ${spec.success}` : '']),
    item('Resources', `${res.partition ? `partition ${res.partition} · ` : ''}${res.nodes ?? '?'} nodes × ${res.tasks_per_node ?? '?'} tasks${res.spare_nodes ? ` + ${res.spare_nodes} spare node${res.spare_nodes > 1 ? 's' : ''}` : ''} · ${res.cpus_per_task ?? '?'} cpu/task · time ${res.time_limit ?? '?'}`),
    spec.roles ? item('Per-role resources', `${rolesText(spec.roles)} (a heterogeneous Slurm job; other roles use the resources above)`) : null,
    containerItem(exp, item),
    item('Memory per task', [exp.mem_per_task_mb ? `${exp.mem_per_task_mb} MB` : '—', exp.mem_explanation ? h('div', { class: 'small muted' }, exp.mem_explanation) : null]),
    item('Command', spec.command ? spec.command.join(' ') : '—', 'mono wrap'),
    item('Model dir', exp.model_dir, 'mono wrap'),
    item('Owner', exp.owner),
    item('Created', [formatTime(exp.created_at, now), ' ', h('span', { class: 'muted' }, ageSpan(exp.created_at, { suffix: ' ago', parens: true }))]),
  );
}

// The image and runtime each role runs in (docs/containers.md): one line
// when every role shares them; nothing without a container.
function containerItem(exp, item) {
  const list = exp.containers ?? [];
  if (!list.length) return null;
  const text = (c) => `${c.image} (${c.runtime})`;
  const same = list.every((c) => text(c) === text(list[0]));
  return item('Container', same ? text(list[0]) : list.map((c) => `${c.role}: ${text(c)}`).join(' · '), 'mono wrap');
}

// A PyTorch rank's (or JAX process's) place on its node (LOCAL_RANK), after "rank N".
function localRankNote(t) {
  if (t.role !== 'rank' || t.local_rank === undefined) return null;
  return h('span', { class: 'local-rank', title: 'LOCAL_RANK: its index on its node' }, ` · local ${t.local_rank}`);
}

// A TF worker's or evaluator's program restarted inside its attempt while
// the chief trained on (restart.max_task_restarts).
function loneRestartNote(t) {
  if (!t.restarts) return null;
  return h('span', { class: 'lone-restarts', title: 'its program was restarted alone in this attempt, on the same node and port, while the chief trained on' }, ` · restarted alone ${t.restarts}×`);
}

// A heterogeneous job's task (per-role resources): its component, after the
// index; a plain job has one and shows none.
function componentNote(exp, t) {
  if (!exp.spec?.roles || t.component === undefined) return null;
  return h('span', { class: 'component', title: 'its component of the heterogeneous Slurm job (spec roles)' }, ` · component ${t.component}`);
}

// "ps: psmem, 1 × 2 tasks" for each role with its own resources.
function rolesText(roles) {
  return Object.entries(roles ?? {})
    .map(([role, r]) => `${role}: ${r.partition ? `partition ${r.partition}, ` : ''}${r.nodes} × ${r.tasks_per_node} tasks${r.constraint ? `, constraint ${r.constraint}` : ''}`)
    .join(' · ');
}

function taskRows(exp, logTask, onLog, state) {
  const tasks = sortTasks(exp.tasks);
  if (!tasks.length && state) return emptyRow(8, `No ${state} task.`);
  if (!tasks.length) return emptyRow(8, isOpen(exp.state) ? 'Waiting for Slurm to start the job…' : 'No tasks.');
  return tasks.map((t) => {
    const key = `${t.role}:${t.index}`;
    const exit = describeExit(t);
    const tone = stateTone(t.state);
    const hb = t.heartbeat_age_s;
    const stale = hb !== null && hb !== undefined && hb > STALE_HEARTBEAT_S;
    return h(
      'tr',
      {
        class: [`tone-row-${tone}`, key === logTask && 'selected'],
        'data-task': key,
        'data-state': t.state,
      },
      h('td', { 'data-label': 'Task' }, h('span', { class: 'role' }, t.role), ` ${t.index}`, localRankNote(t), componentNote(exp, t), loneRestartNote(t)),
      h('td', { 'data-label': 'Proc', class: 'num' }, t.proc_id),
      h('td', { 'data-label': 'Node', class: 'mono' }, t.node || '—'),
      h('td', { 'data-label': 'Address', class: 'mono' }, t.address || '—'),
      h('td', { 'data-label': 'State' }, stateBadge(t.state)),
      h(
        'td',
        { 'data-label': 'Exit', class: exit.bad ? 'mono exit-bad' : 'mono' },
        exit.bad ? `✗ ${exit.text}` : exit.text,
        // Why it ended, in its agent's words ("cannot run 'trian.py': ...").
        t.detail ? h('div', { class: 'small reason', 'data-testid': 'exit-detail' }, t.detail) : null,
      ),
      h('td', { 'data-label': 'Heartbeat', class: stale ? 'stale' : null }, heartbeatText(hb)),
      h(
        'td',
        { 'data-label': 'Log' },
        h(
          'button',
          {
            class: 'btn btn-small',
            'aria-pressed': key === logTask ? 'true' : 'false',
            onclick: () => {
              onLog(key);
              // The log is below the charts: bring it into view.
              document.querySelector('[data-testid=log-panel]')?.scrollIntoView({ block: 'nearest' });
            },
            title: `Show the end of ${t.role} ${t.index}'s log`,
          },
          'log',
        ),
      ),
    );
  });
}

// The job's spare nodes (resources.spare_nodes): agents that run no
// program and wait to take a failed node's place in a restart in place.
function spareRows(exp) {
  return (exp.spares ?? []).map((s) =>
    h(
      'tr',
      { class: 'spare-row', 'data-testid': 'spare-row', 'data-node': s.node },
      h('td', { 'data-label': 'Task' }, h('span', { class: 'role', title: 'a spare node: no program; it takes a failed node\'s place in a restart inside the job' }, 'spare')),
      h('td', { 'data-label': 'Proc', class: 'num' }, '—'),
      h('td', { 'data-label': 'Node', class: 'mono' }, s.node || '—'),
      h('td', { 'data-label': 'Address', class: 'mono' }, '—'),
      h('td', { 'data-label': 'State' }, s.waiting ? 'waiting' : 'starting'),
      h('td', { 'data-label': 'Exit', class: 'mono' }, '—'),
      h('td', { 'data-label': 'Heartbeat' }, '—'),
      h('td', { 'data-label': 'Log' }),
    ),
  );
}

function heartbeatText(ageS) {
  if (ageS === null || ageS === undefined) return '—';
  return `${ageS > STALE_HEARTBEAT_S ? '⚠ ' : ''}${formatDuration(ageS)} ago`;
}

function attemptRows(attempts, now) {
  if (!attempts.length) return emptyRow(8, 'Not submitted yet.');
  return [...attempts].reverse().map((a) => {
    const state = a.state === 'ended' ? a.end_reason || 'ended' : a.state;
    const bad = a.state === 'ended' && a.end_reason && a.end_reason !== 'succeeded';
    return h(
      'tr',
      { class: bad ? 'tone-row-bad' : null, 'data-attempt': a.number },
      h('td', { 'data-label': '#', class: 'num' }, a.number),
      h(
        'td',
        { 'data-label': 'Slurm job', class: 'mono' },
        a.slurm_job_id ?? '—',
        h('div', { class: 'small muted' }, a.job_name),
        // restart.in_allocation: this attempt ran inside the job of the one before.
        a.in_place ? h('div', { class: 'small', 'data-in-place': '' }, 'restarted in place') : null,
      ),
      h(
        'td',
        { 'data-label': 'State' },
        h('span', { class: bad ? 'exit-bad' : null }, `${bad ? '✗ ' : ''}${state}`),
        a.slurm_state ? h('div', { class: 'small muted' }, `Slurm: ${a.slurm_state}`) : null,
      ),
      h('td', { 'data-label': 'Reason', class: 'reason' }, a.reason || '—', a.start_step !== null && a.start_step !== undefined ? h('div', { class: 'small muted' }, `started from step ${a.start_step}`) : null),
      h('td', { 'data-label': 'Nodes', class: 'mono' }, a.nodes || '—'),
      h('td', { 'data-label': 'Submitted', title: a.submitted_at }, formatTime(a.submitted_at, now)),
      h('td', { 'data-label': 'Started', title: a.started_at }, formatTime(a.started_at, now)),
      h('td', { 'data-label': 'Ended', title: a.ended_at }, formatTime(a.ended_at, now)),
    );
  });
}

const EVENT_ICONS = { bad: '✗', warn: '!', ok: '✓', info: '•' };

function eventItems(events, now) {
  if (!events.length) return h('li', { class: 'muted' }, 'No events yet.');
  return [...foldCheckpoints(events)].reverse().map((e) => {
    const tone = eventTone(e.what, e.why);
    return h(
      'li',
      { class: `ev ev-${tone}`, 'data-what': e.what },
      h('span', { class: 'ev-icon', 'aria-hidden': 'true' }, EVENT_ICONS[tone]),
      h('time', { datetime: e.at, title: e.at }, formatTime(e.at, now)),
      h('span', { class: 'ev-what' }, e.what),
      e.attempt ? h('span', { class: 'ev-attempt', title: `attempt ${e.attempt}` }, `a${e.attempt}`) : null,
      h('span', { class: 'ev-why' }, e.why),
      e.folded
        ? h('span', { class: 'ev-folded muted small', 'data-testid': 'checkpoints-folded' }, ` (latest of ${e.folded} checkpoints since ${formatTime(e.first_at, now)})`)
        : null,
    );
  });
}
