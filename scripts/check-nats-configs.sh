#!/usr/bin/env bash
# Validate the NATS server configs in deploy/nats with `nats-server -t -c` (parse and check,
# no start). They must stay valid on nats-server 2.9.10 (Debian bookworm).
# Usage: scripts/check-nats-configs.sh [file.conf ...]   (default: deploy/nats/*.conf)
# The binary can be overridden with NATS_SERVER_BIN, as in test/helpers/nats-server.ts.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${NATS_SERVER_BIN:-}"
if [[ -z "$bin" ]]; then
  bin="$(PATH="$PATH:/usr/sbin:/usr/local/sbin" command -v nats-server || true)"
fi
if [[ -z "$bin" || ! -x "$bin" ]]; then
  echo "check-nats-configs: nats-server not found on PATH: install it with \`apt-get install -y nats-server\`" >&2
  exit 2
fi

if [[ $# -gt 0 ]]; then
  files=("$@")
else
  shopt -s nullglob
  files=("$root"/deploy/nats/*.conf)
fi
if [[ ${#files[@]} -eq 0 ]]; then
  echo "check-nats-configs: no config files found in deploy/nats" >&2
  exit 2
fi

echo "check-nats-configs: $("$bin" --version)"
# A config marked `# requires: nats-server >= 2.10` holds settings 2.9 refuses, each on a line
# ending `# 2.10+`. On an older server it is checked without those lines, in a copy beside it
# (so its `include`s resolve): every other line is still parsed and validated.
version="$("$bin" --version | sed -E 's/.*v([0-9]+)\.([0-9]+).*/\1 \2/')"
read -r major minor <<<"$version"
newer_than_2_9() { [[ "$major" -gt 2 || ( "$major" -eq 2 && "$minor" -ge 10 ) ]]; }

failed=0
for f in "${files[@]}"; do
  check="$f"
  note=""
  if grep -q '^# requires: nats-server >= 2.10' "$f" && ! newer_than_2_9; then
    check="$(dirname "$f")/.check-$(basename "$f")"
    grep -v '# 2.10+$' "$f" >"$check"
    note=" (without its 2.10+ lines: this server is older)"
  fi
  if out="$("$bin" -t -c "$check" 2>&1)"; then
    echo "ok    ${f#"$root"/}$note"
  else
    echo "FAIL  ${f#"$root"/}$note" >&2
    echo "$out" | sed 's/^/      /' >&2
    failed=1
  fi
  [[ "$check" != "$f" ]] && rm -f "$check"
done
exit "$failed"
