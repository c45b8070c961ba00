#!/usr/bin/env bash
# Validate the NATS server configs in deploy/nats with `nats-server -t -c` (parse and check,
# no start). They must stay valid on nats-server 2.9.10 (Debian bookworm).
# Usage: scripts/check-nats-configs.sh [file.conf ...]   (default: deploy/nats/*.conf)
# The binary can be overridden with NATS_SERVER_BIN, as in test/helpers/nats-server.ts.
# Needs openssl too (scripts/dev-ca.sh makes the certificates the TLS fragments name), and
# Node: the server configs include creds/resolver.conf, which is made here with
# `sonar creds init`, as a deployer makes it (node_modules are installed and dist/ built if
# missing).
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
# ending `# 2.10+`. On an older server it is checked without those lines: every other line is
# still parsed and validated.
version="$("$bin" --version | sed -E 's/.*v([0-9]+)\.([0-9]+).*/\1 \2/')"
read -r major minor <<<"$version"
newer_than_2_9() { [[ "$major" -gt 2 || ( "$major" -eq 2 && "$minor" -ge 10 ) ]]; }

# The TLS fragments (tls.conf, cluster-tls.conf) name certificates under /etc/nats/certs,
# and `-t` loads them: every file is checked in a scratch copy of its directory (so its
# `include`s resolve) with those paths pointing at certificates made here by dev-ca.sh.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
"$root/scripts/dev-ca.sh" "$scratch/certs" sonar-nats-1 sonar-nats-2 sonar-nats-3 >/dev/null

# Secure mode: every server config includes ./creds/resolver.conf (operator JWT, system
# account, full resolver, preloaded accounts). Make a real one with the CLI, so that `-t`
# proves the include parses and its JWTs load on this server. A deployer's own
# deploy/nats/creds is never read.
# .ci/run calls this before `npm test` installs node_modules and builds dist/ (which
# bin/sonar.js loads): do both first if need be.
if [[ ! -d "$root/node_modules/tsx" ]]; then
  node "$root/scripts/setup.mjs"
fi
node "$root/scripts/ensure-build.mjs" >&2
node "$root/bin/sonar.js" creds init "$scratch/creds" --resolver-dir "$scratch/resolver" >/dev/null
resolver_include='^include \./creds/resolver\.conf[[:space:]]*$'

# A commented-out `# include ./tls.conf` or `# include ./cluster-tls.conf` is TLS a reader
# may turn on: a config holding one is checked a second time with it turned on.
tls_include='^([[:space:]]*)# (include \./(cluster-)?tls\.conf)[[:space:]]*$'

failed=0
check() { # check <label> <file in scratch>
  local out
  if out="$("$bin" -t -c "$2" 2>&1)"; then
    echo "ok    $1"
  else
    echo "FAIL  $1" >&2
    echo "$out" | sed 's/^/      /' >&2
    failed=1
  fi
}

for f in "${files[@]}"; do
  work="$scratch/$(basename "$f").d"
  mkdir -p "$work"
  cp "$(dirname "$f")"/*.conf "$work"/ 2>/dev/null || true
  cp "$f" "$work"/
  mkdir -p "$work/creds"
  cp "$scratch/creds/resolver.conf" "$work/creds/"
  sed -i "s#/etc/nats/certs/#$scratch/certs/#g" "$work"/*.conf
  target="$work/$(basename "$f")"
  label="${f#"$root"/}"
  if grep -q '^# requires: nats-server >= 2.10' "$f" && ! newer_than_2_9; then
    grep -v '# 2.10+$' "$f" | sed "s#/etc/nats/certs/#$scratch/certs/#g" >"$target"
    label+=" (without its 2.10+ lines: this server is older)"
  fi
  # A server config (it names its server) that does not include resolver.conf would let
  # every client in anonymously with full rights.
  if grep -q '^server_name:' "$f" && ! grep -Eq "$resolver_include" "$f"; then
    echo "FAIL  $label: no \`include ./creds/resolver.conf\` (secure mode)" >&2
    failed=1
  fi
  check "$label" "$target"
  if grep -Eq "$tls_include" "$target"; then
    sed -i -E "s|$tls_include|\1\2|" "$target"
    check "$label, TLS on" "$target"
  fi
done
exit "$failed"
