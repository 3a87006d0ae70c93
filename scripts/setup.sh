#!/usr/bin/env bash
# Installs what the test suite needs, idempotently: Debian redis-server, redis-sentinel, curl,
# chromium, chromium-driver and firefox-esr, the Rust lint components, npm and buf, the MCP test
# servers and the playground's Firefox driver (npm, into their own node_modules), the Python
# packages of the client, MCP, browser and chart tests (into .venv), and the TypeScript example's
# packages (into its node_modules).
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

apt_updated=""
apt_install() {
  if [ -z "$apt_updated" ]; then
    as_root apt-get update -qq
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}

if ! command -v redis-server >/dev/null 2>&1; then
  # Also brings redis-cli (redis-tools), which the cluster tests use to create and reshard.
  echo "setup: installing redis-server"
  apt_install redis-server
fi

if ! command -v redis-sentinel >/dev/null 2>&1; then
  # The failover tests run a real Sentinel.
  echo "setup: installing redis-sentinel"
  apt_install redis-sentinel
fi

if ! command -v chromedriver >/dev/null 2>&1 || ! command -v chromium >/dev/null 2>&1 ||
  ! command -v firefox-esr >/dev/null 2>&1; then
  # The playground's browser tests: Debian's headless Chromium with its WebDriver, and Firefox.
  echo "setup: installing chromium, chromium-driver and firefox-esr"
  apt_install chromium chromium-driver firefox-esr
fi

if ! command -v curl >/dev/null 2>&1; then
  # The JSON-mapping tests and the README's commands call the real curl.
  echo "setup: installing curl"
  apt_install curl
fi

for component in rustfmt clippy; do
  if ! rustup component list --installed 2>/dev/null | grep -q "^${component}"; then
    echo "setup: installing rust component ${component}"
    rustup component add "${component}"
  fi
done

if ! command -v npm >/dev/null 2>&1; then
  # Debian ships npm as its own package, apart from nodejs.
  echo "setup: installing npm"
  apt_install npm
fi

if ! command -v buf >/dev/null 2>&1; then
  echo "setup: installing buf"
  npm install -g --silent @bufbuild/buf@1.75.0 >/dev/null
fi

# `npm ci` of a directory's lock file into its own node_modules, only when the lock file changed.
npm_ci_once() {
  local dir=$1 what=$2
  if ! cmp -s "$dir/package-lock.json" "$dir/node_modules/.agentd-installed-lock"; then
    echo "setup: installing $what (npm ci in $dir)"
    (cd "$dir" && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --silent --no-audit --no-fund)
    cp "$dir/package-lock.json" "$dir/node_modules/.agentd-installed-lock"
  fi
}
# The MCP tests' stdio server (@modelcontextprotocol/server-everything).
npm_ci_once tests/mcp/node "the MCP test servers"
# puppeteer-core for the playground's Firefox test (it drives Debian's firefox-esr; nothing to
# download).
npm_ci_once tests/python/firefox "the playground's Firefox driver"

# The Python packages of the client and chart tests go into a project-local virtualenv:
# Debian's system Python refuses `pip install` (PEP 668), and the tests use .venv/bin/python.
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  if ! python3 -m venv .venv 2>/dev/null; then
    rm -rf .venv
    apt_install python3-venv
    python3 -m venv .venv
  fi
fi
for requirements in tests/python/requirements.txt tests/helm/requirements.txt; do
  [ -f "$requirements" ] || continue
  # Pinned versions: when all are satisfied pip answers locally, without the network.
  .venv/bin/python -m pip install -q --disable-pip-version-check -r "$requirements"
done

# The TypeScript example's packages, exactly as its package-lock.json pins them; only when
# missing or older than the lock file, so a second run needs no network.
example=examples/typescript
if [ -f "$example/package-lock.json" ] && {
  [ ! -f "$example/node_modules/.package-lock.json" ] ||
    [ "$example/package-lock.json" -nt "$example/node_modules/.package-lock.json" ]
}; then
  echo "setup: installing $example/node_modules"
  (cd "$example" && npm ci --no-audit --no-fund --loglevel=error)
fi
