// End-to-end tests of the dashboard (issue 6): a real local Slurm cluster, a
// real tfslurmd with the linear_ps example, and Debian's headless Chromium.
// Screenshots land in tests/e2e/screenshots/.
//
//   node --test tests/e2e/         (tests/e2e/install.sh first)
//   TFSLURM_SLURM_CONF=... to use a running cluster instead of starting one.
//   TFSLURM_BIN_DIR=DIR for tfslurmd and tfslurm-agent (default build/bin).
//   TFSLURM_E2E_DOCS_SCREENSHOTS=1 to also write the README's pictures,
//   docs/dashboard.png, docs/dashboard-running.png and
//   docs/dashboard-training.png, from this run.
//   TFSLURM_TF_PYTHON=... the TensorFlow python (deploy/install-tf.sh; tests/
//   run.sh exports it) for the training-chart test with real tf.summary
//   scalars; without it that test is skipped.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, afterEach, before, beforeEach, test } from 'node:test';
import {
  REPO,
  actionOutcome,
  api,
  launchBrowser,
  linearPsSpec,
  publishDocsScreenshot,
  screenshotPath,
  slurmJob,
  squeueState,
  startCluster,
  startService,
  waitFor,
} from './harness.mjs';

let cluster;
let svc;
let browser;
// Script errors of the pages the current test opened: each test fails on
// its own pages' errors (afterEach), so that none passes for want of pages,
// as a last "no script errors" test did when run alone.
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
    svc = await startService(cluster.conf);
    browser = await launchBrowser();
  },
  { timeout: 240000 },
);

after(
  async () => {
    // Nothing may keep running on the cluster after the tests.
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

// A page that records script errors (failed requests are fine: a task's log
// is a 404 until it writes). Tokens: auth.test.mjs, against a tfslurmd that
// checks them.
async function newPage({ width = 1360, height = 900 } = {}) {
  const page = await browser.context.newPage();
  await page.setViewportSize({ width, height });
  const errors = pageErrors; // this test's, even if an event comes late
  page.on('pageerror', (e) => errors.push(`${page.url()}: ${e.message}`));
  // Console errors other than failed fetches (a CSP refusal, say) count too.
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

// The task table as the page shows it: [{task, state, node, address, exit}].
function taskTable(page) {
  return page.$$eval('[data-testid=tasks] tbody tr[data-task]', (rows) =>
    rows.map((r) => ({
      task: r.dataset.task,
      state: r.dataset.state,
      node: r.querySelector('[data-label=Node]').textContent.trim(),
      address: r.querySelector('[data-label=Address]').textContent.trim(),
      exit: r.querySelector('[data-label=Exit]').textContent.trim(),
    })),
  );
}

// Waits until `read()` (a cell's text) shows "step N" with N > 0; returns N.
async function checkpointStep(read, where) {
  const text = await waitFor(`a checkpoint step above 0 on ${where}`, async () => {
    const t = await read();
    return Number(/step (\d+)/.exec(t)?.[1]) > 0 ? t : null;
  }, { timeoutMs: 30000, intervalMs: 200 });
  return Number(/step (\d+)/.exec(text)[1]);
}

// The log panel's text once it matches `pattern` (a log, not a placeholder
// or an error).
async function logPanelText(page, pattern, timeout = 20000) {
  const handle = await page.waitForFunction(
    (source) => {
      const t = document.querySelector('[data-testid=log]')?.textContent ?? '';
      return new RegExp(source).test(t) && t;
    },
    pattern.source,
    { timeout },
  );
  return handle.jsonValue();
}

async function waitState(id, state, timeoutMs = 180000) {
  return waitFor(`${id} to be ${state}`, async () => ((await experiment(id)).state === state ? true : null), { timeoutMs });
}

// Experiments that several tests look at, each made by the first test that
// needs it, so that every test also runs alone (node --test
// --test-name-pattern): one that succeeded, one cancelled, and e2e-failed
// (linear_ps with worker 1 failing at step 30).
const made = new Map();
function once(id, make) {
  if (!made.has(id)) made.set(id, make());
  return made.get(id);
}
const succeededExperiment = () =>
  once('e2e-done', async () => {
    await submit({
      id: 'e2e-done',
      command: ['true'],
      cluster: { worker: 1 },
      resources: { partition: 'debug', nodes: 1, tasks_per_node: 1, time_limit: '00:05:00' },
    });
    await waitState('e2e-done', 'succeeded');
    return 'e2e-done';
  });
const cancelledExperiment = () =>
  once('e2e-stopped', async () => {
    await submit({
      id: 'e2e-stopped',
      command: ['sleep', '300'],
      cluster: { worker: 1 },
      resources: { partition: 'debug', nodes: 1, tasks_per_node: 1, time_limit: '00:05:00' },
    });
    assert.equal((await api(svc.base, 'DELETE', '/experiments/e2e-stopped')).status, 200);
    await waitState('e2e-stopped', 'cancelled');
    return 'e2e-stopped';
  });
const failedExperiment = () =>
  once('e2e-failed', async () => {
    await submit(linearPsSpec('e2e-failed', { steps: 2000, stepSleep: 0.05, extra: ['--fail-at-step', '30', '--fail-task', 'worker:1', '--fail-code', '1'] }));
    await waitState('e2e-failed', 'failed');
    return 'e2e-failed';
  });

const badgeState = (page) =>
  page.$eval('[data-testid=exp-state] .badge', (b) => b.dataset.state).catch(() => '');

test('tfslurmd serves the dashboard with content types and caching headers', async () => {
  const index = await fetch(`${svc.base}/`);
  assert.equal(index.status, 200);
  assert.match(index.headers.get('content-type'), /^text\/html/);
  assert.equal(index.headers.get('cache-control'), 'no-cache');
  assert.match(index.headers.get('content-security-policy'), /default-src 'self'/);
  const html = await index.text();
  assert.match(html, /<script type="module" src="\/ui\/app.js">/);
  assert.doesNotMatch(html, /https?:\/\//, 'the page must not load anything from elsewhere');

  const js = await fetch(`${svc.base}/ui/app.js`);
  assert.equal(js.status, 200);
  assert.match(js.headers.get('content-type'), /^text\/javascript/);
  assert.equal(js.headers.get('x-content-type-options'), 'nosniff');
  const etag = js.headers.get('etag');
  assert.match(etag, /^"[0-9a-f]{32}"$/);
  const again = await fetch(`${svc.base}/ui/app.js`, { headers: { 'If-None-Match': etag } });
  assert.equal(again.status, 304);

  for (const [file, type] of [
    ['style.css', /^text\/css/],
    ['favicon.svg', /^image\/svg\+xml/],
    ['views/list.js', /^text\/javascript/],
    ['vendor/uplot/uPlot.esm.js', /^text\/javascript/],
    ['vendor/uplot/uPlot.min.css', /^text\/css/],
  ]) {
    const r = await fetch(`${svc.base}/ui/${file}`);
    assert.equal(r.status, 200, file);
    assert.match(r.headers.get('content-type'), type, file);
    // What tfslurmd embedded is the file in web/ui/ (uPlot's copy included).
    const served = Buffer.from(await r.arrayBuffer());
    assert.ok(served.equals(readFileSync(path.join(REPO, 'web/ui', file))), `${file} as served differs from web/ui/${file}`);
  }
  const missing = await api(svc.base, 'GET', '/ui/no-such-file.js');
  assert.equal(missing.status, 404);
  assert.equal(missing.body.error.code, 'not_found');

  // The API's routes are untouched.
  assert.deepEqual((await api(svc.base, 'GET', '/healthz')).body, { status: 'ok' });
  assert.ok(Array.isArray((await api(svc.base, 'GET', '/experiments')).body.experiments));
});

test('a linear_ps run: listed while running, tasks fill in, ps reaped, succeeded without a reload', { timeout: 240000 }, async () => {
  const id = 'e2e-linear-ps';
  const list = await newPage();
  await list.goto(`${svc.base}/`);
  await list.locator('[data-testid=running] tbody').waitFor();
  await list.evaluate(() => (window.__sameDocument = true));

  // The experiment page, opened before the experiment exists (the tasks of a
  // warm cluster can register within a second of the submit), samples its
  // task table every 200 ms to prove that it fills in live.
  const page = await newPage();
  await page.goto(`${svc.base}/#/experiments/${id}`);
  await page.getByText(`No experiment "${id}"`).waitFor();
  await page.evaluate(() => {
    window.__sameDocument = true;
    window.__samples = [];
    setInterval(() => {
      const rows = [...document.querySelectorAll('[data-testid=tasks] tbody tr[data-task]')];
      window.__samples.push(rows.map((r) => r.dataset.state));
    }, 200);
  });

  await submit(linearPsSpec(id, { steps: 600, stepSleep: 0.15 }));
  await page.locator('[data-testid=exp-state] .badge').waitFor();

  // The running view lists it, with its Slurm job and live counts per role.
  // (On a warm cluster the tasks can register before tfslurmd's next Slurm
  // poll has filled in the nodes: wait for both.)
  const row = list.locator(`[data-testid=running] tr[data-id="${id}"]`);
  await row.waitFor({ timeout: 30000 });
  await list.waitForFunction(
    (id) => {
      const r = document.querySelector(`[data-testid=running] tr[data-id="${id}"]`);
      return (
        r &&
        r.dataset.state === 'running' &&
        r.querySelector('[data-role=worker] .n-running')?.textContent === '4' &&
        r.querySelector('[data-label=Nodes]')?.textContent !== '—'
      );
    },
    id,
    { timeout: 90000 },
  );
  const cells = await row.locator('td').allInnerTexts();
  const exp = await experiment(id);
  assert.ok(exp.slurm_job_id, 'the API knows the Slurm job');
  assert.ok(cells.some((c) => c.includes(String(exp.slurm_job_id))), `Slurm job id in ${cells}`);
  assert.ok(cells.some((c) => c.includes('node[1-3]')), `nodes in ${cells}`);
  assert.ok(cells.some((c) => /ps\s*2\/2\/0/.test(c)), `ps counts in ${cells}`);
  const cell = (label) => row.locator(`td[data-label="${label}"]`).innerText();
  assert.equal((await cell('Attempt')).trim(), '1');
  assert.match(await cell('Age'), /^\d+(\.\d)? (s|min)$/, 'age');
  // The checkpoint column follows training while the experiment runs.
  const listStep = await checkpointStep(() => cell('Checkpoint'), 'the running view');
  assert.equal(await row.getAttribute('data-state'), 'running', `still running at checkpoint step ${listStep}`);
  await list.screenshot({ path: screenshotPath('running-view.png') });

  // The task table fills in: every task with its node and address, running.
  await page.waitForFunction(
    () => {
      const rows = [...document.querySelectorAll('[data-testid=tasks] tbody tr[data-task]')];
      return rows.length === 6 && rows.every((r) => r.dataset.state === 'running');
    },
    null,
    { timeout: 60000 },
  );
  const running = await taskTable(page);
  for (const t of running) {
    assert.match(t.node, /^node[1-3]$/, `${t.task} node`);
    assert.match(t.address, /:\d+$/, `${t.task} address`);
  }
  assert.deepEqual(running.map((t) => t.task).sort(), ['ps:0', 'ps:1', 'worker:0', 'worker:1', 'worker:2', 'worker:3']);
  // The summary shows the latest checkpoint step, as the API reports it.
  const pageStep = await checkpointStep(
    () =>
      page.evaluate(() => [...document.querySelectorAll('.facts dt')].find((dt) => dt.textContent === 'Checkpoint')?.nextElementSibling.textContent ?? ''),
    'the experiment page',
  );
  const apiCheckpoint = (await experiment(id)).checkpoint;
  assert.ok(apiCheckpoint && apiCheckpoint.step >= pageStep, `API checkpoint ${JSON.stringify(apiCheckpoint)}`);
  await page.waitForTimeout(1000); // a log line or two, for the pictures
  await page.screenshot({ path: screenshotPath('experiment-running.png'), fullPage: true });
  // The README's pictures (docs/, with TFSLURM_E2E_DOCS_SCREENSHOTS=1, once
  // this test has passed): this page and the running view, mid-run.
  await page.screenshot({ path: screenshotPath('dashboard.png') });

  // Succeeded, without a reload; the ps were reaped, the workers exited 0.
  await page.waitForFunction(
    () => document.querySelector('[data-testid=exp-state] .badge')?.dataset.state === 'succeeded',
    null,
    { timeout: 150000 },
  );
  await page.waitForFunction(
    () => document.querySelectorAll('[data-testid=tasks] tbody tr[data-state=reaped]').length === 2,
    null,
    { timeout: 30000 },
  );
  const done = await taskTable(page);
  for (const t of done) {
    if (t.task.startsWith('ps:')) {
      assert.equal(t.state, 'reaped', `${t.task}: ${JSON.stringify(t)}`);
      const badge = await page.locator(`tr[data-task="${t.task}"] .badge`).innerText();
      assert.match(badge, /reaped/);
    } else {
      assert.equal(t.state, 'succeeded', `${t.task}: ${JSON.stringify(t)}`);
      assert.equal(t.exit, '0');
    }
  }
  // Empty before the submit, then six running tasks, in the same document.
  const samples = await page.evaluate(() => window.__samples);
  assert.deepEqual(samples[0], [], 'task rows before the submit');
  assert.ok(
    samples.some((s) => s.length === 6 && s.every((st) => st === 'running')),
    `never six running tasks: ${JSON.stringify(samples.filter((s) => s.length).slice(0, 3))}`,
  );
  assert.equal(await page.evaluate(() => window.__sameDocument), true, 'the experiment page was reloaded');
  assert.match(await page.locator('[data-testid=reason]').innerText(), /Succeeded/);
  // The Slurm job completes once the reaped ps have exited: attempt 1's row
  // names its Slurm job and job name, and the end.
  await page.waitForFunction(() => /COMPLETED/.test(document.querySelector('[data-testid=attempts]').textContent), null, {
    timeout: 60000,
  });
  const attempt1 = page.locator('[data-testid=attempts] tbody tr[data-attempt="1"]');
  assert.equal(await page.locator('[data-testid=attempts] tbody tr[data-attempt]').count(), 1);
  assert.match(
    await attempt1.locator('td[data-label="Slurm job"]').innerText(),
    new RegExp(`^${exp.slurm_job_id}\\s+tfx-e2e-linear-ps-a1$`),
  );
  assert.match(await attempt1.locator('td[data-label=State]').innerText(), /^succeeded\s+Slurm: COMPLETED$/);
  assert.equal(await attempt1.locator('td[data-label=Nodes]').innerText(), 'node[1-3]');
  assert.match(await page.locator('[data-testid=sbatch]').innerText(), /#SBATCH --job-name=tfx-e2e-linear-ps-a1/);
  assert.match(await page.locator('[data-testid=spec]').innerText(), /"worker": 4/);
  const events = await page.locator('[data-testid=events] li').allInnerTexts();
  assert.ok(events.some((e) => /reaped/.test(e)), `a reaped event in ${events.join(' | ')}`);
  // Checkpoints in a row are one line, with the latest step and how many.
  const checkpoints = (await experiment(id)).events.filter((e) => e.what === 'checkpoint');
  assert.ok(checkpoints.length > 1, `several checkpoint events: ${JSON.stringify(checkpoints)}`);
  const shownCheckpoints = await page.locator('[data-testid=events] li[data-what=checkpoint]').allInnerTexts();
  assert.ok(shownCheckpoints.length < checkpoints.length, `folded: ${shownCheckpoints.join(' | ')}`);
  assert.ok(shownCheckpoints[0].includes(checkpoints.at(-1).why), `the newest first: ${shownCheckpoints[0]}`);
  assert.match(shownCheckpoints.join(' '), /latest of \d+ checkpoints since \d{4}-\d{2}-\d{2} /);
  // The log panel shows worker 0's tail by default: the program's own lines.
  assert.equal(await page.locator('#log-task').inputValue(), 'worker:0');
  const workerLog = await logPanelText(page, /linear_ps: /);
  assert.match(workerLog, /^linear_ps: role=worker index=0 attempt=1\b/m, `worker:0 log: ${workerLog.slice(0, 300)}`);
  assert.match(workerLog, /^linear_ps: done step=\d+/m, `worker:0 log ends with its last step: ${workerLog.slice(-300)}`);
  assert.doesNotMatch(workerLog, /role=ps/);
  // Choosing ps 0 in the selector shows that task's log instead.
  await page.selectOption('#log-task', 'ps:0');
  const psLog = await logPanelText(page, /role=ps/);
  assert.match(psLog, /^linear_ps: role=ps index=0 attempt=1 listening=/m, `ps:0 log: ${psLog.slice(0, 300)}`);
  assert.doesNotMatch(psLog, /role=worker/);
  assert.equal(await page.locator('tr[data-task="ps:0"] button[aria-pressed=true]').count(), 1, 'ps 0 marked as shown');
  await page.screenshot({ path: screenshotPath('experiment-succeeded.png'), fullPage: true });

  // The front page moved it from "Running now" to the finished ones.
  await list.waitForFunction(
    (id) =>
      !document.querySelector(`[data-testid=running] tr[data-id="${id}"]`) &&
      document.querySelector(`[data-testid=all] tr[data-id="${id}"]`)?.dataset.state === 'succeeded',
    id,
    { timeout: 15000 },
  );
  assert.equal(await list.evaluate(() => window.__sameDocument), true, 'the front page was reloaded');
  await list.close();
  await page.close();
  publishDocsScreenshot('dashboard.png', 'dashboard.png');
  publishDocsScreenshot('running-view.png', 'dashboard-running.png');
});

test('cancel from the UI asks first, then cancels the Slurm job', { timeout: 180000 }, async (t) => {
  const id = 'e2e-cancel';
  await submit(linearPsSpec(id, { steps: 1000000, stepSleep: 0.2 }));
  // Whatever happens below, nothing of it runs on into the next tests (the
  // narrow-window test counts the running experiments): attempt 2, or
  // attempt 1 when the cancel itself failed. A DELETE of what already ended
  // is refused, which changes nothing.
  t.after(() => api(svc.base, 'DELETE', `/experiments/${id}`).catch(() => {}));
  const page = await newPage();
  await page.goto(`${svc.base}/#/experiments/${id}`);
  await page.waitForFunction(
    () => document.querySelectorAll('[data-testid=tasks] tbody tr[data-state=running]').length === 6,
    null,
    { timeout: 90000 },
  );
  const jobId = (await experiment(id)).slurm_job_id;
  assert.ok(jobId);
  assert.equal((await slurmJob(cluster.conf, jobId))?.JobState, 'RUNNING');

  // Backing out of the confirmation changes nothing: the page sends no
  // DELETE (its own record of requests, not a wait for one that may come).
  const deletes = [];
  page.on('request', (r) => r.method() === 'DELETE' && deletes.push(r.url()));
  await page.click('[data-testid=cancel]');
  const dialog = page.locator('[data-testid=confirm-dialog]');
  await dialog.waitFor();
  assert.match(await dialog.innerText(), new RegExp(`Slurm job ${jobId} is cancelled`));
  await dialog.locator('button[value=cancel]').click();
  await dialog.waitFor({ state: 'detached' });
  assert.deepEqual(deletes, [], 'backing out sent a DELETE');
  assert.equal((await experiment(id)).state, 'running');

  await page.click('[data-testid=cancel]');
  await dialog.locator('button[value=confirm]').click();
  // The page's own poll can show the badge cancelled before the DELETE's
  // answer arrives (tfslurmd records the cancel, then asks slurmctld to
  // cancel the job, then answers): the action's line is its answer.
  assert.match(await actionOutcome(page, 'Cancel'), /^✓ Cancelled: the experiment is now cancelled/);
  await page.waitForFunction(
    () => document.querySelector('[data-testid=exp-state] .badge')?.dataset.state === 'cancelled',
    null,
    { timeout: 30000 },
  );
  assert.equal(await page.locator('[data-testid=cancel]').isVisible(), false);
  assert.equal(await page.locator('[data-testid=resume]').isVisible(), true);

  // Slurm agrees: the job is CANCELLED (or already forgotten).
  const final = await waitFor(
    `Slurm job ${jobId} to be cancelled`,
    async () => {
      const job = await slurmJob(cluster.conf, jobId);
      if (job === null) return 'gone';
      return job.JobState === 'CANCELLED' ? job.JobState : null;
    },
    { timeoutMs: 60000 },
  );
  assert.ok(['CANCELLED', 'gone'].includes(final));
  assert.ok(['CANCELLED', ''].includes(await squeueState(cluster.conf, jobId)));
  await page.screenshot({ path: screenshotPath('experiment-cancelled.png'), fullPage: true });

  // Resume asks first, then submits attempt 2 as a new Slurm job. tfslurmd
  // answers "retry in a few seconds" until it has seen attempt 1's job leave
  // Slurm, which the attempts table shows as the attempt's end.
  await waitFor('attempt 1 to end', async () => (await experiment(id)).attempts.at(-1).state === 'ended');
  await page.click('[data-testid=resume]');
  await dialog.waitFor();
  assert.match(await dialog.innerText(), /Resume e2e-cancel\?/);
  assert.match(await dialog.innerText(), /attempt 2/);
  await dialog.locator('button[value=confirm]').click();
  assert.match(await actionOutcome(page, 'Resume'), /✓ Resumed: the experiment is now (queued|starting|running)/);
  const resumed = await waitFor('attempt 2 with its Slurm job', async () => {
    const e = await experiment(id);
    return e.attempt === 2 && e.slurm_job_id ? e : null;
  });
  assert.notEqual(resumed.slurm_job_id, jobId, 'a new Slurm job');
  // The page shows it without a reload: attempt 2 on top of the attempts
  // table with its own Slurm job, and the Cancel button back.
  await page.locator('[data-testid=attempts] tr[data-attempt="2"]').waitFor({ timeout: 15000 });
  assert.ok(
    (await page.locator('[data-testid=attempts] tr[data-attempt="2"] [data-label="Slurm job"]').innerText()).includes(String(resumed.slurm_job_id)),
  );
  await page.waitForFunction(() => !document.querySelector('[data-testid=cancel]').hidden);
  await page.close();
});

// A new page on experiment `id`, once its badge says failed.
async function openWhenFailed(id) {
  const page = await newPage();
  await page.goto(`${svc.base}/#/experiments/${id}`);
  await page.waitForFunction(
    () => document.querySelector('[data-testid=exp-state] .badge')?.dataset.state === 'failed',
    null,
    { timeout: 120000 },
  );
  return page;
}

test('a failed experiment shows its reason on both pages', { timeout: 240000 }, async () => {
  const [id, done, stopped] = [await failedExperiment(), await succeededExperiment(), await cancelledExperiment()];
  const page = await openWhenFailed(id);
  const exp = await experiment(id);
  assert.equal(exp.state, 'failed');
  assert.ok(exp.reason, 'the API gives a reason');
  const banner = page.locator('[data-testid=reason]');
  assert.equal(await banner.getAttribute('role'), 'alert');
  const bannerText = await banner.innerText();
  assert.match(bannerText, /✗ Failed/);
  assert.ok(bannerText.includes(exp.reason), `banner "${bannerText}" lacks "${exp.reason}"`);
  // The failed task is marked with an icon and words, not only a color.
  const worker1 = page.locator('[data-testid=tasks] tr[data-task="worker:1"]');
  await page.waitForFunction(() => document.querySelector('tr[data-task="worker:1"]')?.dataset.state === 'failed');
  assert.match(await worker1.innerText(), /✗ failed/);
  assert.match(await worker1.locator('[data-label=Exit]').innerText(), /✗ 1/);
  // The log panel opens on the task that failed, whose log says why.
  await page.waitForFunction(() => document.querySelector('#log-task')?.value === 'worker:1', null, { timeout: 15000 });
  const failedLog = await logPanelText(page, /role=worker index=1/);
  assert.match(failedLog, /^linear_ps: role=worker index=1 attempt=1\b/m, `worker:1 log: ${failedLog.slice(0, 300)}`);
  // The attempt's row: its Slurm job, marked failed, with the attempt's reason.
  const attempt = await waitFor('attempt 1 to end', async () => {
    const a = (await experiment(id)).attempts.at(-1);
    return a.state === 'ended' ? a : null;
  });
  assert.ok(attempt.reason, `the API gives the attempt a reason: ${JSON.stringify(attempt)}`);
  const attemptRow = page.locator('[data-testid=attempts] tbody tr[data-attempt="1"]');
  // The reason can show while the attempt is still being stopped; the row
  // turns bad once the page has polled the attempt as ended.
  await page.waitForFunction(
    (reason) => {
      const row = document.querySelector('[data-testid=attempts] tr[data-attempt="1"]');
      return row?.querySelector('td[data-label=Reason]')?.textContent.includes(reason) && row.classList.contains('tone-row-bad');
    },
    attempt.reason,
    { timeout: 15000 },
  );
  assert.match(await attemptRow.getAttribute('class'), /tone-row-bad/);
  assert.ok((await attemptRow.locator('td[data-label="Slurm job"]').innerText()).startsWith(String(exp.slurm_job_id)));
  assert.ok(attempt.end_reason && attempt.end_reason !== 'succeeded', JSON.stringify(attempt));
  assert.ok((await attemptRow.locator('td[data-label=State]').innerText()).startsWith(`✗ ${attempt.end_reason}`));
  await page.waitForTimeout(1500);
  await page.screenshot({ path: screenshotPath('experiment-failed.png'), fullPage: true });

  // On the front page, a click on the "✗ Failed" chip leaves only failed ones.
  await page.goto(`${svc.base}/#/`);
  const allIds = () => page.$$eval('[data-testid=all] tbody tr[data-id]', (rows) => rows.map((r) => [r.dataset.id, r.dataset.state]));
  await waitFor('the succeeded, cancelled and failed runs in "All experiments"', async () => {
    const ids = (await allIds()).map(([i]) => i);
    return ids.includes(id) && ids.includes(done) && ids.includes(stopped);
  });
  await page.click('[data-testid=all] .filters a[data-filter=failed]');
  await page.waitForFunction(() => location.hash === '#/?state=failed');
  assert.equal(await page.locator('.filters a[data-filter=failed]').getAttribute('aria-current'), 'true');
  const failedOnly = await waitFor('only failed experiments listed', async () => {
    const rows = await allIds();
    return rows.length && rows.every(([, st]) => st === 'failed') ? rows : null;
  });
  assert.ok(failedOnly.some(([i]) => i === id), `${id} in ${JSON.stringify(failedOnly)}`);
  assert.ok(!failedOnly.some(([i]) => i === done || i === stopped), JSON.stringify(failedOnly));
  const row = page.locator(`[data-testid=all] tr[data-id="${id}"]`);
  assert.match(await row.innerText(), /✗ failed/);
  assert.ok((await row.innerText()).includes(exp.reason));
  await page.screenshot({ path: screenshotPath('list-failed.png') });
  // "✓ Succeeded" swaps the list without a reload; "All" brings everyone back.
  await page.evaluate(() => (window.__sameDocument = true));
  await page.click('[data-testid=all] .filters a[data-filter=succeeded]');
  const succeededOnly = await waitFor('only succeeded experiments listed', async () => {
    const rows = await allIds();
    return rows.length && rows.every(([, st]) => st === 'succeeded') ? rows : null;
  });
  assert.ok(succeededOnly.some(([i]) => i === done), JSON.stringify(succeededOnly));
  assert.ok(!succeededOnly.some(([i]) => i === id), JSON.stringify(succeededOnly));
  await page.click('[data-testid=all] .filters a[data-filter=all]');
  await waitFor('every state listed again', async () => {
    const states = new Set((await allIds()).map(([, st]) => st));
    return states.has('failed') && states.has('succeeded') && states.has('cancelled');
  });
  assert.equal(await page.evaluate(() => window.__sameDocument), true, 'the filters reloaded the page');
  await page.close();
});

test('a program that cannot start: the banner and its task say why, and its log opens', { timeout: 180000 }, async () => {
  const id = 'e2e-typo';
  await submit({
    id,
    command: ['trian.py'],
    cluster: { worker: 2 },
    resources: { partition: 'debug', nodes: 2, tasks_per_node: 1, time_limit: '00:10:00' },
    restart: { max_restarts: 0 },
  });
  const page = await openWhenFailed(id);
  const cause = "cannot run 'trian.py': No such file or directory";
  const banner = page.locator('[data-testid=reason]');
  await page.waitForFunction((c) => document.querySelector('[data-testid=reason]')?.textContent.includes(c), cause, { timeout: 15000 });
  assert.match(await banner.innerText(), /exited with code 127: cannot run 'trian\.py': No such file or directory/);
  const exp = await experiment(id);
  const failed = exp.tasks.filter((t) => t.state === 'failed');
  assert.ok(failed.length, JSON.stringify(exp.tasks));
  const key = `${failed[0].role}:${failed[0].index}`;
  const detail = page.locator(`[data-testid=tasks] tr[data-task="${key}"] [data-testid=exit-detail]`);
  assert.ok((await detail.innerText()).startsWith(cause), await detail.innerText());
  await page.waitForFunction((k) => document.querySelector('#log-task')?.value === k, key, { timeout: 15000 });
  const log = await logPanelText(page, /cannot run/);
  assert.ok(log.includes(cause), log.slice(0, 500));
  await page.screenshot({ path: screenshotPath('experiment-cannot-start.png'), fullPage: true });
  await page.close();
});

test('a PyTorch run shows ranks with their local rank, and a rank\'s log', { timeout: 240000 }, async () => {
  const id = 'e2e-ddp';
  await submit({
    id,
    framework: 'pytorch',
    command: ['/usr/bin/python3', path.join(REPO, 'examples/ddp/train.py'), '--steps', '300', '--checkpoint-every', '50', '--step-delay-ms', '20'],
    resources: { partition: 'debug', nodes: 3, tasks_per_node: 2, time_limit: '00:10:00' },
    pytorch: { omp_num_threads: 1 },
    restart: { max_restarts: 0 },
  });
  const page = await newPage();
  await page.goto(`${svc.base}/#/experiments/${id}`);
  // Six rows, rank 0..5, each with the node and LOCAL_RANK the API has.
  const cells = await waitFor('six running ranks', async () => {
    const rows = await page.$$eval('[data-testid=tasks] tbody tr[data-task]', (trs) =>
      trs.map((r) => ({
        task: r.dataset.task,
        state: r.dataset.state,
        cell: r.querySelector('[data-label=Task]').textContent.trim(),
        node: r.querySelector('[data-label=Node]').textContent.trim(),
      })),
    );
    return rows.length === 6 && rows.every((r) => r.state === 'running') ? rows : null;
  }, { timeoutMs: 120000, intervalMs: 200 });
  const tasks = (await experiment(id)).tasks;
  assert.deepEqual(
    cells.map((c) => [c.task, c.cell, c.node]),
    tasks.map((t) => [`rank:${t.index}`, `rank ${t.index} · local ${t.local_rank}`, t.node]),
  );
  assert.deepEqual(tasks.map((t) => t.local_rank), [0, 1, 0, 1, 0, 1]);
  const facts = await page.$eval('dl.facts', (dl) => dl.textContent);
  assert.match(facts, /FrameworkPyTorch · 6 ranks · success: every rank exits 0/);
  assert.doesNotMatch(facts, /Cluster/);
  // The log button of rank 5 shows that rank's own output.
  await page.click('[data-testid=tasks] tr[data-task="rank:5"] [data-label=Log] button');
  const log = await logPanelText(page, /ddp: rank=5 local_rank=1 world=6/, 30000);
  assert.match(log, /ddp: rank=5 local_rank=1 world=6 node_rank=2/);
  await page.screenshot({ path: screenshotPath('pytorch-ranks.png'), fullPage: true });
  await waitFor('the DDP run to succeed', async () => ((await experiment(id)).state === 'succeeded' ? true : null), {
    timeoutMs: 120000,
    intervalMs: 500,
  });
  await page.close();
});

// ---- Training scalars (GET /experiments/{id}/metrics, the Training section)

// What a chart holds, from uPlot's own data (the figure keeps its uPlot
// instance for these tests): [{x, y, attempt}] sorted by (attempt, x), the
// API's order; y null where the value was not finite.
function chartPoints(page, selector) {
  return page.$eval(selector, (fig) => {
    const u = fig.uplot;
    const out = [];
    fig.dataset.attempts.split(',').map(Number).forEach((a, k) =>
      u.data[k + 1].forEach((y, i) => {
        if (y !== undefined) out.push({ x: u.data[0][i], y, attempt: a });
      }),
    );
    return out;
  });
}

// The same from the API's columns.
function apiPoints(cols, x = 'step') {
  return cols[x].map((v, i) => ({ x: v, y: cols.value[i], attempt: cols.attempt[i] }));
}

async function metrics(id) {
  const r = await api(svc.base, 'GET', `/experiments/${id}/metrics`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body;
}

// The latest-values table: {tag: [step, value, attempt]}.
function latestTable(page) {
  return page.$$eval('[data-testid=scalars-latest] tbody tr[data-tag]', (rows) =>
    Object.fromEntries(
      rows.map((r) => [r.dataset.tag, ['Step', 'Value', 'Attempt'].map((l) => r.querySelector(`[data-label=${l}]`).textContent)]),
    ),
  );
}

const chartSel = (tag) => `[data-testid=training] figure[data-tag="${tag}"]`;

test('training scalars of a real TensorFlow program: live charts hold what it wrote and what the API returns', { timeout: 240000 }, async (t) => {
  const tfPython = process.env.TFSLURM_TF_PYTHON;
  if (!tfPython) {
    t.skip('TFSLURM_TF_PYTHON is not set: no TensorFlow to write tf.summary scalars (deploy/install-tf.sh prints its python; tests/run.sh exports it)');
    return;
  }
  const id = 'e2e-tf-scalars';
  const steps = 24;
  const nanStep = 5;
  await submit({
    id,
    command: [tfPython, path.join(REPO, 'tests/e2e/programs/tf_scalars.py'), '--steps', String(steps), '--nan-step', String(nanStep), '--pause', '0.5'],
    env: { TF_CPP_MIN_LOG_LEVEL: '2', TF_NUM_INTRAOP_THREADS: '1' },
    cluster: { worker: 1 },
    resources: { partition: 'debug', nodes: 1, tasks_per_node: 1, time_limit: '00:10:00' },
    restart: { max_restarts: 0 },
  });
  const page = await newPage();
  await page.goto(`${svc.base}/#/experiments/${id}`);
  // Before the program's first scalar: the empty state says where they come from.
  const empty = await page.locator('[data-testid=training-empty]').innerText({ timeout: 30000 });
  assert.match(empty, /No training scalars yet: tfslurm reads TensorBoard event files under MODEL_DIR, or lines of \$TFSLURM_SCALARS_FILE/);

  // The loss chart appears while the experiment runs and grows in place: the
  // same uPlot instance (setData, not a new chart) gets more points.
  const loss = chartSel('train/loss');
  await page.locator(loss).waitFor({ timeout: 90000 });
  await page.waitForFunction((sel) => document.querySelector(sel)?.uplot, loss);
  await page.evaluate((sel) => {
    const fig = document.querySelector(sel);
    fig.uplot.__first = true;
    window.__lossCounts = [];
    setInterval(() => window.__lossCounts.push(document.querySelector(sel)?.uplot?.data[0].length ?? -1), 250);
  }, loss);
  // A picture for the README, mid-run: the badge says running, the charts fill in.
  await page.waitForFunction((sel) => document.querySelector(sel).uplot.data[0].length >= 14, loss, { timeout: 60000 });
  const running = (await experiment(id)).state;
  // Tall enough for the summary, the task and its log, and the charts.
  await page.setViewportSize({ width: 1360, height: 1300 });
  await page.waitForTimeout(500);
  await page.screenshot({ path: screenshotPath('experiment-training.png') });
  await page.setViewportSize({ width: 1360, height: 900 });

  await page.waitForFunction(() => document.querySelector('[data-testid=exp-state] .badge')?.dataset.state === 'succeeded', null, { timeout: 120000 });
  await page.waitForFunction((sel) => document.querySelector(sel).uplot.data[0].length === 24, loss, { timeout: 20000 });
  assert.equal(running, 'running', 'the picture shows a running experiment');

  // The API has every step the program wrote, as float32 (tf.summary's
  // dtype), the NaN as null; learning_rate likewise.
  const m = await metrics(id);
  assert.deepEqual(m.tags.map((x) => x.tag).sort(), ['train/learning_rate', 'train/loss']);
  const series = Object.fromEntries(m.series.map((x) => [x.tag, x]));
  const f32 = Math.fround;
  const range = [...Array(steps).keys()];
  assert.deepEqual(
    apiPoints(series['train/loss']),
    range.map((s) => ({ x: s, y: s === nanStep ? null : f32(2 / (1 + s)), attempt: 1 })),
    'train/loss as the API returns it',
  );
  assert.deepEqual(
    apiPoints(series['train/learning_rate']),
    range.map((s) => ({ x: s, y: f32(0.1 * 0.9 ** s), attempt: 1 })),
    'train/learning_rate as the API returns it',
  );
  // Each chart holds exactly that: the same points, the NaN a gap (null).
  for (const tag of ['train/loss', 'train/learning_rate']) {
    assert.deepEqual(await chartPoints(page, chartSel(tag)), apiPoints(series[tag]), `the ${tag} chart's data`);
    assert.equal(await page.$eval(chartSel(tag), (f) => f.dataset.markers), '[]', `${tag}: one attempt, no restart marker`);
  }
  // Drawn on a canvas of the figure's width.
  const box = await page.$eval(`${loss} canvas`, (c) => [c.width, c.closest('figure').clientWidth]);
  assert.ok(box[0] > 200 && box[0] <= box[1], `canvas ${box[0]}px in a ${box[1]}px figure`);
  // Live, and never rebuilt: the counts only grew, on the first instance.
  const counts = await page.evaluate(() => window.__lossCounts);
  assert.ok(counts[0] >= 1 && counts[0] < steps, `the chart grew while the program ran: ${counts.slice(0, 5)}`);
  assert.ok(counts.every((c, i) => i === 0 || c >= counts[i - 1]), `counts never went back: ${counts}`);
  assert.equal(await page.$eval(loss, (f) => f.uplot.__first), true, 'the loss chart was re-created instead of updated');
  // Steps per second against wall time, when the service has enough points.
  if (m.steps_per_second) {
    assert.deepEqual(await chartPoints(page, '[data-testid=rate-chart]'), apiPoints(m.steps_per_second, 'wall_time'), 'the steps/s chart');
  }
  // The table: the latest value of each tag, as text.
  assert.deepEqual(await latestTable(page), {
    'train/loss': [String(steps - 1), String(Number(f32(2 / steps).toPrecision(4))), '1'],
    'train/learning_rate': [String(steps - 1), String(Number(f32(0.1 * 0.9 ** (steps - 1)).toPrecision(4))), '1'],
  });
  // The TensorBoard command, as the API gives it, with a copy button.
  const exp = await experiment(id);
  assert.equal(m.tensorboard.logdir, exp.model_dir);
  assert.equal(await page.locator('[data-testid=tb-command]').innerText(), m.tensorboard.command);
  await page.locator('[data-testid=tb-copy]').click();
  await page.locator('[data-testid=tensorboard] [role=status]').filter({ hasText: /copied|selected/ }).waitFor();
  await page.close();
  publishDocsScreenshot('experiment-training.png', 'dashboard-training.png');
});

test('a restarted experiment: a line per attempt, "attempt 2" marked where it resumed; many tags: 12 charts, a filter', { timeout: 240000 }, async () => {
  const id = 'e2e-scalars-restart';
  const extra = 15; // 16 tags: more than the 12 charts drawn at first
  await submit({
    id,
    command: ['/usr/bin/python3', path.join(REPO, 'tests/e2e/programs/jsonl_restart.py'), '--steps', '14', '--fail-after', '9', '--resume-from', '6', '--extra-tags', String(extra), '--pause', '0.2'],
    cluster: { worker: 1 },
    resources: { partition: 'debug', nodes: 1, tasks_per_node: 1, time_limit: '00:10:00' },
    restart: { max_restarts: 1, on: ['retryable_exit'], backoff_s: 1 },
  });
  const page = await newPage();
  await page.goto(`${svc.base}/#/experiments/${id}`);
  await page.waitForFunction(() => document.querySelector('[data-testid=exp-state] .badge')?.dataset.state === 'succeeded', null, { timeout: 150000 });
  const exp = await experiment(id);
  assert.equal(exp.attempt, 2, `restarted once: ${exp.reason}`);
  // restart.in_allocation (the default): attempt 2 ran in attempt 1's job,
  // and its row says so under the job.
  assert.ok(exp.attempts[1].in_place && exp.attempts[1].slurm_job_id === exp.attempts[0].slurm_job_id, JSON.stringify(exp.attempts));
  const secondJob = page.locator('[data-testid=attempts] tr[data-attempt="2"] td[data-label="Slurm job"]');
  await page.waitForFunction(() => !!document.querySelector('[data-testid=attempts] tr[data-attempt="2"] [data-in-place]'), null, { timeout: 15000 });
  assert.match(await secondJob.innerText(), /restarted in place/);
  assert.doesNotMatch(await page.locator('[data-testid=attempts] tr[data-attempt="1"] td[data-label="Slurm job"]').innerText(), /in place/);
  const m = await metrics(id);

  // 16 tags: 12 charts (in the API's order: "loss" after the "extra/" ones
  // is not among them), every tag in the table, and a button for the rest.
  const tags = m.tags.map((x) => x.tag);
  assert.equal(tags.length, 1 + extra);
  const charted = () => page.$$eval('[data-testid=charts] figure[data-tag]', (fs) => fs.map((f) => f.dataset.tag));
  await waitFor('12 charts', async () => (await charted()).length === 12);
  assert.deepEqual(await charted(), tags.slice(0, 12));
  const table = await latestTable(page);
  assert.deepEqual(Object.keys(table).sort(), [...tags].sort());
  assert.deepEqual(table.loss, ['13', String(Number((0.8 / 14).toPrecision(4))), '2']);
  assert.match(await page.locator('.charts-more').innerText(), /Charting 12 of 16 tags/);
  await page.click('[data-testid=show-all]');
  await waitFor('all 16 charts', async () => (await charted()).length === 16);
  await page.waitForFunction((sel) => document.querySelector(sel)?.dataset.attempts === '1,2' && document.querySelector(sel).uplot.data[0].length === 14, chartSel('loss'), { timeout: 20000 });

  // The API: attempt 1's steps 0..9, then attempt 2's from its resume at 6.
  const loss = m.series.find((x) => x.tag === 'loss');
  const want = [
    ...[...Array(10).keys()].map((s) => ({ x: s, y: 1 / (1 + s), attempt: 1 })),
    ...[...Array(8).keys()].map((k) => ({ x: 6 + k, y: 0.8 / (7 + k), attempt: 2 })),
  ];
  assert.deepEqual(apiPoints(loss), want, 'loss as the API returns it');
  // The chart: both attempts' points (a line each, overlapping at 6..9) and
  // a marker at attempt 2's first step, said in words under it too.
  assert.deepEqual(await chartPoints(page, chartSel('loss')), want, "the loss chart's data");
  assert.deepEqual(JSON.parse(await page.$eval(chartSel('loss'), (f) => f.dataset.markers)), [{ attempt: 2, x: 6 }]);
  assert.match(await page.locator(`${chartSel('loss')} .chart-restarts`).innerText(), /↻ attempt 2 from step 6/);
  const legend = await page.locator(`${chartSel('loss')} .u-legend`).innerText();
  assert.match(legend, /attempt 1[\s\S]*attempt 2/, `legend: ${legend}`);
  // Steps per second: a line per attempt as well, over wall time.
  if (m.steps_per_second) {
    assert.deepEqual(await chartPoints(page, '[data-testid=rate-chart]'), apiPoints(m.steps_per_second, 'wall_time'), 'the steps/s chart');
  }
  await page.locator(chartSel('loss')).scrollIntoViewIfNeeded();
  await page.screenshot({ path: screenshotPath('experiment-restart-scalars.png'), fullPage: true });

  // The filter narrows the charts and the table alike.
  await page.fill('[data-testid=tag-filter]', 'TAG_1');
  const filtered = tags.filter((x) => x.includes('tag_1'));
  await waitFor('only the tags with "tag_1"', async () => JSON.stringify(await charted()) === JSON.stringify(filtered));
  assert.deepEqual(Object.keys(await latestTable(page)), filtered);
  await page.fill('[data-testid=tag-filter]', '');

  // A narrow window: one chart a row, nothing wider than the window.
  await page.setViewportSize({ width: 420, height: 900 });
  await page.waitForFunction(() => {
    const f = document.querySelector('[data-testid=charts] figure');
    return f && f.querySelector('canvas').getBoundingClientRect().right <= innerWidth;
  });
  await page.waitForTimeout(500);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - innerWidth);
  assert.ok(overflow <= 1, `the page scrolls sideways by ${overflow}px at 420px`);
  const columns = await page.$eval('[data-testid=charts]', (g) => getComputedStyle(g).gridTemplateColumns.split(' ').length);
  assert.equal(columns, 1, 'one chart a row at 420px');
  await page.locator('[data-testid=training]').screenshot({ path: screenshotPath('narrow-training.png') });
  await page.close();
});

test('what a program wrote keeps the page in its own order: bidi and control characters show escaped', { timeout: 180000 }, async () => {
  // Issue 31: a U+202E reverses the text around it; tfslurm refuses it in
  // tags and paths, and the page escapes it wherever it still comes from
  // (program output, rows written before the refusal), as tfctl does.
  const id = 'e2e-bidi';
  await submit({
    id,
    command: ['/bin/sh', '-c', "printf 'step 7 \\342\\200\\256evil\\033]0;TITLE\\007 done\\n'; exec sleep 300"],
    cluster: { worker: 1 },
    resources: { partition: 'debug', nodes: 1, tasks_per_node: 1, time_limit: '00:05:00' },
    restart: { max_restarts: 0 },
  });
  const page = await newPage();
  await page.goto(`${svc.base}/#/experiments/${id}`);
  const text = await logPanelText(page, /done/, 90000);
  assert.ok(text.includes('step 7 \\u202eevil\\x1b]0;TITLE\\x07 done'), text);
  assert.ok(!text.includes('\u202e') && !text.includes('\x1b'), 'no raw override or ESC on the page');
  await api(svc.base, 'DELETE', `/experiments/${id}`);
  await page.close();
});

test('narrow window: no sideways scrolling, tables turn into cards', { timeout: 240000 }, async () => {
  const [failed, done] = [await failedExperiment(), await succeededExperiment()];
  const wide = await newPage();
  await wide.goto(`${svc.base}/`);
  await wide.locator('[data-testid=all] tr[data-id]').first().waitFor();
  await wide.waitForTimeout(1000);
  await wide.screenshot({ path: screenshotPath('list-all.png') });
  await wide.close();

  // At laptop width the same tables are ordinary tables.
  const laptop = await newPage();
  await laptop.goto(`${svc.base}/#/experiments/${failed}`);
  await laptop.locator('[data-testid=tasks] tbody tr[data-task]').first().waitFor();
  const wideLayout = await tableLayout(laptop);
  for (const t of wideLayout) {
    assert.equal(t.theadHeight > 10, true, `${t.table}: the header row shows at 1360px: ${JSON.stringify(t)}`);
    assert.deepEqual([...new Set(t.cells.map((c) => c.display))], ['table-cell'], `${t.table} at 1360px`);
  }
  await laptop.close();

  const page = await newPage({ width: 420, height: 900 });
  // [route, tables with rows]: nothing runs now, so the front page has one.
  for (const [hash, tables] of [['#/', 1], [`#/experiments/${done}`, 2], [`#/experiments/${failed}`, 2]]) {
    await page.goto(`${svc.base}/${hash}`);
    await page.locator('main table tbody tr[data-id], main table tbody tr[data-task]').first().waitFor();
    await page.waitForTimeout(1200);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 1, `${hash} scrolls sideways by ${overflow}px`);
    // Cards: the header row is hidden, each row is a box of its own, and
    // every cell is a line of it that names its column.
    const layout = await tableLayout(page);
    assert.equal(layout.length, tables, `${hash}: tables ${JSON.stringify(layout.map((t) => t.table))}`);
    for (const t of layout) {
      const where = `${hash} ${t.table}`;
      assert.ok(t.theadHeight <= 1, `${where}: the header row shows (${t.theadHeight}px)`);
      assert.ok(['block', 'grid'].includes(t.rowDisplay), `${where}: rows are ${t.rowDisplay}`);
      for (const c of t.cells) {
        assert.equal(c.display, 'block', `${where} ${c.label}: ${c.display}`);
        // Chromium reports the rule (attr(data-label)) or its value.
        assert.ok([JSON.stringify(c.label), 'attr(data-label)'].includes(c.before), `${where} ${c.label}: ::before is ${c.before}`);
        assert.ok(c.right <= 421, `${where} ${c.label}: ends at ${c.right}px`);
      }
    }
  }
  // The task cards hold two columns of fields.
  const taskCard = await page.$eval('[data-testid=tasks] tbody tr[data-task]', (tr) => getComputedStyle(tr).gridTemplateColumns);
  assert.equal(taskCard.split(' ').length, 2, `task card columns: ${taskCard}`);
  await page.screenshot({ path: screenshotPath('narrow-experiment-failed.png'), fullPage: true });
  await page.close();
});

// How each responsive table on the page is laid out: its header row's height,
// its first data row's display, and each cell's display, ::before label and
// right edge.
function tableLayout(page) {
  return page.$$eval('main table.responsive', (tables) =>
    tables
      .map((table) => {
        const row = table.querySelector('tbody tr[data-id], tbody tr[data-task], tbody tr[data-attempt]');
        if (!row) return null;
        return {
          table: table.className,
          theadHeight: table.querySelector('thead').getBoundingClientRect().height,
          rowDisplay: getComputedStyle(row).display,
          cells: [...row.querySelectorAll('td[data-label]')].map((td) => ({
            label: td.dataset.label,
            display: getComputedStyle(td).display,
            before: getComputedStyle(td, '::before').content,
            right: Math.round(td.getBoundingClientRect().right),
          })),
        };
      })
      .filter(Boolean),
  );
}

// How many polls (each starts with GET /experiments/ID) the page began after
// `since`, on its own clock (performance.now()), from its resource timings:
// the browser's record, so a request it sent before `since` never counts.
// A poll of the experiment's view asks for one page of its tasks
// (?tasks_offset=...): its URL is `url` with a query.
const sameView = (requested, url) => requested.split('?')[0] === url;

function pollsSince(page, url, since) {
  return page.evaluate(
    ({ url, since }) =>
      performance.getEntriesByType('resource').filter((e) => e.name.split('?')[0] === url && e.startTime > since).length,
    { url, since },
  );
}

// No fixed waits: a hidden tab is watched for as long as a visible tab on the
// same view takes to poll three times (on a loaded machine that is longer,
// and the check stays as strict), and the shown tab is waited on until it has
// polled twice.
test('polling stops while the tab is hidden and resumes when shown', { timeout: 240000 }, async () => {
  const id = await succeededExperiment();
  const url = `${svc.base}/experiments/${id}`;
  const page = await newPage();
  await page.goto(`${svc.base}/#/experiments/${id}`);
  await page.evaluate(() => performance.setResourceTimingBufferSize(100000));
  await page.locator('[data-testid=tasks] tbody tr[data-task]').first().waitFor();
  // Returns the page's clock when the change took effect.
  const setHidden = (hidden) =>
    page.evaluate((hidden) => {
      Object.defineProperty(document, 'hidden', { configurable: true, get: () => hidden });
      Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => (hidden ? 'hidden' : 'visible') });
      document.dispatchEvent(new Event('visibilitychange'));
      return performance.now();
    }, hidden);
  const hiddenAt = await setHidden(true);
  assert.match(await page.locator('#live-status').innerText(), /paused/);

  const control = await newPage();
  let controlPolls = 0;
  control.on('request', (r) => sameView(r.url(), url) && controlPolls++);
  await control.goto(`${svc.base}/#/experiments/${id}`);
  await waitFor('a visible tab on the same view to poll 3 times', () => controlPolls >= 3, { timeoutMs: 120000 });
  await control.close();
  assert.equal(await pollsSince(page, url, hiddenAt), 0, `polls of the hidden tab while a visible one polled ${controlPolls} times`);
  assert.match(await page.locator('#live-status').innerText(), /paused/);

  const shownAt = await setHidden(false);
  await waitFor('the tab to poll twice once shown', async () => (await pollsSince(page, url, shownAt)) >= 2, { timeoutMs: 120000 });
  assert.match(await page.locator('#live-status').innerText(), /live/);
  await page.close();
});
