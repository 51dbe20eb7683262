#!/usr/bin/env bash
# web/vendor-update.sh: refreshes the dashboard's vendored copy of uPlot
# (web/ui/vendor/uplot/) from npm, at the version web/package.json pins.
#
# The copies are committed, so that a fresh clone builds tfslurmd (which embeds
# everything under web/ui/) without npm or network. To move to a new version:
# change "uplot" in web/package.json and in tests/e2e/package.json (then
# `npm install` there to update its package-lock.json), run this script, and
# commit the three together; tests/e2e/vendor.test.mjs checks that the
# committed files are byte-identical to the pinned package's.
set -euo pipefail

web="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
version="$(node -p 'require(process.argv[1]).dependencies.uplot' "$web/package.json")"
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || {
  echo "vendor-update: web/package.json pins uplot to '$version', not an exact version" >&2
  exit 1
}
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "uplot@$version" >/dev/null && tar xzf "uplot-$version.tgz")
dest="$web/ui/vendor/uplot"
mkdir -p "$dest"
# What the page loads (the ES module and its stylesheet) and the license
# that must travel with them.
for f in dist/uPlot.esm.js dist/uPlot.min.css LICENSE; do
  cp "$tmp/package/$f" "$dest/$(basename "$f")"
done
echo "vendor-update: uplot $version into web/ui/vendor/uplot/:"
(cd "$dest" && for f in uPlot.esm.js uPlot.min.css LICENSE; do
  printf '  %-14s %7d bytes  sha256 %s\n' "$f" "$(wc -c <"$f")" "$(sha256sum "$f" | cut -c1-16)"
done)
