#!/usr/bin/env bash
# `make install` on a fresh clone with cold pip, uv and npm caches, for each ref given, back to
# back: what a fresh CI machine pays. Usage: bench/fresh_install.sh [REF...] (default: HEAD).
# Each clone goes to a temporary directory, removed afterwards; prints seconds and load average.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
for ref in "${@:-HEAD}"; do
  scratch="$(mktemp -d)"
  git clone -q "$repo" "$scratch/clone"
  git -C "$scratch/clone" checkout -q "$(git -C "$repo" rev-parse "$ref")"
  load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
  start=$(date +%s)
  status=0
  (cd "$scratch/clone" && PIP_CACHE_DIR="$scratch/pip" UV_CACHE_DIR="$scratch/uv" \
    npm_config_cache="$scratch/npm" make install > "$scratch/install.log" 2>&1) || status=$?
  seconds=$(( $(date +%s) - start ))
  echo "$ref: make install exit $status in ${seconds} s (load before: $load_before; after: $(cut -d' ' -f1-3 /proc/loadavg))"
  [ "$status" -eq 0 ] || tail -20 "$scratch/install.log"
  rm -rf "$scratch"
done
