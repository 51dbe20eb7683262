// Pure formatting helpers: no DOM, no fetch, so node's test runner can import
// them (tests/e2e/format.test.mjs). Every state is spelled with an icon *and*
// a word, so a color never carries meaning alone.

// What users and programs wrote (event text, reasons, paths, tags, logs) with
// its control characters (C0 but line breaks and tabs, DEL, C1), bidi
// controls (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069) and
// invisible characters and line separators (U+200B, U+2028, U+FEFF, the tag
// characters U+E0000-U+E007F, ...) shown as visible escapes, \x1b, \u202e
// or \U000e0041, as tfctl shows them (client/terminal_text.h; the set is
// base/unsafe_text.h's). The service refuses them in tags and paths, but
// older rows and program output may carry them, and a U+202E would reverse
// the page's own text around it.
const UNSAFE_TEXT = new RegExp(
  '[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f\\u061c\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069' +
  '\\u00ad\\u034f\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u200b-\\u200d\\u2028\\u2029' +
  '\\u2060-\\u2064\\u206a-\\u206f\\u3164\\ufeff\\uffa0\\ufff9-\\ufffb' +
  '\\u{1bca0}-\\u{1bca3}\\u{e0000}-\\u{e007f}]', 'gu');
export function visibleText(text) {
  return text.replace(UNSAFE_TEXT, (c) => {
    const n = c.codePointAt(0);
    if (c === '\r') return '\\r';
    if (n < 0x80) return `\\x${n.toString(16).padStart(2, '0')}`;
    return n > 0xffff ? `\\U${n.toString(16).padStart(8, '0')}` : `\\u${n.toString(16).padStart(4, '0')}`;
  });
}

// Experiment states (service/core/records.h).
export const EXPERIMENT_STATES = ['queued', 'starting', 'running', 'restarting', 'succeeded', 'failed', 'cancelled'];
export const OPEN_STATES = ['queued', 'starting', 'running', 'restarting'];

const STATE_ICONS = {
  // experiments
  queued: '◷', starting: '◔', running: '▶', restarting: '↻', succeeded: '✓', failed: '✗', cancelled: '⊘',
  // tasks
  pending: '·', registered: '●', reaped: '■', lost: '⚠',
  // attempts
  submitting: '◷', ended: '■',
};

// What kind of state it is, for styling and for "needs attention".
export function stateTone(state) {
  switch (state) {
    case 'succeeded': return 'ok';
    case 'failed': case 'lost': return 'bad';
    case 'restarting': return 'warn';
    case 'running': case 'registered': return 'live';
    case 'cancelled': case 'reaped': case 'ended': return 'done';
    default: return 'wait';
  }
}

export function stateIcon(state) {
  return STATE_ICONS[state] ?? '•';
}

export function isOpen(state) {
  return OPEN_STATES.includes(state);
}

// Roles in the order TensorFlow's cluster spec uses, unknown ones after.
const ROLE_ORDER = ['chief', 'ps', 'worker', 'evaluator'];
export function sortRoles(roles) {
  return [...roles].sort((a, b) => {
    const ia = ROLE_ORDER.indexOf(a), ib = ROLE_ORDER.indexOf(b);
    return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib) || a.localeCompare(b);
  });
}

// Tasks by role, then index.
export function sortTasks(tasks) {
  const order = new Map(sortRoles([...new Set(tasks.map((t) => t.role))]).map((r, i) => [r, i]));
  return [...tasks].sort((a, b) => order.get(a.role) - order.get(b.role) || a.index - b.index);
}

// "5 s", "3 min", "2 h 05 min", "3 d 4 h". Negative or missing: "—".
export function formatDuration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds) || seconds < 0) return '—';
  if (seconds < 10) return `${seconds.toFixed(1)} s`;
  if (seconds < 60) return `${Math.floor(seconds)} s`;
  const m = Math.floor(seconds / 60);
  if (m < 60) return `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ${String(m % 60).padStart(2, '0')} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

// Seconds from an ISO timestamp (as the API writes them) to `nowMs`.
export function ageSeconds(iso, nowMs) {
  if (!iso) return null;
  const t = Date.parse(iso);
  return Number.isNaN(t) ? null : Math.max(0, (nowMs - t) / 1000);
}

// The browser's zone as an offset from UTC at `d`: "UTC", "UTC+01:00",
// "UTC-05:30" (an offset, not a name: names are ambiguous, and the machine
// may have none).
export function zoneOf(d) {
  const off = -d.getTimezoneOffset();
  if (off === 0) return 'UTC';
  const p = (n) => String(n).padStart(2, '0');
  return `UTC${off > 0 ? '+' : '-'}${p(Math.floor(Math.abs(off) / 60))}:${p(Math.abs(off) % 60)}`;
}

// "2024-05-01 14:03:07 UTC+02:00": local time, always with its date and its
// zone, so that a time read off a screenshot or pasted into a ticket says
// when it was. (`nowMs` is kept for callers that pass it.)
export function formatTime(iso, nowMs = Date.now()) {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  const p = (n) => String(n).padStart(2, '0');
  const date = `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}`;
  return `${date} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())} ${zoneOf(d)}`;
}

// "14:03:07 UTC+02:00": the time of day (24-hour, local) with its zone, for
// the header's last update; toLocaleTimeString would say "2:03:07 PM"
// in some locales, with no zone.
export function formatClockWithZone(ms) {
  const d = new Date(ms);
  if (Number.isNaN(d.getTime())) return '—';
  const p = (n) => String(n).padStart(2, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())} ${zoneOf(d)}`;
}

// A Slurm time limit in seconds: "MM", "MM:SS", "HH:MM:SS", "D-HH",
// "D-HH:MM", "D-HH:MM:SS" (sbatch --time's forms); null for "UNLIMITED",
// "INFINITE" or anything else.
export function parseSlurmTime(text) {
  const m = /^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$/.exec(String(text ?? '').trim());
  if (!m) return null;
  const [, d, a, b, c] = m;
  const n = (x) => (x === undefined ? 0 : Number(x));
  if (d !== undefined) return n(d) * 86400 + n(a) * 3600 + n(b) * 60 + n(c); // D-HH[:MM[:SS]]
  if (c !== undefined) return n(a) * 3600 + n(b) * 60 + n(c); // HH:MM:SS
  if (b !== undefined) return n(a) * 60 + n(b); // MM:SS
  return n(a) * 60; // MM
}

// The current Slurm job's time against its limit: {used_s, limit_s, left_s,
// started_at, job}, or null before the job started or without a limit. The
// limit is the job's: attempts restarted in place inside it share it, so
// the time counts from the first of them to start.
export function timeAgainstLimit(exp, nowMs) {
  const limit = parseSlurmTime(exp?.spec?.resources?.time_limit);
  const attempts = exp?.attempts ?? [];
  const current = attempts.at(-1);
  if (!limit || !current) return null;
  const job = current.slurm_job_id;
  const sameJob = job ? attempts.filter((a) => a.slurm_job_id === job && a.started_at) : current.started_at ? [current] : [];
  const starts = sameJob.map((a) => Date.parse(a.started_at)).filter((t) => !Number.isNaN(t));
  if (!starts.length) return null;
  const start = Math.min(...starts);
  const used = Math.max(0, (nowMs - start) / 1000);
  return { used_s: used, limit_s: limit, left_s: limit - used, started_at: new Date(start).toISOString(), job: job ?? null };
}

// Runs of consecutive checkpoint events become one: the latest (its step),
// with `folded` the number of checkpoints it stands for and `first_at` the
// first one's time. Other events are kept as they are; order is kept.
export function foldCheckpoints(events) {
  const out = [];
  for (const e of events) {
    const last = out.at(-1);
    if (e.what === 'checkpoint' && last && last.what === 'checkpoint' && last.attempt === e.attempt) {
      out[out.length - 1] = { ...e, folded: (last.folded || 1) + 1, first_at: last.first_at || last.at };
    } else {
      out.push(e);
    }
  }
  return out;
}

const SIGNALS = { 1: 'SIGHUP', 2: 'SIGINT', 6: 'SIGABRT', 9: 'SIGKILL', 10: 'SIGUSR1', 11: 'SIGSEGV', 12: 'SIGUSR2', 15: 'SIGTERM' };
export function signalName(n) {
  return SIGNALS[n] ?? `signal ${n}`;
}

// How a task ended, for the exit column: {text, bad}.
//   exit 0 -> "0"; exit 1 -> "1" (bad); killed by 15 -> "SIGTERM"; 143 -> "143 (SIGTERM)"
export function describeExit(task) {
  if (task.signal !== null && task.signal !== undefined) {
    return { text: `killed by ${signalName(task.signal)}`, bad: task.state === 'failed' || task.state === 'lost' };
  }
  if (task.exit_code === null || task.exit_code === undefined) return { text: '—', bad: false };
  const code = task.exit_code;
  let text = String(code);
  if (code > 128 && code < 160) text += ` (${signalName(code - 128)})`;
  return { text, bad: code !== 0 && task.state !== 'reaped' };
}

// Counts per role, as GET /experiments gives them, in role order:
// [{role, total, registered, running, done, failed}].
export function roleCounts(taskCounts) {
  if (!taskCounts) return [];
  return sortRoles(Object.keys(taskCounts)).map((role) => ({ role, ...taskCounts[role] }));
}

// The same counts from a task list (the experiment page has the tasks).
export function countTasks(tasks) {
  const out = {};
  for (const t of tasks) {
    const c = (out[t.role] ??= { total: 0, registered: 0, running: 0, done: 0, failed: 0 });
    c.total++;
    if (t.state !== 'pending') c.registered++;
    if (t.state === 'running') c.running++;
    if (['succeeded', 'failed', 'reaped', 'lost'].includes(t.state)) c.done++;
    if (t.state === 'failed' || t.state === 'lost') c.failed++;
  }
  return out;
}

// How an event reads: 'bad' (something failed), 'warn', 'ok' or 'info', from
// its code and, for generic codes (state, job, exited), its sentence.
export function eventTone(what, why = '') {
  if (/fail|lost|error|refused|timeout|preempt/i.test(what)) return 'bad';
  if (/cancel|restart|retry/i.test(what)) return 'warn';
  if (/succeed|complete/i.test(what)) return 'ok';
  if (what === 'state' || what === 'job') {
    if (/-> failed|ended (FAILED|NODE_FAIL|TIMEOUT|OUT_OF_MEMORY|PREEMPTED|BOOT_FAIL|DEADLINE)/.test(why)) return 'bad';
    if (/-> (cancelled|restarting)|ended CANCELLED/.test(why)) return 'warn';
    if (/-> succeeded|ended COMPLETED/.test(why)) return 'ok';
  }
  if (what === 'exited' && /(code [1-9]\d*|signal)/.test(why)) return 'bad';
  return 'info';
}

// The dashboard's hash routes:
//   #/                         running + all experiments
//   #/?state=failed&offset=25  the same, filtered / paged
//   #/experiments/ID           one experiment
export function parseRoute(hash) {
  const h = (hash || '').replace(/^#/, '') || '/';
  const [path, query = ''] = h.split('?', 2);
  const params = Object.fromEntries(new URLSearchParams(query));
  const m = path.match(/^\/experiments\/([^/]+)\/?$/);
  if (m) return { view: 'experiment', id: decodeURIComponent(m[1]), params };
  const sw = path.match(/^\/sweeps\/([^/]+)\/?$/);
  if (sw) return { view: 'sweep', id: decodeURIComponent(sw[1]), params };
  return { view: 'list', params };
}

export function experimentHref(id) {
  return `#/experiments/${encodeURIComponent(id)}`;
}
