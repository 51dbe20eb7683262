// Shared pieces of the dashboard's end-to-end tests: a real local Slurm
// cluster, a real tfslurmd, Debian's headless Chromium through playwright-core,
// and small REST/Slurm helpers. Everything lives in fresh temp directories and
// binds to port 0: the REST API on 127.0.0.1, the agent endpoint there too on a
// cluster on one host, and on every address when the cluster's hosts are apart
// (tests/run.sh then runs these tests on its service host).
import { execFile, spawn } from 'node:child_process';
import { createHash, createPublicKey } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';

const execFileAsync = promisify(execFile);

export const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(HERE, '..', '..');
export const SCREENSHOTS = path.join(HERE, 'screenshots');
const BIN = process.env.TFSLURM_BIN_DIR || path.join(REPO, 'build', 'bin');
const CHROMIUM = process.env.TFSLURM_CHROMIUM || '/usr/bin/chromium';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Polls `probe` until it returns a truthy value; throws with `what` and the
// last value seen after `timeoutMs`.
export async function waitFor(what, probe, { timeoutMs = 60000, intervalMs = 500 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      last = await probe();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last: ${describe(last)}`);
    }
    await sleep(intervalMs);
  }
}

// The line an experiment page's Cancel or Resume leaves once tfslurmd has
// answered (`action` is 'Cancel' or 'Resume'): "✓ Cancelled: ..." or
// "✗ Cancel failed: ...". Until then the page shows "… working", though its
// poll may already show the new state.
export async function actionOutcome(page, action, { timeoutMs = 60000 } = {}) {
  const done = { Cancel: 'Cancelled', Resume: 'Resumed' }[action];
  return waitFor(
    `the ${action} button's outcome`,
    async () => {
      const text = await page.locator('.action-status').innerText();
      return text.startsWith(`✓ ${done}`) || text.startsWith(`✗ ${action} failed`) ? text : null;
    },
    { timeoutMs, intervalMs: 100 },
  );
}

function describe(v) {
  if (v instanceof Error) return v.message;
  try {
    return JSON.stringify(v).slice(0, 800);
  } catch {
    return String(v);
  }
}

// A local Slurm cluster: TFSLURM_SLURM_CONF when set (tests/run.sh starts
// one), else deploy/local-slurm/start.sh in a short temp dir (unix socket
// paths under it must stay short), stopped again by stop().
export async function startCluster() {
  if (process.env.TFSLURM_SLURM_CONF) {
    return { conf: process.env.TFSLURM_SLURM_CONF, stop: async () => {} };
  }
  const dir = mkdtempSync('/tmp/tfs-e2e-');
  chmodSync(dir, 0o755); // munged runs as its own user and must reach DIR/munge
  const { stdout } = await execFileAsync(path.join(REPO, 'deploy/local-slurm/start.sh'), [dir], {
    timeout: 120000,
  });
  const m = stdout.match(/^SLURM_CONF=(.+)$/m);
  if (!m) throw new Error(`start.sh printed no SLURM_CONF line: ${stdout}`);
  return {
    conf: m[1].trim(),
    stop: async () => {
      await execFileAsync(path.join(REPO, 'deploy/local-slurm/stop.sh'), [dir], { timeout: 120000 }).catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// tfslurmd on 127.0.0.1:0 with its own database and output root. By default
// with --no-auth (every caller is the local admin). With {auth: true} it
// checks bearer tokens: `tokens` ({alice: {admin: false}, ...}) are made with
// `tfslurmd token create` before it starts and returned as svc.tokens.alice.
// `name` names the copy of its log kept in screenshots/ (NAME.log). `seed`
// (async, given the database's path) writes rows before tfslurmd starts; the
// database has tfslurmd's schema by then. With
// {tls: true} both ports speak TLS with the certificate `tfslurmd tls init`
// makes for localhost, 127.0.0.1 and, on a hosts-apart cluster, this host's
// name (the one agents dial); svc.base is then https://, and svc.tls.spki is
// the base64 SHA-256 of the certificate's public key, which Chromium is told
// to trust (launchBrowser({trustSpki})).
export async function startService(slurmConf, { auth = false, tokens = {}, name = 'tfslurmd', seed = null, tls = false } = {}) {
  // A hosts-apart cluster (deploy/local-slurm/start.sh --hosts-apart) has
  // etc/network beside etc/slurm.conf: its agents reach tfslurmd over the
  // cluster network, by the service host's name, which tfslurmd tells them.
  const apart = existsSync(path.join(path.dirname(slurmConf), 'network'));
  const tfslurmd = path.join(BIN, 'tfslurmd');
  if (!existsSync(tfslurmd)) throw new Error(`${tfslurmd} is missing: build with ninja -C build tfslurmd tfslurm-agent`);
  if (!existsSync(path.join(BIN, 'tfslurm-agent'))) throw new Error(`${BIN}/tfslurm-agent is missing: tasks cannot start`);
  const dir = mkdtempSync(path.join(tmpdir(), 'tfslurm-e2e-svc-'));
  const ready = path.join(dir, 'ready.json');
  const logPath = path.join(dir, 'tfslurmd.log');
  const db = path.join(dir, 'tfslurm.db');
  const created = {};
  for (const [user, { admin = false } = {}] of Object.entries(tokens)) {
    const args = ['token', 'create', '--user', user, ...(admin ? ['--admin'] : []), '--db', db];
    const { stdout } = await execFileAsync(tfslurmd, args, { timeout: 30000 });
    created[user] = stdout.trim();
    if (!/^tfs_[0-9a-f]{64}$/.test(created[user])) throw new Error(`tfslurmd ${args.join(' ')} printed ${stdout}`);
  }
  if (seed) {
    // Any tfslurmd that opens the database gives it the schema.
    if (!existsSync(db)) await execFileAsync(tfslurmd, ['token', 'create', '--user', 'e2e-seed', '--db', db], { timeout: 30000 });
    await seed(db);
  }
  const tlsArgs = [];
  let tlsInfo = null;
  if (tls) {
    const pki = path.join(dir, 'tls');
    const names = ['localhost', ...(apart ? [hostname()] : [])];
    const nameArgs = names.flatMap((n) => ['--name', n]);
    await execFileAsync(tfslurmd, ['tls', 'init', '--dir', pki, ...nameArgs, '--ip', '127.0.0.1'], { timeout: 30000 });
    tlsArgs.push('--tls-cert', path.join(pki, 'server.pem'), '--tls-key', path.join(pki, 'server.key'), '--tls-ca', path.join(pki, 'ca.pem'));
    const spki = createPublicKey(readFileSync(path.join(pki, 'server.key'))).export({ type: 'spki', format: 'der' });
    tlsInfo = { ca: path.join(pki, 'ca.pem'), spki: createHash('sha256').update(spki).digest('base64') };
  }
  const out = openSync(logPath, 'a');
  const child = spawn(
    tfslurmd,
    [
      '--listen', '127.0.0.1:0',
      '--agent-listen', apart ? '0.0.0.0:0' : '127.0.0.1:0',
      ...(auth ? [] : ['--no-auth']),
      // As root without --site tfslurmd refuses to start unless told that
      // jobs may run as root.
      ...(process.geteuid() === 0 ? ['--allow-root'] : []),
      '--db', db,
      '--output-root', path.join(dir, 'output'),
      '--ready-file', ready,
      '--poll-interval-ms', '500',
      '--heartbeat-ms', '1000',
      '--shutdown-grace-ms', '3000',
      ...tlsArgs,
      // Without TLS the agent port off loopback is refused unless the risk
      // is accepted: these tests are the dashboard's, the agent traffic
      // crosses only the test cluster's own network namespaces, and
      // tls.test.mjs runs the agents over TLS.
      ...(apart && !tls ? ['--insecure-plaintext'] : []),
    ],
    { env: { ...process.env, SLURM_CONF: slurmConf }, stdio: ['ignore', out, out] },
  );
  let exited = null;
  child.on('exit', (code, signal) => (exited = { code, signal }));
  const ports = await waitFor(
    'tfslurmd to write its ready file',
    () => {
      if (exited) throw new Error(`tfslurmd exited ${JSON.stringify(exited)}: ${readFileSync(logPath, 'utf8').slice(-2000)}`);
      return existsSync(ready) && readFileSync(ready, 'utf8').trim() ? JSON.parse(readFileSync(ready, 'utf8')) : null;
    },
    { timeoutMs: 30000, intervalMs: 100 },
  );
  const base = `${tls ? 'https' : 'http'}://127.0.0.1:${ports.http_port}`;
  return {
    base,
    tls: tlsInfo,
    dir,
    logPath,
    tokens: created,
    log: () => readFileSync(logPath, 'utf8'),
    // Stops tfslurmd; its log is kept as screenshots/NAME.log, the rest
    // (database, model dirs, task logs) only with TFSLURM_E2E_KEEP=1.
    stop: async () => {
      if (!exited) {
        child.kill('SIGTERM');
        await waitFor('tfslurmd to stop', () => exited, { timeoutMs: 15000, intervalMs: 100 }).catch(() => child.kill('SIGKILL'));
      }
      copyFileSync(logPath, screenshotPath(`${name}.log`));
      if (process.env.TFSLURM_E2E_KEEP === '1') console.log(`# kept ${dir}`);
      else rmSync(dir, { recursive: true, force: true });
    },
  };
}

// REST call, with a bearer token when given; returns {status, body} with
// body parsed when JSON.
export async function api(base, method, urlPath, body, { token } = {}) {
  const headers = body ? { 'Content-Type': 'application/json' } : {};
  if (token) headers.Authorization = `Bearer ${token}`;
  const res = await fetch(base + urlPath, {
    method,
    headers,
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  let parsed = text;
  try {
    parsed = JSON.parse(text);
  } catch {}
  return { status: res.status, body: parsed, headers: res.headers };
}

// The linear_ps example's spec (examples/linear_ps/experiment.json.in) with
// this checkout's path, a given id and extra train.py arguments. `steps` and
// `stepSleep` set how long training takes: 4 workers share the global step.
export function linearPsSpec(id, { steps = 300, stepSleep = 0.1, extra = [], command = null } = {}) {
  const text = readFileSync(path.join(REPO, 'examples/linear_ps/experiment.json.in'), 'utf8').replaceAll('@REPO@', REPO);
  const spec = JSON.parse(text);
  spec.id = id;
  if (command) {
    spec.command = command;
  } else {
    const i = spec.command.indexOf('--steps');
    spec.command[i + 1] = String(steps);
    spec.command.push('--step-sleep', String(stepSleep), '--checkpoint-every', '40', '--log-every', '40', ...extra);
  }
  spec.restart = { max_restarts: 0 };
  return spec;
}

// scontrol's view of a job: {JobState, Reason, ...}, or null once slurmctld
// has forgotten it.
export async function slurmJob(slurmConf, jobId) {
  try {
    const { stdout } = await execFileAsync('scontrol', ['show', 'job', '-o', String(jobId)], {
      env: { ...process.env, SLURM_CONF: slurmConf },
      timeout: 15000,
    });
    const fields = {};
    for (const m of stdout.matchAll(/(\w+)=(\S*)/g)) fields[m[1]] ??= m[2];
    return fields;
  } catch (e) {
    if (/Invalid job id/i.test(`${e.stderr}${e.stdout}`)) return null;
    throw e;
  }
}

// squeue's state of a job ("RUNNING", "CANCELLED"...), '' when not listed.
export async function squeueState(slurmConf, jobId) {
  const { stdout } = await execFileAsync('squeue', ['-h', '-t', 'all', '-j', String(jobId), '-o', '%T'], {
    env: { ...process.env, SLURM_CONF: slurmConf },
    timeout: 15000,
  }).catch((e) => ({ stdout: '' }));
  return stdout.trim();
}

// Debian's Chromium, headless, with a fresh profile; never a downloaded
// browser. Returns a persistent context (playwright wants the profile dir as
// an argument rather than --user-data-dir) and a cleanup. `trustSpki`: the
// base64 SHA-256 of a server key Chromium accepts a certificate of
// (--ignore-certificate-errors-spki-list: a pin, as a site's CA would be
// in the system's store).
export async function launchBrowser({ trustSpki = null } = {}) {
  const profile = mkdtempSync(path.join(tmpdir(), 'tfslurm-e2e-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      ...(trustSpki ? [`--ignore-certificate-errors-spki-list=${trustSpki}`] : []),
    ],
    viewport: { width: 1360, height: 900 },
    deviceScaleFactor: 1,
    locale: 'en-GB',
    timezoneId: 'UTC',
  });
  return {
    context,
    close: async () => {
      await context.close().catch(() => {});
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

export function screenshotPath(name) {
  mkdirSync(SCREENSHOTS, { recursive: true });
  return path.join(SCREENSHOTS, name);
}

// The README's pictures come from a real run: with
// TFSLURM_E2E_DOCS_SCREENSHOTS=1, copies screenshots/NAME to docs/DOC_NAME
// (call it once the test that took it has passed). Returns the path written,
// or null when not asked to.
export function publishDocsScreenshot(name, docName) {
  if (process.env.TFSLURM_E2E_DOCS_SCREENSHOTS !== '1') return null;
  const to = path.join(REPO, 'docs', docName);
  copyFileSync(screenshotPath(name), to);
  console.log(`wrote ${path.relative(REPO, to)} from screenshots/${name}`);
  return to;
}
