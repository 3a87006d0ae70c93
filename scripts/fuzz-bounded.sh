#!/usr/bin/env bash
# The fuzz target fuzz/fuzz_targets/decode_requests.rs, built as a plain workspace member on
# the debug build's dependencies (no coverage instrumentation: that needs `cargo fuzz`, which
# rebuilds every crate), then run for a bounded, seeded number of cases from the committed
# seed corpus. Without coverage libFuzzer mutates blindly, so this proves the target builds,
# every seed goes through, and random requests never panic; real fuzzing: README, "Property
# tests and fuzzing". Extra arguments go to libFuzzer (e.g. -runs=5000000).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --locked -p agentd-fuzz
target_dir="${CARGO_TARGET_DIR:-target}"
# libFuzzer adds new inputs to its first corpus directory: a scratch one, so the committed
# seeds stay as generated. A crashing input is kept under target/ and its path printed.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$target_dir/fuzz-artifacts"
"$target_dir/debug/decode_requests" "$scratch" fuzz/corpus/decode_requests \
  -runs=500000 -seed=1 -max_len=4096 -len_control=0 \
  -artifact_prefix="$target_dir/fuzz-artifacts/" "$@"
