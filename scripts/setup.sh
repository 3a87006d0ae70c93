#!/usr/bin/env bash
# Installs what the test suite needs, idempotently: Debian redis-server, the Rust lint
# components, buf (npm) and the Python packages of the client and chart tests.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v redis-server >/dev/null 2>&1; then
  echo "setup: installing redis-server"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq redis-server >/dev/null
fi

for component in rustfmt clippy; do
  if ! rustup component list --installed 2>/dev/null | grep -q "^${component}"; then
    echo "setup: installing rust component ${component}"
    rustup component add "${component}"
  fi
done

if ! command -v buf >/dev/null 2>&1; then
  echo "setup: installing buf"
  npm install -g --silent @bufbuild/buf@1.75.0 >/dev/null
fi

for requirements in tests/python/requirements.txt tests/helm/requirements.txt; do
  [ -f "$requirements" ] || continue
  # Pinned versions: when all are satisfied pip answers locally, without the network.
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -r "$requirements"
done
