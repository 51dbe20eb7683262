// The dashboard over HTTPS (issue 45, point 4): tfslurmd with the
// certificate `tfslurmd tls init` made, and Chromium trusting its key. The
// page and every call it makes go over https://, the token asked for is
// kept in the browser's storage only (no cookie, nothing in a URL), and the
// plain http:// address of the TLS port says to use https://.
//
//   node --test tests/e2e/tls.test.mjs   (tests/e2e/install.sh first)
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { launchBrowser, screenshotPath, startCluster, startService } from './harness.mjs';

let cluster;
let svc;
let browser;

before(
  async () => {
    cluster = await startCluster();
    svc = await startService(cluster.conf, { auth: true, tokens: { alice: {} }, name: 'tfslurmd-tls', tls: true });
    browser = await launchBrowser({ trustSpki: svc.tls.spki });
  },
  { timeout: 240000 },
);

after(
  async () => {
    await browser?.close();
    await svc?.stop();
    await cluster?.stop();
  },
  { timeout: 180000 },
);

test('over HTTPS: every call is https, the token stays in the browser storage', { timeout: 180000 }, async () => {
  assert.match(svc.base, /^https:\/\/127\.0\.0\.1:\d+$/);
  const page = await browser.context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  const requests = [];
  page.on('request', (r) => requests.push({ url: r.url(), authorization: r.headers().authorization ?? null }));
  const statuses = [];
  page.on('response', (r) => {
    if (new URL(r.url()).pathname === '/experiments') statuses.push(r.status());
  });

  await page.goto(`${svc.base}/`);
  const form = page.locator('[data-testid=token-dialog]');
  await form.waitFor();
  await form.locator('input').fill(svc.tokens.alice);
  await form.locator('button[value=save]').click();
  await page.waitForFunction(() => !document.querySelector('[data-testid=token-dialog]'));
  await page.waitForFunction(() => document.querySelector('#token-area')?.textContent.includes('token set'));
  await page.screenshot({ path: screenshotPath('tls-dashboard.png') });
  assert.ok(statuses.includes(200), `GET /experiments over TLS: ${statuses}`);

  // Everything the page loaded and called went to the TLS port.
  assert.ok(requests.length >= 3, JSON.stringify(requests));
  for (const r of requests) assert.ok(r.url.startsWith(`${svc.base}/`), `a request not over https: ${r.url}`);
  // The token: in localStorage, sent only as a header, never in a URL or a cookie.
  assert.equal(await page.evaluate(() => localStorage.getItem('tfslurm.token')), svc.tokens.alice);
  assert.equal(await page.evaluate(() => document.cookie), '');
  assert.deepEqual(await browser.context.cookies(), []);
  for (const r of requests) assert.ok(!r.url.includes(svc.tokens.alice), `the token in a URL: ${r.url}`);
  assert.ok(requests.some((r) => r.authorization === `Bearer ${svc.tokens.alice}`), 'no call carried the token');
  assert.deepEqual(errors, []);

  // The TLS port's plain http:// address answers, in plaintext, what to use.
  const plain = await browser.context.newPage();
  const answer = await plain.goto(svc.base.replace('https://', 'http://') + '/');
  assert.equal(answer.status(), 400);
  assert.match(await plain.locator('body').innerText(), /this port speaks HTTPS: use https:\/\/ instead of http:\/\//);
  await plain.close();
  await page.close();
});
