// Icons drawn as inline SVG, so that they need no font: an emoji such as
// U+1F511 (a key) shows as an empty box where no emoji font is installed,
// as on a minimal Debian with only DejaVu. The page's CSP allows them: an
// <svg> element built in the DOM is neither an image fetched (img-src) nor
// a style attribute (its colours are presentation attributes).
const SVG = 'http://www.w3.org/2000/svg';

function svg(label, paths) {
  const el = document.createElementNS(SVG, 'svg');
  el.setAttribute('viewBox', '0 0 16 16');
  el.setAttribute('width', '1em');
  el.setAttribute('height', '1em');
  el.setAttribute('class', 'icon');
  el.setAttribute('fill', 'none');
  el.setAttribute('stroke', 'currentColor');
  el.setAttribute('stroke-width', '1.6');
  el.setAttribute('stroke-linecap', 'round');
  el.setAttribute('stroke-linejoin', 'round');
  el.setAttribute('aria-hidden', 'true');
  el.setAttribute('focusable', 'false');
  el.dataset.icon = label;
  for (const d of paths) {
    const p = document.createElementNS(SVG, 'path');
    p.setAttribute('d', d);
    el.append(p);
  }
  return el;
}

// A key: a ring, its shaft and two teeth.
export function keyIcon() {
  return svg('key', ['M8 11a3 3 0 1 1-6 0 3 3 0 1 1 6 0z', 'M7.1 8.9 14 2', 'M11.4 4.6l1.9 1.9', 'M13.2 2.8l1.6 1.6']);
}

// Paused: two bars (U+23F8 needs an emoji font too).
export function pauseIcon() {
  return svg('pause', ['M5.5 3.5v9', 'M10.5 3.5v9']);
}
