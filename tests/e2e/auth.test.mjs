// The dashboard against a tfslurmd that checks bearer tokens (made with
// `tfslurmd token create`, docs/security.md): the page asks for a token once,
// a refused token is said to be refused, a real one lists, shows and cancels
// its user's experiments, and another user's experiment is answered as a
// missing one (404: the answer does not tell that the id exists).
//
//   node --test tests/e2e/auth.test.mjs   (tests/e2e/install.sh first)
import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, test } from 'node:test';
import {
  actionOutcome,
  api,
  launchBrowser,
  linearPsSpec,
  screenshotPath,
  slurmJob,
  startCluster,
  startService,
  waitFor,
} from './harness.mjs';

let cluster;
let svc;
let browser;
// Script errors of the pages the current test opened: the test fails on
// them (afterEach), not a last test that passes for want of pages when run
// alone.
let pageErrors = [];
beforeEach(() => {
  pageErrors = [];
});
afterEach(() => {
  assert.deepEqual(pageErrors, [], 'script errors on the pages of this test');
});
const BAD_TOKEN = `tfs_${'0'.repeat(64)}`;

before(
  async () => {
    cluster = await startCluster();
    svc = await startService(cluster.conf, {
      auth: true,
      tokens: { alice: {}, bob: {}, ops: { admin: true } },
      name: 'tfslurmd-auth',
    });
    browser = await launchBrowser();
  },
  { timeout: 240000 },
);

after(
  async () => {
    if (svc) {
      const token = svc.tokens.ops;
      const open = await api(svc.base, 'GET', '/experiments?state=queued,starting,running,restarting', null, { token }).catch(() => null);
      for (const e of open?.body?.experiments ?? []) await api(svc.base, 'DELETE', `/experiments/${e.id}`, null, { token }).catch(() => {});
    }
    await browser?.close();
    await svc?.stop();
    await cluster?.stop();
  },
  { timeout: 180000 },
);

test('with real tokens: asked once, a bad token refused, the right one lists, shows and cancels', { timeout: 240000 }, async () => {
  const { alice, bob, ops } = svc.tokens;
  // The API itself: no token and a bad token are 401, the right one is 200.
  assert.equal((await api(svc.base, 'GET', '/experiments')).status, 401);
  assert.equal((await api(svc.base, 'GET', '/experiments', null, { token: BAD_TOKEN })).status, 401);
  assert.equal((await api(svc.base, 'GET', '/experiments', null, { token: alice })).status, 200);

  // Bob's experiment, cancelled before it runs, and alice's, left running.
  const bobs = await api(svc.base, 'POST', '/experiments', linearPsSpec('e2e-auth-bob', { steps: 1000000 }), { token: bob });
  assert.equal(bobs.status, 201, JSON.stringify(bobs.body));
  assert.equal((await api(svc.base, 'DELETE', '/experiments/e2e-auth-bob', null, { token: bob })).status, 200);
  const id = 'e2e-auth-alice';
  const alices = await api(svc.base, 'POST', '/experiments', linearPsSpec(id, { steps: 1000000, stepSleep: 0.2 }), { token: alice });
  assert.equal(alices.status, 201, JSON.stringify(alices.body));
  assert.equal(alices.body.owner, 'alice');

  const page = await browser.context.newPage();
  const errors = pageErrors;
  page.on('pageerror', (e) => errors.push(`${page.url()}: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) errors.push(`${page.url()}: ${m.text()}`);
  });
  // Every token form the page ever opens is counted.
  await page.addInitScript(() => {
    window.__tokenForms = 0;
    new MutationObserver((changes) => {
      for (const c of changes) for (const n of c.addedNodes) if (n.dataset?.testid === 'token-dialog') window.__tokenForms++;
    }).observe(document, { childList: true, subtree: true });
  });
  const statuses = [];
  // The body of each list the page received (GET /experiments), and the
  // token it carried.
  const lists = [];
  page.on('response', async (r) => {
    const url = new URL(r.url());
    if (!url.pathname.startsWith('/experiments')) return;
    statuses.push(r.status());
    if (url.pathname === '/experiments' && r.request().method() === 'GET' && r.status() === 200) {
      const token = (await r.request().headerValue('authorization'))?.replace(/^Bearer /, '');
      lists.push({ token, ids: (await r.json()).experiments.map((e) => e.id) });
    }
  });

  // The front page makes two calls at once; both are refused, one form opens.
  await page.goto(`${svc.base}/`);
  const form = page.locator('[data-testid=token-dialog]');
  await form.waitFor();
  await waitFor('both first calls refused', () => statuses.filter((s) => s === 401).length >= 2, { intervalMs: 100 });
  assert.equal(await form.count(), 1);
  assert.equal(await page.evaluate(() => window.__tokenForms), 1);
  assert.match(await form.innerText(), /asks for a bearer token/);

  // A bad token: tfslurmd refuses it, and the form says so.
  await form.locator('input').fill(BAD_TOKEN);
  await form.locator('button[value=save]').click();
  await page.waitForFunction(() => /refused the stored token \(401\)/.test(document.querySelector('[data-testid=token-dialog]')?.textContent ?? ''));
  assert.equal(await form.count(), 1);
  await page.screenshot({ path: screenshotPath('token-refused.png') });

  // Alice's token: her experiment is listed, bob's is not.
  await form.locator('input').fill(alice);
  await form.locator('button[value=save]').click();
  await page.locator(`[data-testid=all] tr[data-id="${id}"]`).waitFor();
  assert.equal(await form.count(), 0);
  assert.equal(await page.evaluate(() => localStorage.getItem('tfslurm.token')), alice);
  assert.match(await page.locator('#token-area').innerText(), /token set/);
  // Bob's experiment is not alice's to see: not in any list tfslurmd gave her
  // token, and not on the page once a list has been drawn after a later one
  // arrived (the page shows what its last list said, whole).
  const listsBefore = lists.length;
  await waitFor('a list drawn after a later poll', async () => {
    if (lists.length <= listsBefore) return false;
    const shown = await page.$$eval('[data-testid=all] tbody tr[data-id]', (rows) => rows.map((r) => r.dataset.id));
    return JSON.stringify(shown.sort()) === JSON.stringify([...lists.at(-1).ids].sort()) ? shown : false;
  }, { intervalMs: 100 });
  const alicesLists = lists.filter((l) => l.token === alice);
  assert.ok(alicesLists.length >= 2, JSON.stringify(lists));
  for (const l of alicesLists) assert.deepEqual(l.ids, [id], "alice's lists hold her experiment only");
  assert.equal(await page.locator('[data-testid=all] tr[data-id="e2e-auth-bob"]').count(), 0, "bob's experiment is not alice's to see");

  // The token is kept: after a reload no form opens and no call is refused.
  statuses.length = 0;
  await page.reload();
  await page.locator(`[data-testid=all] tr[data-id="${id}"]`).waitFor();
  await page.click(`a.exp-link[href$="${id}"]`);
  await page.waitForFunction(
    () => document.querySelectorAll('[data-testid=tasks] tbody tr[data-state=running]').length === 6,
    null,
    { timeout: 90000 },
  );
  assert.equal(await page.evaluate(() => window.__tokenForms), 0, 'a form opened after the reload');
  assert.ok(statuses.length >= 4 && statuses.every((s) => s === 200), `statuses with the stored token: ${statuses}`);

  // Cancel with alice's token: confirmed, the badge and Slurm agree.
  const jobId = (await api(svc.base, 'GET', `/experiments/${id}`, null, { token: alice })).body.slurm_job_id;
  assert.equal((await slurmJob(cluster.conf, jobId))?.JobState, 'RUNNING');
  await page.click('[data-testid=cancel]');
  const dialog = page.locator('[data-testid=confirm-dialog]');
  await dialog.locator('button[value=confirm]').click();
  // The action's line is the DELETE's answer; the badge can turn first, by
  // the page's own poll.
  assert.match(await actionOutcome(page, 'Cancel'), /^✓ Cancelled/);
  await page.waitForFunction(
    () => document.querySelector('[data-testid=exp-state] .badge')?.dataset.state === 'cancelled',
    null,
    { timeout: 30000 },
  );
  const exp = (await api(svc.base, 'GET', `/experiments/${id}`, null, { token: ops })).body;
  assert.equal(exp.state, 'cancelled');
  assert.match(exp.reason, /cancelled by alice/);
  await waitFor(`Slurm job ${jobId} to be cancelled`, async () => {
    const job = await slurmJob(cluster.conf, jobId);
    return job === null || job.JobState === 'CANCELLED';
  });

  // Bob's experiment by its address: shown as an id that does not exist
  // (tfslurmd answers 404, as for a missing id), not a blank page.
  await page.goto(`${svc.base}/#/experiments/e2e-auth-bob`);
  await page.getByText(`No experiment "e2e-auth-bob"`).waitFor();
  assert.match(await page.locator('body').innerText(), /no experiment with id 'e2e-auth-bob'/);
  assert.doesNotMatch(await page.locator('body').innerText(), /belongs to another user/);
  assert.equal(await page.evaluate(() => window.__tokenForms), 0, 'a 404 is not a reason to ask for a token');
  const outage = (text) => page.locator('#outage [role=alert]', { hasText: text });

  // A stored token that stops working (revoked, say) is refused visibly: the
  // form says so; dismissed, the page says it is not updating and why, with a
  // button to enter another.
  await page.evaluate((t) => localStorage.setItem('tfslurm.token', t), BAD_TOKEN);
  await page.goto(`${svc.base}/#/`);
  await form.waitFor();
  assert.match(await form.innerText(), /refused the stored token/);
  await form.locator('button[value=cancel]').click();
  await outage('the token is not valid').waitFor();
  assert.equal(await page.locator('#outage [role=alert]').count(), 1);
  assert.match(await page.locator('#live-status').innerText(), /not updating/);
  await page.screenshot({ path: screenshotPath('token-not-valid.png') });
  await page.click('#outage button:text-is("Enter token")');
  await form.locator('input').fill(alice);
  await form.locator('button[value=save]').click();
  await page.locator(`[data-testid=all] tr[data-id="${id}"]`).waitFor();
  await page.waitForFunction(() => !document.querySelector('#outage').firstChild);

  // "forget" drops it; the next call asks again.
  await page.click('#token-area button');
  assert.equal(await page.evaluate(() => localStorage.getItem('tfslurm.token')), null);
  await form.waitFor();
  await page.close();
});
