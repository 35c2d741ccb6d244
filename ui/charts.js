// Line charts drawn as inline SVG by this file: one polyline per series over a
// fixed time window, a zero line, the largest value and the window's ends as
// labels. Only numbers go into attributes; names go in as text.

import { h, s } from './dom.js';

const WIDTH = 600;
const HEIGHT = 160;
const PAD = { left: 44, right: 8, top: 10, bottom: 22 };

function niceMax(value) {
  if (value <= 0) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * magnitude >= value) return step * magnitude;
  return 10 * magnitude;
}

function formatValue(value) {
  return Number.isInteger(value) ? String(value) : value.toFixed(1);
}

/**
 * series: [{ name, points: [[timeMs, value], …] }]; window: { from, to } in ms.
 * Returns a <figure> with the chart and a legend.
 */
export function lineChart({ title, unit, series, window }) {
  const max = niceMax(Math.max(0, ...series.flatMap((one) => one.points.map(([, v]) => v))));
  const span = Math.max(1, window.to - window.from);
  const x = (t) => PAD.left + ((t - window.from) / span) * (WIDTH - PAD.left - PAD.right);
  const y = (v) => HEIGHT - PAD.bottom - (v / max) * (HEIGHT - PAD.top - PAD.bottom);
  const svg = s(
    'svg',
    { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-label': `${title}: ${series.map((one) => `${one.name} ${formatValue(one.points.at(-1)?.[1] ?? 0)}`).join(', ')}`, class: 'chart' },
    s('title', {}, title),
    s('line', { x1: PAD.left, x2: WIDTH - PAD.right, y1: y(0), y2: y(0), class: 'axis' }),
    s('line', { x1: PAD.left, x2: WIDTH - PAD.right, y1: y(max), y2: y(max), class: 'grid' }),
    s('text', { x: PAD.left - 4, y: y(max) + 4, class: 'label end' }, formatValue(max)),
    s('text', { x: PAD.left - 4, y: y(0) + 4, class: 'label end' }, '0'),
    s('text', { x: PAD.left, y: HEIGHT - 6, class: 'label' }, `-${Math.round(span / 60_000)} min`),
    s('text', { x: WIDTH - PAD.right, y: HEIGHT - 6, class: 'label end' }, 'now'),
    series.map((one, index) =>
      one.points.length === 0 ? null : s('polyline', { points: one.points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' '), class: `line series-${index}` }),
    ),
  );
  const legend = h(
    'ul',
    { class: 'legend' },
    series.map((one, index) => h('li', {}, h('span', { class: `swatch series-${index}`, 'aria-hidden': 'true' }), `${one.name}: ${formatValue(one.points.at(-1)?.[1] ?? 0)}${unit ? ` ${unit}` : ''}`)),
  );
  return h('figure', { class: 'chart-box' }, h('figcaption', {}, title), svg, legend);
}
