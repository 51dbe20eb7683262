// Small pieces shared by the views.
import { h } from './dom.js';
import { ageSeconds, formatDuration, roleCounts, stateIcon, stateTone } from './format.js';

// "✗ failed" as a pill; the icon and the word carry the meaning, the color
// only repeats it.
export function stateBadge(state, { testid } = {}) {
  return h(
    'span',
    { class: `badge tone-${stateTone(state)}`, 'data-state': state, 'data-testid': testid },
    h('span', { class: 'badge-icon', 'aria-hidden': 'true' }, stateIcon(state)),
    ' ',
    state || 'unknown',
  );
}

// Per role: "ps 2/2/0 of 2", registered / running / done, and "✗ 1 failed".
export function roleCountsList(taskCounts) {
  const rows = roleCounts(taskCounts);
  if (!rows.length) return h('span', { class: 'muted' }, 'no tasks yet');
  return h(
    'ul',
    { class: 'role-counts' },
    rows.map((c) =>
      h(
        'li',
        { 'data-role': c.role },
        h('span', { class: 'role' }, c.role),
        ' ',
        h(
          'span',
          {
            class: 'counts',
            title: `${c.registered} registered, ${c.running} running, ${c.done} done, of ${c.total}`,
          },
          h('span', { class: 'n-registered' }, c.registered),
          '/',
          h('span', { class: 'n-running' }, c.running),
          '/',
          h('span', { class: 'n-done' }, c.done),
        ),
        h('span', { class: 'of' }, ` of ${c.total}`),
        c.failed ? h('span', { class: 'failed-count' }, ` ✗ ${c.failed} failed`) : null,
      ),
    ),
  );
}

// An error box: "✗ message" and the fields the API named.
export function errorNotice(err, { prefix = '' } = {}) {
  return h(
    'div',
    { class: 'notice notice-bad', role: 'alert' },
    h('strong', null, '✗ ', prefix),
    err.message,
    err.fields && err.fields.length
      ? h('ul', null, err.fields.map((f) => h('li', null, h('code', null, f.field || '(body)'), ': ', f.reason)))
      : null,
  );
}

export function emptyRow(cols, text) {
  return h('tr', { class: 'empty' }, h('td', { colspan: cols }, text));
}

// An age that ticks without re-rendering what is around it: the span carries
// its timestamp, tickAges() rewrites the text on every poll.
export function ageSpan(iso, { suffix = '', parens = false } = {}) {
  return h('span', { 'data-age-of': iso || '', 'data-age-suffix': suffix, 'data-age-parens': parens ? '1' : null });
}

export function tickAges(root, nowMs) {
  for (const el of root.querySelectorAll('[data-age-of]')) {
    const text = `${formatDuration(ageSeconds(el.dataset.ageOf || null, nowMs))}${el.dataset.ageSuffix || ''}`;
    el.textContent = el.dataset.ageParens ? `(${text})` : text;
  }
}
