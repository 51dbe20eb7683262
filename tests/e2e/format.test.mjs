// Unit tests of the dashboard's pure helpers (web/ui/format.js): no browser.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  ageSeconds,
  countTasks,
  describeExit,
  eventTone,
  experimentHref,
  foldCheckpoints,
  formatTime,
  zoneOf,
  formatDuration,
  parseRoute,
  parseSlurmTime,
  roleCounts,
  timeAgainstLimit,
  sortTasks,
  stateIcon,
  stateTone,
  visibleText,
} from '../../web/ui/format.js';

test('every state has an icon of its own, so color is never alone', () => {
  const states = ['queued', 'starting', 'running', 'restarting', 'succeeded', 'failed', 'cancelled',
    'pending', 'registered', 'reaped', 'lost'];
  const icons = states.map(stateIcon);
  assert.ok(icons.every((i) => i && i !== '•'));
  assert.equal(stateTone('failed'), 'bad');
  assert.equal(stateTone('lost'), 'bad');
  assert.equal(stateTone('succeeded'), 'ok');
  assert.equal(stateTone('reaped'), 'done');
});

test('durations read naturally', () => {
  assert.equal(formatDuration(0.42), '0.4 s');
  assert.equal(formatDuration(42), '42 s');
  assert.equal(formatDuration(125), '2 min');
  assert.equal(formatDuration(3 * 3600 + 5 * 60), '3 h 05 min');
  assert.equal(formatDuration(3 * 86400 + 4 * 3600), '3 d 4 h');
  assert.equal(formatDuration(null), '—');
  assert.equal(formatDuration(-1), '—');
  assert.equal(ageSeconds('2024-01-01T00:00:10.000Z', Date.parse('2024-01-01T00:00:40.000Z')), 30);
  assert.equal(ageSeconds(null, 0), null);
});

test('exits: codes, signals, and reaped tasks are not failures', () => {
  assert.deepEqual(describeExit({ state: 'succeeded', exit_code: 0, signal: null }), { text: '0', bad: false });
  assert.deepEqual(describeExit({ state: 'failed', exit_code: 1, signal: null }), { text: '1', bad: true });
  assert.deepEqual(describeExit({ state: 'reaped', exit_code: 143, signal: null }), { text: '143 (SIGTERM)', bad: false });
  assert.deepEqual(describeExit({ state: 'failed', exit_code: null, signal: 9 }), { text: 'killed by SIGKILL', bad: true });
  assert.deepEqual(describeExit({ state: 'running', exit_code: null, signal: null }), { text: '—', bad: false });
});

test('roles in TensorFlow order, tasks by role then index', () => {
  const tasks = [
    { role: 'worker', index: 1, state: 'running' },
    { role: 'evaluator', index: 0, state: 'pending' },
    { role: 'ps', index: 1, state: 'failed' },
    { role: 'worker', index: 0, state: 'succeeded' },
    { role: 'chief', index: 0, state: 'reaped' },
  ];
  assert.deepEqual(sortTasks(tasks).map((t) => `${t.role}:${t.index}`), ['chief:0', 'ps:1', 'worker:0', 'worker:1', 'evaluator:0']);
  const counts = countTasks(tasks);
  assert.deepEqual(counts.worker, { total: 2, registered: 2, running: 1, done: 1, failed: 0 });
  assert.deepEqual(counts.ps, { total: 1, registered: 1, running: 0, done: 1, failed: 1 });
  assert.deepEqual(counts.evaluator, { total: 1, registered: 0, running: 0, done: 0, failed: 0 });
  assert.deepEqual(roleCounts(counts).map((c) => c.role), ['chief', 'ps', 'worker', 'evaluator']);
});

test('event codes that mean trouble stand out', () => {
  assert.equal(eventTone('lost'), 'bad');
  assert.equal(eventTone('barrier_timeout'), 'bad');
  assert.equal(eventTone('cancelled'), 'warn');
  assert.equal(eventTone('registered'), 'info');
  assert.equal(eventTone('reaped', 'ps:0 (task 0 on node1) exited with code 143'), 'info');
  assert.equal(eventTone('state', 'running -> failed: attempt 1 permanent_exit'), 'bad');
  assert.equal(eventTone('state', 'running -> succeeded: every worker exited 0'), 'ok');
  assert.equal(eventTone('job', 'Slurm job 16 ended FAILED (NonZeroExitCode)'), 'bad');
  assert.equal(eventTone('job', 'Slurm job 3 ended COMPLETED'), 'ok');
  assert.equal(eventTone('exited', 'worker:1 (task 3 on node2) exited with code 1'), 'bad');
  assert.equal(eventTone('exited', 'worker:0 (task 1 on node1) exited with code 0'), 'info');
});

test('hash routes', () => {
  assert.deepEqual(parseRoute(''), { view: 'list', params: {} });
  assert.deepEqual(parseRoute('#/?state=failed&offset=25'), { view: 'list', params: { state: 'failed', offset: '25' } });
  assert.deepEqual(parseRoute('#/experiments/mnist-ps.01'), { view: 'experiment', id: 'mnist-ps.01', params: {} });
  assert.equal(experimentHref('a.b_c-1'), '#/experiments/a.b_c-1');
  assert.deepEqual(parseRoute(experimentHref('x y')), { view: 'experiment', id: 'x y', params: {} });
});

test('control and bidi characters users wrote are shown as visible escapes, as tfctl shows them', () => {
  // An OSC title change, the 8-bit CSI, a right-to-left override that would
  // reverse the page's own text around it, an isolate, DEL and a bare CR.
  assert.equal(visibleText('x\x1b]0;TITLE\x07/model.ckpt-7'), 'x\\x1b]0;TITLE\\x07/model.ckpt-7');
  assert.equal(visibleText('a\u009b2J'), 'a\\u009b2J');
  assert.equal(visibleText("dropped tag 'loss\u202etset'"), "dropped tag 'loss\\u202etset'");
  assert.equal(visibleText('\u2066x\u2069 \u200f'), '\\u2066x\\u2069 \\u200f');
  assert.equal(visibleText('a\x7fb\rc'), 'a\\x7fb\\rc');
  // Line breaks, tabs and ordinary text, Arabic and Hebrew included, stay.
  const plain = 'step 7 (/m/model.ckpt-7)\n\ttrain/loss é 训练 שלום مرحبا \u00a0';
  assert.equal(visibleText(plain), plain);
});

test('invisible characters and line separators are escaped', () => {
  // Issue 41: U+2028 breaks a line where none shows; U+200B and a tag
  // character make two names look the same.
  assert.equal(visibleText('a\u2028b\u2029c'), 'a\\u2028b\\u2029c');
  assert.equal(visibleText('run\u200b1\ufeff'), 'run\\u200b1\\ufeff');
  assert.equal(visibleText('tag\u{e0041}'), 'tag\\U000e0041');
  assert.equal(visibleText('caf\u00e9 \u{1f600}'), 'caf\u00e9 \u{1f600}');
});

test('formatTime always shows the date and the zone', () => {
  const iso = '2026-11-26T19:33:00.000Z';
  const d = new Date(iso);
  const shown = formatTime(iso, Date.parse(iso));
  assert.match(shown, /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC([+-]\d{2}:\d{2})?$/, shown);
  assert.ok(shown.endsWith(` ${zoneOf(d)}`), shown);
  // Today too: a time without its date is ambiguous on a screenshot.
  assert.ok(shown.startsWith(`${d.getFullYear()}-`), shown);
  assert.equal(formatTime(''), '—');
  assert.equal(zoneOf({ getTimezoneOffset: () => 0 }), 'UTC');
  assert.equal(zoneOf({ getTimezoneOffset: () => -60 }), 'UTC+01:00');
  assert.equal(zoneOf({ getTimezoneOffset: () => 330 }), 'UTC-05:30');
});

test('foldCheckpoints folds a run of checkpoints into the latest, per attempt', () => {
  const ev = (id, what, attempt, why = '') => ({ id, what, attempt, why, at: `t${id}` });
  const folded = foldCheckpoints([
    ev(1, 'state', 1),
    ev(2, 'checkpoint', 1, 'step 10'),
    ev(3, 'checkpoint', 1, 'step 20'),
    ev(4, 'checkpoint', 1, 'step 30'),
    ev(5, 'checkpoint', 2, 'step 40'),
    ev(6, 'exited', 2),
    ev(7, 'checkpoint', 2, 'step 50'),
  ]);
  assert.deepEqual(
    folded.map((e) => [e.id, e.why, e.folded || 1, e.first_at || e.at]),
    [
      [1, '', 1, 't1'],
      [4, 'step 30', 3, 't2'],
      [5, 'step 40', 1, 't5'],
      [6, '', 1, 't6'],
      [7, 'step 50', 1, 't7'],
    ],
  );
});


test('Slurm time limits in every sbatch form, and the time used and left of the running job', () => {
  assert.equal(parseSlurmTime('30'), 1800);
  assert.equal(parseSlurmTime('10:30'), 630);
  assert.equal(parseSlurmTime('01:00:00'), 3600);
  assert.equal(parseSlurmTime('2-03'), 2 * 86400 + 3 * 3600);
  assert.equal(parseSlurmTime('1-00:30'), 86400 + 1800);
  assert.equal(parseSlurmTime('1-00:00:30'), 86430);
  for (const none of ['UNLIMITED', 'INFINITE', '', null, undefined, '1:2:3:4']) assert.equal(parseSlurmTime(none), null);

  const at = (iso) => Date.parse(iso);
  const exp = {
    spec: { resources: { time_limit: '00:10:00' } },
    attempts: [
      { number: 1, slurm_job_id: 4, started_at: '2026-01-01T00:00:00Z' },
      // Restarted in place: the same Slurm job, the same limit.
      { number: 2, slurm_job_id: 4, started_at: '2026-01-01T00:05:00Z' },
    ],
  };
  assert.deepEqual(timeAgainstLimit(exp, at('2026-01-01T00:07:30Z')), {
    used_s: 450, limit_s: 600, left_s: 150, started_at: '2026-01-01T00:00:00.000Z', job: 4,
  });
  // A new job for attempt 3: its own limit, from its own start.
  const resubmitted = { ...exp, attempts: [...exp.attempts, { number: 3, slurm_job_id: 9, started_at: '2026-01-01T01:00:00Z' }] };
  assert.equal(timeAgainstLimit(resubmitted, at('2026-01-01T01:01:00Z')).used_s, 60);
  // Past the limit (Slurm's OverTimeLimit): left is negative.
  assert.equal(timeAgainstLimit(exp, at('2026-01-01T00:11:00Z')).left_s, -60);
  // Not started, or no limit: nothing to show.
  assert.equal(timeAgainstLimit({ ...exp, attempts: [{ number: 1, slurm_job_id: 4, started_at: null }] }, at('2026-01-01T00:00:00Z')), null);
  assert.equal(timeAgainstLimit({ ...exp, spec: { resources: { time_limit: 'UNLIMITED' } } }, at('2026-01-01T00:00:00Z')), null);
  assert.equal(timeAgainstLimit({ ...exp, attempts: [] }, 0), null);
});
