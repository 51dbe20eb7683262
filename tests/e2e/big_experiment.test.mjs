// End-to-end test of issue 49, point 5: the dashboard stays usable for an
// experiment of 16,384 tasks (a store seeded with its rows by
// programs/seed_big_experiment.py; no cluster runs that many). The task
// table shows a page of 100 with a pager, and a filter by state finds the
// one rank that failed among 16,384; the page asks tfslurmd for that page
// only (GET /experiments/{id}?tasks_limit=100), never every task.
// Screenshots: tests/e2e/screenshots/big-experiment-page.png (the second
// page of 100) and big-experiment-failed.png (the filter on failed).
//
//   node --test tests/e2e/big_experiment.test.mjs   (tests/e2e/install.sh first)
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { HERE, api, launchBrowser, screenshotPath, startCluster, startService, waitFor } from './harness.mjs';

const execFileAsync = promisify(execFile);
const N = 16384;
const ID = 'big-16k';
const KILLED = N / 2 + 3; // the seed's failed rank

let cluster;
let svc;
let browser;

before(
  async () => {
    cluster = await startCluster();
    svc = await startService(cluster.conf, {
      name: 'tfslurmd-big-experiment',
      seed: (db) =>
        execFileAsync('/usr/bin/python3', [path.join(HERE, 'programs', 'seed_big_experiment.py'), db, ID, String(N)], {
          timeout: 60000,
        }),
    });
    browser = await launchBrowser();
  },
  { timeout: 240000 },
);

after(
  async () => {
    await browser?.close();
    await svc?.stop();
    await cluster?.stop();
  },
  { timeout: 120000 },
);

test('GET /experiments/{id} pages the tasks and counts them all', async () => {
  const whole = await api(svc.base, 'GET', `/experiments/${ID}`);
  assert.equal(whole.status, 200);
  assert.equal(whole.body.tasks.length, N);
  assert.equal(whole.body.tasks_total, N);
  const page = await api(svc.base, 'GET', `/experiments/${ID}?tasks_offset=200&tasks_limit=100`);
  assert.equal(page.body.tasks.length, 100);
  assert.equal(page.body.tasks[0].proc_id, 200);
  assert.equal(page.body.tasks_total, N);
  assert.equal(page.body.task_counts.rank.total, N);
  const failed = await api(svc.base, 'GET', `/experiments/${ID}?task_state=failed`);
  assert.deepEqual(
    failed.body.tasks.map((t) => t.proc_id),
    [KILLED],
  );
  const bad = await api(svc.base, 'GET', `/experiments/${ID}?task_state=sleeping`);
  assert.equal(bad.status, 400);
  assert.equal(bad.body.error.fields[0].field, 'task_state');
});

test('the dashboard shows 16,384 tasks a page at a time and finds the failed one', async () => {
  const page = await browser.context.newPage();
  await page.setViewportSize({ width: 1360, height: 1000 });
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  const asked = [];
  page.on('request', (r) => {
    if (new URL(r.url()).pathname === `/experiments/${ID}`) asked.push(r.url());
  });
  await page.goto(`${svc.base}/#/experiments/${ID}`);
  const rows = page.locator('[data-testid=tasks] tbody tr[data-task]');
  await waitFor('the first page of tasks', async () => (await rows.count()) === 100, { timeoutMs: 30000 });
  assert.equal(await rows.first().getAttribute('data-task'), 'rank:0');
  const pager = page.locator('[data-testid=task-pager]');
  assert.match(await pager.innerText(), /1–100 of 16384/);
  // Every poll asked for a page, none for every task.
  assert.ok(asked.length > 0);
  for (const url of asked) assert.match(url, /tasks_limit=100/, url);

  await pager.getByRole('button', { name: 'Next →' }).click();
  await waitFor('the second page', async () => (await rows.first().getAttribute('data-task')) === 'rank:100', { timeoutMs: 30000 });
  assert.match(await pager.innerText(), /101–200 of 16384/);
  await page.evaluate(() => document.querySelector('[data-testid=tasks]').scrollIntoView());
  await page.screenshot({ path: screenshotPath('big-experiment-page.png') });

  await page.locator('[data-testid=task-filter]').selectOption('failed');
  await waitFor('the failed rank alone', async () => (await rows.count()) === 1, { timeoutMs: 30000 });
  assert.equal(await rows.first().getAttribute('data-task'), `rank:${KILLED}`);
  assert.equal(await rows.first().getAttribute('data-state'), 'failed');
  // The log panel turns to the task that failed.
  await waitFor('the log panel on the failed rank', async () => (await page.locator('#log-task').inputValue()) === `rank:${KILLED}`, {
    timeoutMs: 30000,
  });
  await page.locator('[data-testid=task-filter]').selectOption('');
  await waitFor('every state again, from the first page', async () => (await rows.count()) === 100, { timeoutMs: 30000 });
  await page.locator('[data-testid=task-filter]').selectOption('failed');
  await waitFor('the failed rank alone again', async () => (await rows.count()) === 1, { timeoutMs: 30000 });
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: screenshotPath('big-experiment-failed.png') });
  assert.deepEqual(errors, []);
  await page.close();
});
