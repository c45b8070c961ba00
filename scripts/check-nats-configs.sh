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
failed=0
for f in "${files[@]}"; do
  if out="$("$bin" -t -c "$f" 2>&1)"; then
    echo "ok    ${f#"$root"/}"
  else
    echo "FAIL  ${f#"$root"/}" >&2
    echo "$out" | sed 's/^/      /' >&2
    failed=1
  fi
done
exit "$failed"
