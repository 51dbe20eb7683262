#!/usr/bin/env bash
# tests/e2e/install.sh: what the dashboard's end-to-end tests need, on a fresh
# Debian machine: Debian's chromium (driven by playwright-core; no browser is
# ever downloaded, so never run `npx playwright install`), node and npm, and
# this folder's node_modules from package-lock.json. Idempotent; run as root
# for apt. Called by tests/run.sh.
set -euo pipefail

here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
log() { printf 'e2e-install: %s\n' "$*" >&2; }

missing=()
[[ -x /usr/bin/chromium ]] || missing+=(chromium)
# The machine image may carry its own nodejs (which bundles npm); take
# Debian's only for what is absent, so the two never conflict.
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if ((${#missing[@]})); then
  log "installing ${missing[*]} with apt"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# playwright-core (package-lock.json) declares node >= 20, as package.json
# does. The machine image carries node 20; Debian 12's own nodejs package,
# which the apt step above falls back to, is 18.20: with only that, stop here
# rather than run the suite on a node playwright-core does not support.
major="$(node -p 'process.versions.node.split(".")[0]')"
((major >= 20)) || {
  log "node $(node --version) is too old: playwright-core $(sed -n 's/.*"playwright-core": "\(.*\)".*/\1/p' "$here/package.json" 2>/dev/null || true)" \
    "needs node 20 or newer. Debian 12's nodejs package is 18; install node 20 or newer and run again."
  exit 1
}

# playwright-core (it has no browser download step of its own) and uplot
# (vendor.test.mjs compares web/ui/vendor/uplot/ with it).
cd "$here"
if [[ ! -d node_modules/playwright-core || ! -d node_modules/uplot ]] || [[ package-lock.json -nt node_modules/.package-lock.json ]]; then
  log "npm ci in $here"
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error
fi
log "ready: $(/usr/bin/chromium --version 2>/dev/null | head -1), node $(node --version)"
