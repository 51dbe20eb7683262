// The dashboard's vendored uPlot (web/ui/vendor/uplot/, committed so that a
// fresh clone builds tfslurmd without npm) is byte for byte the npm package
// web/package.json pins, as installed here from package-lock.json (whose
// integrity hash npm checked). No browser, no cluster.
//   node --test tests/e2e/vendor.test.mjs      (tests/e2e/install.sh first)
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..');
const VENDOR = path.join(REPO, 'web/ui/vendor/uplot');
const json = (p) => JSON.parse(readFileSync(p, 'utf8'));

test('web/ui/vendor/uplot/ is the pinned uplot package, unmodified', () => {
  const pinned = json(path.join(REPO, 'web/package.json')).dependencies.uplot;
  assert.match(pinned, /^\d+\.\d+\.\d+$/, 'web/package.json pins an exact version');
  assert.equal(json(path.join(HERE, 'package.json')).dependencies.uplot, pinned, 'tests/e2e/package.json pins the same uplot');
  const lock = json(path.join(HERE, 'package-lock.json')).packages['node_modules/uplot'];
  assert.equal(lock?.version, pinned, 'package-lock.json locks the pinned version');
  const installed = path.join(HERE, 'node_modules/uplot');
  assert.equal(json(path.join(installed, 'package.json')).version, pinned, 'node_modules/uplot: run tests/e2e/install.sh');
  // Every committed file comes from the package: the two the page loads and
  // the license, nothing else.
  const files = { 'uPlot.esm.js': 'dist/uPlot.esm.js', 'uPlot.min.css': 'dist/uPlot.min.css', LICENSE: 'LICENSE' };
  assert.deepEqual(readdirSync(VENDOR).sort(), Object.keys(files).sort());
  for (const [name, from] of Object.entries(files)) {
    const ours = readFileSync(path.join(VENDOR, name));
    const theirs = readFileSync(path.join(installed, from));
    assert.ok(ours.equals(theirs), `web/ui/vendor/uplot/${name} differs from uplot@${pinned}'s ${from}: run web/vendor-update.sh`);
  }
  assert.match(readFileSync(path.join(VENDOR, 'LICENSE'), 'utf8'), /MIT License/);
});
