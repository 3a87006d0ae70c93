#!/usr/bin/env bash
# The whole test suite: installs missing tools, checks formatting, lints, the proto contract,
# runs every Rust test (Redis tests start their own redis-server), the Python client test
# against a real server, the Helm chart checks, and the README's commands as written.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step prints the minutes since the start, so a slow run shows where its time went (CI
# must stay under 30 minutes on two cores).
started=$SECONDS
elapsed() { printf '%dm%02ds' $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60)); }
step() { printf '\n==> %s (at %s)\n' "$*" "$(elapsed)"; }

step "setup"
scripts/setup.sh

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy"
cargo clippy --all-targets --all-features --locked -- -D warnings
# The server as shipped: without the `mock` feature.
cargo clippy --locked -- -D warnings

step "buf lint"
(cd proto && buf lint)

step "cargo test"
cargo test --locked --all-targets

step "fuzz (bounded)"
scripts/fuzz-bounded.sh

step "python client"
cargo build --locked --bins --features mock
.venv/bin/python -m pytest -q tests/python

if [ -x scripts/check-chart.sh ]; then
  step "helm chart"
  scripts/check-chart.sh
fi

# The Dockerfile's build command, so the image build is known to work.
step "release build (as the Dockerfile runs it)"
cargo build --release --locked

# The release benchmark and mock model, so that no README command waits on a link.
cargo build --release --locked --features mock --bin agentd-bench --bin mock-openai

# Last: the README's own commands need the release build (and build the release mock model).
step "README commands, run as written"
.venv/bin/python -m pytest -q -p no:cacheprovider tests/readme

printf '\nall checks passed in %s\n' "$(elapsed)"
