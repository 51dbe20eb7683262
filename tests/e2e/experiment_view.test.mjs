// End-to-end tests of what issue 30 asked of the dashboard (a real local
// Slurm cluster, a real tfslurmd, Debian's headless Chromium): a chart of a
// single point has a sensible time axis; a chart can be drawn on a log
// scale, which is remembered; the charts come before the log; experiments
// that wait are shown apart from those that run; a running experiment shows
// the time used and left against its limit; a task whose program ended on
// its own shows its exit, not "reaped"; a spare node (issue 29) shows as a
// spare. Screenshots land in
// tests/e2e/screenshots/.
//
//   node --test tests/e2e/experiment_view.test.mjs   (tests/e2e/install.sh first)
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, afterEach, before, beforeEach, test } from 'node:test';
import { REPO, api, launchBrowser, screenshotPath, startCluster, startService, waitFor } from './harness.mjs';

let cluster;
let svc;
let browser;
// Script errors of the pages the current test opened: each test fails on its
// own pages' errors (afterEach), so none passes for want of pages, as a last
// "no script errors" test did when run alone.
let pageErrors = [];
beforeEach(() => {
  pageErrors = [];
});
afterEach(() => {
  assert.deepEqual(pageErrors, [], 'script errors on the pages of this test');
});

before(
  async () => {
    cluster = await startCluster();
    svc = await startService(cluster.conf, { name: 'tfslurmd-experiment-view' });
    browser = await launchBrowser();
  },
  { timeout: 240000 },
);

after(
  async () => {
    if (svc) {
      const open = await api(svc.base, 'GET', '/experiments?state=queued,starting,running,restarting').catch(() => null);
      for (const e of open?.body?.experiments ?? []) await api(svc.base, 'DELETE', `/experiments/${e.id}`).catch(() => {});
    }
    await browser?.close();
    await svc?.stop();
    await cluster?.stop();
  },
  { timeout: 180000 },
);

async function newPage({ width = 1360, height = 900 } = {}) {
  const page = await browser.context.newPage();
  await page.setViewportSize({ width, height });
  const errors = pageErrors; // this test's, even if an event comes late
  page.on('pageerror', (e) => errors.push(`${page.url()}: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) errors.push(`${page.url()}: ${m.text()}`);
  });
  return page;
}

async function experiment(id) {
  const r = await api(svc.base, 'GET', `/experiments/${id}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body;
}

async function submit(spec) {
  const r = await api(svc.base, 'POST', '/experiments', spec);
  assert.equal(r.status, 201, `submit ${spec.id}: ${JSON.stringify(r.body)}`);
  return r.body;
}

async function waitState(id, state, timeoutMs = 120000) {
  return waitFor(`${id} to be ${state}`, async () => ((await experiment(id)).state === state ? true : null), { timeoutMs });
}

const chart = (key) => `[data-testid=training] figure[data-key="${key}"]`;

// ev-values, succeeded: tests/e2e/programs/jsonl_values.py's scalars, whose
// last steps/s point comes alone. Made by the first test that needs it, so
// that each test also runs alone (node --test --test-name-pattern).
let valuesExperiment;
function experimentWithValues() {
  valuesExperiment ??= (async () => {
    const id = 'ev-values';
    await submit({
      id,
      command: ['/usr/bin/python3', path.join(REPO, 'tests/e2e/programs/jsonl_values.py'), '--steps', '20', '--last-after', '10'],
      cluster: { worker: 1 },
      resources: { partition: 'debug', nodes: 1, tasks_per_node: 1, time_limit: '00:10:00' },
      restart: { max_restarts: 0 },
    });
    await waitState(id, 'succeeded');
    return id;
  })();
  return valuesExperiment;
}

test('one steps-per-second point: a time axis of a minute around it, each tick a different time, the date once', { timeout: 180000 }, async () => {
  const id = await experimentWithValues();
  const m = (await api(svc.base, 'GET', `/experiments/${id}/metrics`)).body;
  assert.equal(m.steps_per_second?.wall_time.length, 1, `one steps/s point: ${JSON.stringify(m.steps_per_second)}`);
  const [t] = m.steps_per_second.wall_time;

  const page = await newPage();
  await page.goto(`${svc.base}/#/experiments/${id}`);
  const rate = '[data-testid=rate-chart]';
  await page.waitForFunction((sel) => document.querySelector(sel)?.uplot?.axes[0]._values?.length, rate, { timeout: 30000 });
  const axis = await page.$eval(rate, (f) => ({
    min: f.uplot.scales.x.min,
    max: f.uplot.scales.x.max,
    labels: f.uplot.axes[0]._values,
    caption: f.querySelector('figcaption').textContent,
  }));
  // A minute around the point, not decades (which gave "01-01 00:00" thrice).
  assert.ok(axis.min <= t && t <= axis.max && axis.max - axis.min <= 120, `x from ${axis.min} to ${axis.max} around ${t}`);
  assert.ok(axis.labels.length >= 2, JSON.stringify(axis.labels));
  assert.equal(new Set(axis.labels).size, axis.labels.length, `distinct tick labels: ${JSON.stringify(axis.labels)}`);
  for (const label of axis.labels) assert.match(label, /^\d{2}:\d{2}(:\d{2})?(\n\d{4}-\d{2}-\d{2})?$/, JSON.stringify(label));
  assert.match(axis.labels[0], /\n\d{4}-\d{2}-\d{2}$/, 'the first tick has the date');
  assert.doesNotMatch(axis.labels.join(' '), /01-01 00:00/);
  // The zone is said once, in the caption.
  assert.match(axis.caption, /by wall time \(UTC([+-]\d{2}:\d{2})?\)/);
  await page.locator(rate).screenshot({ path: screenshotPath('chart-single-point.png') });
  await page.close();
});

test('a log scale per chart: toggled, drawn with values above 0 only (the others said), remembered after a reload', { timeout: 120000 }, async () => {
  const id = await experimentWithValues();
  const page = await newPage({ height: 1300 });
  await page.goto(`${svc.base}/#/experiments/${id}`);
  for (const key of ['tag:loss', 'tag:margin', 'tag:zero']) await page.waitForFunction((sel) => document.querySelector(sel)?.uplot, chart(key));
  const scaleOf = (key) => page.$eval(chart(key), (f) => ({ distr: f.uplot.scales.y.distr, log: f.dataset.log, checked: f.querySelector('[data-testid=log-toggle]').checked }));
  assert.deepEqual(await scaleOf('tag:loss'), { distr: 1, log: 'false', checked: false }, 'linear at first');

  // loss: 4 / (1 + step)^2 from 4 down to about 0.009: every point drawn.
  await page.locator(`${chart('tag:loss')} [data-testid=log-toggle]`).check();
  await page.waitForFunction((sel) => document.querySelector(sel)?.uplot?.scales.y.distr === 3, chart('tag:loss'));
  assert.deepEqual(await scaleOf('tag:loss'), { distr: 3, log: 'true', checked: true });
  assert.equal(await page.locator(`${chart('tag:loss')} [data-testid=log-note]`).count(), 0, 'nothing hidden');
  const drawn = await page.$eval(chart('tag:loss'), (f) => f.uplot.data[1]);
  assert.deepEqual(drawn, Array.from({ length: 21 }, (_, s) => 4 / (1 + s) ** 2));
  // The y axis spans the decades, labelled at 1, 2 and 5 times a power of ten.
  const yLabels = (await page.$eval(chart('tag:loss'), (f) => f.uplot.axes[1]._values)).filter(Boolean);
  assert.ok(yLabels.includes('0.01') && yLabels.includes('1'), JSON.stringify(yLabels));
  // The other charts stay as they were: one choice per chart.
  assert.equal((await scaleOf('tag:margin')).distr, 1);

  // margin: (step - 5) / 10, so steps 0..5 are 0 or below: gaps, and said.
  await page.locator(`${chart('tag:margin')} [data-testid=log-toggle]`).check();
  await page.waitForFunction((sel) => document.querySelector(sel)?.uplot?.scales.y.distr === 3, chart('tag:margin'));
  assert.equal(await page.locator(`${chart('tag:margin')} [data-testid=log-note]`).innerText(), '6 values at or below 0 not drawn on the log scale.');
  const margin = await page.$eval(chart('tag:margin'), (f) => f.uplot.data[1]);
  assert.deepEqual(margin, Array.from({ length: 21 }, (_, s) => (s <= 5 ? null : (s - 5) / 10)));
  // zero: nothing a log scale can draw; it stays linear and says so.
  await page.locator(`${chart('tag:zero')} [data-testid=log-toggle]`).check();
  await page.locator(`${chart('tag:zero')} [data-testid=log-note]`).filter({ hasText: 'No value above 0: drawn on a linear scale.' }).waitFor();
  assert.equal((await scaleOf('tag:zero')).distr, 1);
  await page.locator('[data-testid=training]').screenshot({ path: screenshotPath('charts-log-scale.png') });

  // Remembered by the browser: after a reload, and for the next experiment's
  // chart of the same tag.
  await page.reload();
  await page.waitForFunction((sel) => document.querySelector(sel)?.uplot?.scales.y.distr === 3, chart('tag:loss'), { timeout: 30000 });
  assert.deepEqual(await scaleOf('tag:loss'), { distr: 3, log: 'true', checked: true });
  // Unchecked: linear again, and forgotten.
  await page.locator(`${chart('tag:loss')} [data-testid=log-toggle]`).uncheck();
  await page.waitForFunction((sel) => document.querySelector(sel)?.uplot?.scales.y.distr === 1, chart('tag:loss'));
  const kept = await page.evaluate(() => JSON.parse(localStorage.getItem('tfslurm.logScaleCharts')));
  assert.deepEqual(kept.sort(), ['tag:margin', 'tag:zero']);

  // The charts come before the log tail, which is a section of its own.
  const order = await page.evaluate(() => {
    const training = document.querySelector('[data-testid=training]');
    const log = document.querySelector('[data-testid=log-panel]');
    return {
      chartsFirst: Boolean(training.compareDocumentPosition(log) & Node.DOCUMENT_POSITION_FOLLOWING),
      logInTasks: Boolean(log.closest('[data-testid=tasks]')),
    };
  });
  assert.deepEqual(order, { chartsFirst: true, logInTasks: false });
  await page.close();
});

test('running and waiting apart; time used and left against the limit of a running job', { timeout: 240000 }, async () => {
  // Every node's whole memory, so that the next job waits.
  const busy = 'ev-busy';
  await submit({
    id: busy,
    command: ['sleep', '300'],
    cluster: { worker: 3 },
    resources: { partition: 'debug', nodes: 3, tasks_per_node: 1, time_limit: '00:10:00', mem_per_task_mb: 8000 },
    restart: { max_restarts: 0 },
  });
  await waitFor('ev-busy to hold every node', async () => ((await experiment(busy)).slurm_state === 'RUNNING' ? true : null), { timeoutMs: 90000 });
  const queued = 'ev-queued';
  await submit({
    id: queued,
    command: ['true'],
    cluster: { worker: 1 },
    resources: { partition: 'debug', nodes: 1, tasks_per_node: 1, time_limit: '00:05:00' },
  });
  try {
    const list = await newPage();
    await list.goto(`${svc.base}/#/`);
    // The running one in "Running now"; the queued one under "Waiting", with
    // Slurm's reason, and not in "Running now".
    await list.waitForFunction(
      ([b, q]) =>
        document.querySelector(`[data-testid=running] tr[data-id="${b}"]`)?.dataset.state === 'running' &&
        /pending in Slurm as job \d+: \w+/.test(document.querySelector(`[data-testid=waiting] tr[data-id="${q}"] [data-label="Why it waits"]`)?.textContent ?? ''),
      [busy, queued],
      { timeout: 90000 },
    );
    assert.equal(await list.locator(`[data-testid=running] tr[data-id="${queued}"]`).count(), 0, 'the queued one is not in "Running now"');
    assert.equal(await list.locator(`[data-testid=waiting] tr[data-id="${busy}"]`).count(), 0);
    assert.equal(await list.locator(`[data-testid=waiting] tr[data-id="${queued}"]`).getAttribute('data-state'), 'queued');
    assert.match(await list.locator('#waiting-title').innerText(), /Waiting \(1\)/);
    assert.match(await list.locator('#running-title').innerText(), /Running now \(1\)/);
    await list.screenshot({ path: screenshotPath('list-running-and-waiting.png') });
    await list.close();

    // The running one's page: time used and left of its 10 minutes.
    const page = await newPage();
    await page.goto(`${svc.base}/#/experiments/${busy}`);
    const box = page.locator('[data-testid=time-limit]');
    await box.locator('[data-testid=time-left]').waitFor({ timeout: 30000 });
    const used = await box.locator('[data-testid=time-used]').innerText();
    const left = await box.locator('[data-testid=time-left]').innerText();
    assert.match(used, /^\d+(\.\d)? s used of 10 min$|^\d+ min used of 10 min$/, used);
    assert.match(left, /^\d+ (s|min) left$/, left);
    const [usedS, limitS] = await box.evaluate((b) => [Number(b.dataset.usedS), Number(b.dataset.limitS)]);
    assert.equal(limitS, 600);
    // Counted from the job's start, as Slurm counts its limit.
    const started = Date.parse((await experiment(busy)).attempts.at(-1).started_at);
    const expected = (Date.now() - started) / 1000;
    assert.ok(Math.abs(usedS - expected) <= 5, `used ${usedS} s, the job started ${expected} s ago`);
    assert.equal(await box.locator('meter').getAttribute('max'), '600');
    // It moves with the polling, without a reload.
    await page.waitForFunction((before) => Number(document.querySelector('[data-testid=time-limit]').dataset.usedS) >= before + 2, usedS, { timeout: 15000 });
    await page.locator('section[aria-label=Summary]').screenshot({ path: screenshotPath('experiment-time-limit.png') });
    // Not shown once the job has ended.
    await api(svc.base, 'DELETE', `/experiments/${busy}`);
    await page.waitForFunction(() => document.querySelector('[data-testid=time-limit]').hidden, null, { timeout: 30000 });
    await page.close();
  } finally {
    await api(svc.base, 'DELETE', `/experiments/${queued}`).catch(() => {});
    await api(svc.base, 'DELETE', `/experiments/${busy}`).catch(() => {});
  }
});

test('two tasks with the same typo: both show their own exit 127 and its cause, neither reads "reaped"', { timeout: 180000 }, async () => {
  const id = 'ev-typo';
  await submit({
    id,
    command: ['trian.py'],
    cluster: { worker: 2 },
    resources: { partition: 'debug', nodes: 2, tasks_per_node: 1, time_limit: '00:10:00' },
    restart: { max_restarts: 0 },
  });
  await waitState(id, 'failed');
  const exp = await waitFor('both tasks to have ended', async () => {
    const e = await experiment(id);
    return e.tasks.every((t) => t.exit_code !== null && t.exit_code !== undefined) ? e : null;
  });
  const cause = "cannot run 'trian.py': No such file or directory";
  for (const t of exp.tasks) {
    assert.equal(t.state, 'failed', `${t.role}:${t.index} ended on its own: ${JSON.stringify(t)}`);
    assert.equal(t.exit_code, 127);
    assert.ok(t.detail.startsWith(cause), t.detail);
  }
  assert.ok(!exp.events.some((e) => e.what === 'reaped'), JSON.stringify(exp.events.map((e) => `${e.what}: ${e.why}`)));
  const page = await newPage();
  await page.goto(`${svc.base}/#/experiments/${id}`);
  await page.waitForFunction(() => document.querySelectorAll('[data-testid=tasks] tr[data-state=failed]').length === 2, null, { timeout: 30000 });
  for (const key of ['worker:0', 'worker:1']) {
    const row = page.locator(`[data-testid=tasks] tr[data-task="${key}"]`);
    assert.match(await row.innerText(), /✗ failed/);
    assert.doesNotMatch(await row.innerText(), /reaped/);
    assert.match(await row.locator('[data-label=Exit]').innerText(), new RegExp(`^✗ 127\\s+${cause.replace(/[.'()]/g, '\\$&')}`));
  }
  await page.screenshot({ path: screenshotPath('experiment-two-typos.png'), fullPage: true });
  await page.close();
});

test('a spare node is shown as a spare in the task table, waiting, with no program', { timeout: 180000 }, async () => {
  const id = 'ev-spare';
  await submit({
    id,
    command: ['sleep', '300'],
    cluster: { worker: 2 },
    resources: { partition: 'debug', nodes: 2, tasks_per_node: 1, spare_nodes: 1, time_limit: '00:10:00' },
    restart: { max_restarts: 0 },
  });
  await waitState(id, 'running');
  const exp = await waitFor('the spare to wait', async () => {
    const e = await experiment(id);
    return e.spares.length === 1 && e.spares[0].waiting ? e : null;
  });
  const taskNodes = exp.tasks.map((t) => t.node);
  assert.ok(!taskNodes.includes(exp.spares[0].node), `the spare runs no task: ${JSON.stringify(exp.tasks)}`);
  const page = await newPage();
  await page.goto(`${svc.base}/#/experiments/${id}`);
  const spareRow = page.locator('[data-testid=tasks] tr[data-testid=spare-row]');
  await spareRow.waitFor({ timeout: 30000 });
  assert.equal(await spareRow.count(), 1);
  const text = await spareRow.innerText();
  assert.match(text, /spare/);
  assert.match(text, new RegExp(exp.spares[0].node));
  assert.match(await spareRow.locator('[data-label=State]').innerText(), /waiting/);
  assert.equal(await page.locator('[data-testid=tasks] tr[data-task]').count(), 2, 'the two workers as before');
  assert.match(await page.locator('body').innerText(), /2 nodes × 1 tasks \+ 1 spare node ·/);
  await page.screenshot({ path: screenshotPath('experiment-spare-node.png'), fullPage: true });
  await page.close();
  await api(svc.base, 'DELETE', `/experiments/${id}`);
});
