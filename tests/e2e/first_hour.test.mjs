// What a new user's first hour tripped on (issue 48), in headless Chromium
// against real tfslurmd and Slurm: Enter in the token form saves the token,
// and a missing token is said once; the key is drawn, not an emoji; the
// header's clock has a 24-hour time and its zone; restart markers sit at the
// step an attempt resumed from, and their names do not overlap when
// restarts come close together; a sweep's trial names do not wrap, and the
// table shows where a stopped trial stopped.
//
//   node --test tests/e2e/first_hour.test.mjs   (tests/e2e/install.sh first)
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { api, launchBrowser, REPO, screenshotPath, startCluster, startService, waitFor } from './harness.mjs';
import { formatClockWithZone } from '../../web/ui/format.js';
import { attemptStarts, attemptStartsOf } from '../../web/ui/scalars.js';
import { labelRow } from '../../web/ui/views/charts.js';

let cluster;
let open; // tfslurmd --no-auth
let guarded; // tfslurmd with tokens
let browser;
const pageErrors = [];

before(
  async () => {
    cluster = await startCluster();
    open = await startService(cluster.conf, { name: 'first-hour-tfslurmd' });
    guarded = await startService(cluster.conf, { auth: true, tokens: { alice: {} }, name: 'first-hour-auth-tfslurmd' });
    browser = await launchBrowser();
  },
  { timeout: 240000 },
);

after(
  async () => {
    for (const svc of [open, guarded]) {
      if (!svc) continue;
      const token = svc.tokens.alice;
      const running = await api(svc.base, 'GET', '/experiments?state=queued,starting,running,restarting', null, { token }).catch(() => null);
      for (const e of running?.body?.experiments ?? []) await api(svc.base, 'DELETE', `/experiments/${e.id}`, null, { token }).catch(() => {});
    }
    await browser?.close();
    await open?.stop();
    await guarded?.stop();
    await cluster?.stop();
  },
  { timeout: 180000 },
);

async function newPage({ width = 1280, height = 800 } = {}) {
  const page = await browser.context.newPage();
  await page.setViewportSize({ width, height });
  page.on('pageerror', (e) => pageErrors.push(`${page.url()}: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) pageErrors.push(`${page.url()}: ${m.text()}`);
  });
  return page;
}

test('pure helpers: the clock with its zone, restarts where the attempt resumed, label rows', () => {
  // The harness's browser runs in UTC, and so does this process's TZ in CI;
  // the zone comes from the Date either way.
  const ms = Date.UTC(2026, 10, 28, 0, 28, 25);
  const d = new Date(ms);
  const p = (n) => String(n).padStart(2, '0');
  assert.match(formatClockWithZone(ms), new RegExp(`^${p(d.getHours())}:28:25 UTC`));
  assert.doesNotMatch(formatClockWithZone(ms), /AM|PM/);
  // Attempt 2 resumed from checkpoint step 300 and first reported 310.
  const starts = attemptStartsOf([
    { number: 1, start_step: null, started_at: '2026-11-28T00:00:00.000Z' },
    { number: 2, start_step: 300, started_at: '2026-11-28T00:00:10.500Z' },
    { number: 3, start_step: null, started_at: null },
  ]);
  assert.deepEqual(
    attemptStarts([10, 20, 310, 320, 5, 15], [1, 1, 2, 2, 3, 3], starts.steps),
    [
      { attempt: 2, x: 300 },
      { attempt: 3, x: 5 },
    ],
    'the checkpoint step when the service knows it, else the first reported step',
  );
  assert.equal(starts.times.get(2), Date.UTC(2026, 10, 28, 0, 0, 10, 500) / 1000);
  // Labels: a box that overlaps one in row 0 goes to row 1, then 2.
  const placed = [{ x0: 0, x1: 60, row: 0 }];
  assert.equal(labelRow(placed, { x0: 100, x1: 160 }, 5), 0, 'clear of it: the same row');
  assert.equal(labelRow(placed, { x0: 30, x1: 90 }, 5), 1);
  placed.push({ x0: 30, x1: 90, row: 1 });
  assert.equal(labelRow(placed, { x0: 50, x1: 110 }, 5), 2);
  assert.equal(labelRow(placed, { x0: 50, x1: 110 }, 2), 0, 'every row taken: the least crowded');
});

test('every character the dashboard draws is in DejaVu Sans: no emoji font needed', () => {
  // Debian's Chromium brings DejaVu; an emoji (U+1F511, a key) or U+23F8
  // (pause) shows as an empty box where no emoji font is installed.
  const ui = path.join(REPO, 'web/ui');
  const files = [];
  const walk = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (e.name === 'vendor') continue;
      if (e.isDirectory()) walk(path.join(dir, e.name));
      else if (/\.(js|html|css)$/.test(e.name)) files.push(path.join(dir, e.name));
    }
  };
  walk(ui);
  const chars = new Map();
  for (const f of files) for (const ch of readFileSync(f, 'utf8')) if (ch.codePointAt(0) > 127 && !chars.has(ch)) chars.set(ch, path.relative(REPO, f));
  assert.ok(chars.size > 5, 'the check reads the dashboard');
  const missing = [];
  for (const [ch, file] of chars) {
    const hex = ch.codePointAt(0).toString(16);
    const fonts = execFileSync('fc-list', [`:family=DejaVu Sans:charset=${hex}`, 'family'], { encoding: 'utf8' });
    if (!fonts.trim()) missing.push(`U+${hex.toUpperCase().padStart(4, '0')} ${ch} (${file})`);
  }
  assert.deepEqual(missing, [], 'characters DejaVu Sans does not have: draw them (web/ui/icons.js)');
});

test('the token form: Enter saves the token, a dismissed form is said once, the key is drawn', { timeout: 180000 }, async () => {
  const token = guarded.tokens.alice;
  const id = 'e2e-first-hour-token';
  const created = await api(guarded.base, 'POST', '/experiments', { id, command: ['sleep', '600'], cluster: { worker: 1 }, resources: { partition: 'debug', time_limit: '00:10:00' } }, { token });
  assert.equal(created.status, 201, JSON.stringify(created.body));

  const page = await newPage();
  await page.goto(`${guarded.base}/`);
  const form = page.locator('[data-testid=token-dialog]');
  await form.waitFor();
  // The key is an inline SVG, in the form's title; no emoji anywhere.
  assert.equal(await form.locator('h2 svg[data-icon=key]').count(), 1);
  assert.doesNotMatch(await page.evaluate(() => document.body.innerText), /\u{1F511}/u);

  // Enter with an empty field: the field is required, nothing is dismissed.
  await form.locator('input').press('Enter');
  await page.waitForTimeout(300);
  assert.equal(await form.count(), 1, 'Enter on an empty field keeps the form open');
  assert.equal(await page.evaluate(() => localStorage.getItem('tfslurm.token')), null);

  // "Not now": the page says once that it needs a token, with the button.
  await form.locator('button[value=cancel]').click();
  await page.locator('#outage [role=alert]', { hasText: 'needs a token' }).waitFor();
  await page.waitForTimeout(2000); // a poll or two more
  const banners = await page.locator('.notice-bad:visible').allInnerTexts();
  assert.equal(banners.length, 1, `one red banner, not one per section: ${JSON.stringify(banners)}`);
  await page.screenshot({ path: screenshotPath('first-hour-token-dismissed.png') });

  // The banner's button opens the form; the token typed and Enter: saved.
  await page.click('#outage button:text-is("Enter token")');
  await form.locator('input').fill(token);
  await form.locator('input').press('Enter');
  await page.locator(`[data-testid=all] tr[data-id="${id}"]`).waitFor();
  assert.equal(await form.count(), 0);
  assert.equal(await page.evaluate(() => localStorage.getItem('tfslurm.token')), token);
  await page.waitForFunction(() => !document.querySelector('#outage').firstChild);
  assert.equal(await page.locator('#token-area svg[data-icon=key]').count(), 1);
  assert.match(await page.locator('#token-area').innerText(), /token set/);

  // The header's clock: 24-hour, with its zone, as every time on the page.
  await page.waitForFunction(() => /live ·/.test(document.querySelector('#live-status').textContent));
  assert.match(await page.locator('#live-status').innerText(), /^● live · \d\d:\d\d:\d\d UTC$/);
  await page.locator('header.top').screenshot({ path: screenshotPath('first-hour-header.png') });
  await page.close();
  assert.equal((await api(guarded.base, 'DELETE', `/experiments/${id}`, null, { token })).status, 200);
});

test('restarts: markers at the step each attempt resumed from, their names apart', { timeout: 240000 }, async () => {
  const id = 'e2e-first-hour-restarts';
  const created = await api(open.base, 'POST', '/experiments', {
    id,
    command: ['/usr/bin/python3', path.join(REPO, 'tests/e2e/programs/restart_twice.py'), '--steps', '400', '--fail-at', '350', '--every', '10', '--pause', '0.02'],
    cluster: { worker: 1 },
    resources: { partition: 'debug', nodes: 1, tasks_per_node: 1, time_limit: '00:10:00' },
    restart: { max_restarts: 2, on: ['retryable_exit'], backoff_s: 0 },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const page = await newPage();
  await page.goto(`${open.base}/#/experiments/${id}`);
  await page.waitForFunction(() => document.querySelector('[data-testid=exp-state] .badge')?.dataset.state === 'succeeded', null, { timeout: 180000 });
  const exp = (await api(open.base, 'GET', `/experiments/${id}`)).body;
  assert.deepEqual(exp.attempts.map((a) => [a.number, a.start_step, a.in_place]), [
    [1, null, false],
    [2, 300, true],
    [3, 300, true],
  ]);
  // The in-place restarts said they came at once, not after a backoff.
  const restarts = exp.events.filter((e) => e.what === 'state' && /restarted in place/.test(e.why)).map((e) => e.why);
  assert.equal(restarts.length, 2, JSON.stringify(exp.events.map((e) => [e.what, e.why])));
  for (const why of restarts) assert.match(why, /restart \d of 2, at once; attempt \d in Slurm job \d+, restarted in place/);

  // The loss chart: attempts 2 and 3 first reported step 310, and are
  // marked at 300, where they resumed; said so in words too.
  const loss = '[data-testid=charts] figure[data-tag="loss"]';
  await page.waitForFunction((sel) => document.querySelector(sel)?.dataset.attempts === '1,2,3', loss, { timeout: 30000 });
  assert.deepEqual(JSON.parse(await page.$eval(loss, (f) => f.dataset.markers)), [
    { attempt: 2, x: 300 },
    { attempt: 3, x: 300 },
  ]);
  assert.match(await page.locator(`${loss} .chart-restarts`).innerText(), /↻ attempt 2 from step 300, ↻ attempt 3 from step 300/);

  // Both restarts are at step 300 on the loss chart, and a second or two
  // apart on the steps-per-second chart's time axis: where two names would
  // meet, they are drawn on different rows, on a desktop and on a phone.
  const rate = '[data-testid=rate-chart]';
  await page.waitForFunction((sel) => document.querySelector(sel)?.dataset.attempts === '1,2,3', rate, { timeout: 30000 });
  const labelsOf = (sel) => page.$eval(sel, (f) => JSON.parse(f.querySelector('.uplot').dataset.markerLabels || '[]'));
  for (const [width, height] of [[1280, 800], [390, 844]]) {
    await page.setViewportSize({ width, height });
    await page.waitForTimeout(500); // the charts' resize and redraw
    await page.locator('[data-testid=training]').screenshot({ path: screenshotPath(`first-hour-restart-markers-${width}.png`) });
    for (const sel of [loss, rate]) {
      const labels = await labelsOf(sel);
      assert.equal(labels.length, 2, `${sel} at ${width}px: a name per restart: ${JSON.stringify(labels)}`);
      const [a, b] = labels;
      const overlap = a.x0 < b.x1 && b.x0 < a.x1;
      assert.ok(!overlap || a.row !== b.row, `${sel} at ${width}px: names drawn over each other: ${JSON.stringify(labels)}`);
    }
  }
  const onLoss = await labelsOf(loss);
  assert.notEqual(onLoss[0].row, onLoss[1].row, 'two restarts at one step: one name under the other');
  await page.close();
});

test('a sweep at 1280x800: trial names on one line, and where a stopped trial stopped', { timeout: 300000 }, async () => {
  const TRAIN = path.join(REPO, 'examples/linear_ps/train.py');
  const created = await api(open.base, 'POST', '/sweeps', {
    id: 'fh',
    experiment: {
      command: ['python3', TRAIN, '--steps=60', '--log-every=5', '--checkpoint-every=30', '--step-sleep=0.05'],
      workdir: path.join(REPO, 'examples/linear_ps'),
      cluster: { ps: 1, worker: 1 },
      resources: { partition: 'debug', nodes: 1, tasks_per_node: 2, time_limit: '00:10:00' },
      restart: { max_restarts: 0 },
    },
    parameters: { 'arg.--lr': { values: [0.2, 0.0001, 0.00005] } },
    search: { type: 'grid', order: 'listed' },
    max_concurrent: 1,
    objective: { tag: 'loss', goal: 'min' },
    early_stopping: { rule: 'asha', rungs: [15], reduction_factor: 2 },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const done = await waitFor(
    'the sweep to complete',
    async () => {
      const r = await api(open.base, 'GET', '/sweeps/fh');
      return r.body.state === 'completed' ? r.body : null;
    },
    { timeoutMs: 240000, intervalMs: 1000 },
  );
  const stopped = done.trials.filter((t) => t.end_reason === 'stopped_early');
  assert.ok(stopped.length >= 1, JSON.stringify(done.trials));

  const page = await newPage({ width: 1280, height: 800 });
  await page.goto(`${open.base}/#/sweeps/fh`);
  const rows = page.locator('[data-testid="sweep-trials"] tbody tr');
  await waitFor('the trials', async () => (await rows.count()) === 3);
  // The best trial's name with its star stays on one line.
  const cell = page.locator('[data-testid="sweep-trials"] tr.best-trial td.trial-id');
  const { lines, whiteSpace, text } = await cell.evaluate((td) => {
    const range = document.createRange();
    range.selectNodeContents(td);
    return {
      lines: new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top))).size,
      whiteSpace: getComputedStyle(td).whiteSpace,
      text: td.innerText,
    };
  });
  assert.equal(lines, 1, `"${text}" is drawn on one line (white-space: ${whiteSpace})`);
  assert.match(text, /^★ fh-\d$/);
  // Step (its rung) and last step (where its programs stopped).
  const headers = await page.locator('[data-testid="sweep-trials"] thead th').allInnerTexts();
  assert.ok(headers.includes('Step') && headers.includes('Last step'), headers.join('|'));
  for (const t of stopped) {
    const shown = await page.locator(`[data-testid="sweep-trials"] tr[data-trial="${t.index}"] [data-testid=last-step]`).innerText();
    assert.equal(shown, String(t.last_step), `trial ${t.index}'s last step`);
    assert.ok(t.last_step >= t.objective_step, JSON.stringify(t));
  }
  await page.screenshot({ path: screenshotPath('first-hour-sweep.png'), fullPage: true });
  await page.close();
});

test('no script errors', () => {
  assert.deepEqual(pageErrors, []);
});
