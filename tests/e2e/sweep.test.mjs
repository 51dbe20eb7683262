// The sweep view in headless Chromium, on a real sweep (real Slurm, real
// tfslurmd, linear_ps): one chart overlays every trial's objective curve,
// stopped trials greyed; the table puts parameters against the objective,
// best first, and links the best trial. Screenshot: screenshots/sweep.png.
//   node --test tests/e2e/sweep.test.mjs
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { api, launchBrowser, REPO, screenshotPath, startCluster, startService, waitFor } from './harness.mjs';
import { parseRoute } from '../../web/ui/format.js';
import { overlayCurves, paramNames, sortTrials, sweepHref } from '../../web/ui/sweeps.js';

const TRAIN = path.join(REPO, 'examples/linear_ps/train.py');

let cluster;
let svc;
let browser;

before(async () => {
  cluster = await startCluster();
  svc = await startService(cluster.conf, { name: 'sweep-tfslurmd' });
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await svc?.stop();
  await cluster?.stop();
});

test('pure helpers: trials by objective, parameter columns, curves on one axis', () => {
  const trials = [
    { index: 1, objective: 0.5, params: { 'arg.--lr': 0.1 } },
    { index: 2, objective: null, params: { 'arg.--lr': 0.2 } },
    { index: 3, objective: 0.2, params: { 'arg.--lr': 0.3, 'env.X': 'a' } },
  ];
  assert.deepEqual(sortTrials(trials, 'min').map((t) => t.index), [3, 1, 2]);
  assert.deepEqual(sortTrials(trials, 'max').map((t) => t.index), [1, 3, 2]);
  assert.deepEqual(paramNames(trials), ['arg.--lr', 'env.X']);
  assert.deepEqual(overlayCurves([{ step: [5, 10], value: [1, 0.5] }, { step: [10, 15, 10], value: [2, 1, 1.5] }]), {
    x: [5, 10, 15],
    ys: [
      [1, 0.5, null],
      [null, 1.5, 1],
    ],
  });
  assert.equal(sweepHref('a b'), '#/sweeps/a%20b');
  assert.deepEqual(parseRoute(sweepHref('lr.2')), { view: 'sweep', id: 'lr.2', params: {} });
  assert.deepEqual(parseRoute('#/sweeps/lr/'), { view: 'sweep', id: 'lr', params: {} });
});

test('the sweep view overlays every trial and greys the stopped ones', async () => {
  const spec = {
    id: 'e2e',
    experiment: {
      command: ['python3', TRAIN, '--steps=50', '--log-every=5', '--checkpoint-every=25', '--step-sleep=0.05'],
      workdir: path.join(REPO, 'examples/linear_ps'),
      cluster: { ps: 1, worker: 1 },
      resources: { partition: 'debug', nodes: 1, tasks_per_node: 2, time_limit: '00:10:00' },
      restart: { max_restarts: 0 },
      checkpoint: { signal_grace_s: 30 },
    },
    // Best first: the later trials reach the rung after the first ones, and worse.
    parameters: { 'arg.--lr': { values: [0.2, 0.05, 0.003, 0.0001] } },
    search: { type: 'grid', order: 'listed' },
    max_concurrent: 2,
    objective: { tag: 'loss', goal: 'min' },
    early_stopping: { rule: 'asha', rungs: [15], reduction_factor: 2 },
  };
  const created = await api(svc.base, 'POST', '/sweeps', spec);
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const done = await waitFor(
    'the sweep to complete',
    async () => {
      const r = await api(svc.base, 'GET', '/sweeps/e2e');
      return r.body.state === 'completed' ? r.body : null;
    },
    { timeoutMs: 240000, intervalMs: 1000 },
  );
  const stopped = done.trials.filter((t) => t.end_reason === 'stopped_early');
  assert.ok(stopped.length >= 1, JSON.stringify(done.trials.map((t) => [t.index, t.end_reason, t.objective])));
  assert.ok(done.best_trial, JSON.stringify(done));

  const page = await browser.context.newPage();
  // The front page lists the sweep and links its view.
  await page.goto(`${svc.base}/`);
  await page.locator('[data-testid="sweeps"] a', { hasText: 'e2e' }).click();
  await page.waitForURL(`**/${sweepHref('e2e')}`);
  const figure = page.locator('[data-testid="sweep-chart"]');
  await figure.locator('canvas').first().waitFor();
  await page.waitForFunction(() => {
    const f = document.querySelector('[data-testid="sweep-chart"]');
    return f && f.dataset.trials && f.dataset.trials.split(',').length === 4;
  });
  const drawn = await figure.evaluate((f) => ({
    trials: f.dataset.trials.split(','),
    series: f.uplot.series.slice(1).map((s) => ({ label: s.label, stroke: typeof s.stroke === 'function' ? s.stroke(f.uplot, 1) : s.stroke })),
    points: f.uplot.data.slice(1).map((ys) => ys.filter((v) => v !== null && v !== undefined).length),
  }));
  assert.deepEqual(
    drawn.series.map((s) => s.label),
    done.trials.map((t) => t.experiment_id),
    'one line per trial',
  );
  for (const [i, t] of done.trials.entries()) {
    const grey = drawn.series[i].stroke === '#b0b0b0';
    assert.equal(grey, t.end_reason === 'stopped_early', `${t.experiment_id} greyed exactly when stopped early`);
    assert.ok(drawn.points[i] >= 3, `${t.experiment_id} has its curve drawn (${drawn.points[i]} points)`);
  }

  // The table: best first, marked, linked; parameters against the objective.
  const rows = page.locator('[data-testid="sweep-trials"] tbody tr');
  await rows.first().waitFor();
  assert.equal(await rows.count(), 4);
  const firstRow = await rows.first().innerText();
  assert.ok(firstRow.includes('★') && firstRow.includes(done.best_trial.experiment_id), firstRow);
  const headers = await page.locator('[data-testid="sweep-trials"] thead th').allInnerTexts();
  assert.ok(headers.includes('arg.--lr') && headers.includes('loss'), headers.join('|'));
  const best = page.locator('[data-testid="best-trial"] a');
  assert.equal(await best.getAttribute('href'), `#/experiments/${done.best_trial.experiment_id}`);

  await page.screenshot({ path: screenshotPath('sweep.png'), fullPage: true });
  await best.click();
  await page.waitForURL(`**/#/experiments/${done.best_trial.experiment_id}`);
  await page.close();
});
