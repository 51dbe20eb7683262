// The dashboard's shell: hash routing, the polling loop and the header.
//
// Live updates are polling: the current view refreshes every POLL_MS while
// the tab is visible; a hidden tab does not poll at all and refreshes at once
// when shown again. After a failed poll the interval backs off to 5 s.
import { onTokenChange, promptForToken, setToken, token } from './api.js';
import { fill, h } from './dom.js';
import { formatClockWithZone, parseRoute } from './format.js';
import { keyIcon, pauseIcon } from './icons.js';
import { ExperimentView } from './views/experiment.js';
import { ListView } from './views/list.js';
import { SweepView } from './views/sweep.js';

const POLL_MS = 1500;
const RETRY_MS = 5000;

const main = document.getElementById('main');
const liveStatus = document.getElementById('live-status');
const tokenArea = document.getElementById('token-area');
const outage = document.getElementById('outage');

let view = null;
let generation = 0; // a new route or a visibility change starts a new loop
let timer = null;
let lastOk = 0;

function route() {
  const r = parseRoute(location.hash);
  if (view) view.dispose();
  if (r.view === 'experiment') view = new ExperimentView(r.id);
  else if (r.view === 'sweep') view = new SweepView(r.id);
  else view = new ListView(r.params);
  view.mount(main);
  window.scrollTo(0, 0);
  restart();
}

function restart() {
  generation++;
  clearTimeout(timer);
  timer = null;
  if (!document.hidden) poll(generation);
  else showLive();
}

async function poll(gen) {
  const current = view;
  let delay = POLL_MS;
  try {
    await current.refresh();
    lastOk = Date.now();
    fill(outage);
  } catch (e) {
    delay = RETRY_MS;
    fill(
      outage,
      h(
        'div',
        { class: 'notice notice-bad', role: 'alert' },
        h('strong', null, '⚠ '),
        e.message,
        e.status === 401 ? [' ', h('button', { class: 'btn btn-small', onclick: enterToken }, 'Enter token')] : null,
      ),
    );
  }
  showLive();
  if (gen === generation && !document.hidden) timer = setTimeout(() => poll(gen), delay);
}

function showLive() {
  let text;
  let cls = 'live';
  if (document.hidden) {
    text = [pauseIcon(), ' paused'];
    cls = 'paused';
  } else if (!lastOk) {
    text = '… connecting';
  } else if (outage.firstChild) {
    text = '⚠ not updating';
    cls = 'down';
  } else {
    // 24-hour time with its zone, as every time on the page (format.js).
    text = `● live · ${formatClockWithZone(lastOk)}`;
  }
  liveStatus.className = `live-status ${cls}`;
  fill(liveStatus, text);
}

async function enterToken() {
  if (await promptForToken()) restart();
}

function showToken() {
  fill(
    tokenArea,
    token()
      ? [
          h('span', { class: 'muted' }, keyIcon(), ' token set '),
          h('button', { class: 'btn btn-small', onclick: () => setToken('') }, 'forget'),
        ]
      : [],
  );
}

window.addEventListener('hashchange', route);
document.addEventListener('visibilitychange', restart);
onTokenChange(showToken);
showToken();
route();
