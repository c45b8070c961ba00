#!/usr/bin/env bash
# A development certificate authority for TLS between Sonar and nats-server, and between the
# nodes of a NATS cluster (docs/operations.md, "TLS"). Not for production: keep a real CA's key offline.
#
# Usage: scripts/dev-ca.sh [--client] DIR [NAME ...]
#
# Writes into DIR (created if missing):
#   ca.pem, ca-key.pem          the CA (kept when present: certificates it signed stay valid)
#   server.pem, server-key.pem  the nats-server certificate, for the client port and the
#                               cluster routes (serverAuth and clientAuth: a route dials too);
#                               names: localhost, 127.0.0.1 and every NAME (a DNS name, a
#                               wildcard such as '*.nats-headless', or an IP address)
#   client.pem, client-key.pem  with --client: a client certificate for mutual TLS
#                               (SONAR_NATS_TLS_CERT and SONAR_NATS_TLS_KEY)
#
# Idempotent: a certificate is issued again only when missing, not signed by this CA, expiring
# within 30 days, or (the server's) for other names. Keys are 0600.
#
#   scripts/dev-ca.sh deploy/nats/certs sonar-nats-1 sonar-nats-2 sonar-nats-3   # compose
#   scripts/dev-ca.sh --client ./certs nats '*.nats-headless' \
#     nats.default.svc.cluster.local '*.nats-headless.default.svc.cluster.local'  # k8s
set -euo pipefail

usage() {
  echo "usage: scripts/dev-ca.sh [--client] DIR [NAME ...]" >&2
  exit 2
}

client=0
args=()
for arg in "$@"; do
  case "$arg" in
    --client) client=1 ;;
    -h | --help) usage ;;
    -*) echo "dev-ca: unknown option $arg" >&2; usage ;;
    *) args+=("$arg") ;;
  esac
done
[[ ${#args[@]} -ge 1 ]] || usage
dir="${args[0]}"
names=("${args[@]:1}")

if ! command -v openssl >/dev/null 2>&1; then
  echo "dev-ca: openssl not found on PATH: install it with \`apt-get install -y openssl\`" >&2
  exit 2
fi

mkdir -p "$dir"
# Every file is created private; certificates are opened up to 0644 once written.
umask 077

ca="$dir/ca.pem"
ca_key="$dir/ca-key.pem"
# Leaf certificates: under the 825 days some TLS clients cap a server certificate at.
leaf_days=825
renew_seconds=$((30 * 86400))

new_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# The subjectAltName list of names: localhost and 127.0.0.1 first, then the arguments.
san_list() {
  local name out="DNS:localhost,IP:127.0.0.1"
  for name in "$@"; do
    [[ "$name" == localhost || "$name" == 127.0.0.1 ]] && continue
    if [[ "$name" =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ || "$name" == *:* ]]; then
      out+=",IP:$name"
    else
      out+=",DNS:$name"
    fi
  done
  echo "$out"
}

# A SAN list in one canonical form (sorted, `IP:`), to compare requested with issued names.
canonical() { tr -d ' ' | sed 's/IPAddress:/IP:/g' | tr ',' '\n' | sed '/^$/d' | sort -u; }

issued_sans() {
  openssl x509 -in "$1" -noout -ext subjectAltName 2>/dev/null | tail -n +2 | canonical
}

# True when cert $1 (with key $2) can stay: signed by the CA and valid for 30 more days.
usable() {
  [[ -s "$1" && -s "$2" ]] || return 1
  openssl verify -CAfile "$ca" "$1" >/dev/null 2>&1 || return 1
  openssl x509 -in "$1" -noout -checkend "$renew_seconds" >/dev/null 2>&1
}

# issue NAME CN EXTENSIONS: a key and a certificate signed by the CA.
issue() {
  local base="$1" cn="$2" ext="$3" work
  work="$(mktemp -d)"
  printf '%s\n' "$ext" >"$work/ext.cnf"
  new_key "$dir/$base-key.pem"
  openssl req -new -key "$dir/$base-key.pem" -subj "/CN=$cn" -out "$work/req.csr"
  openssl x509 -req -in "$work/req.csr" -CA "$ca" -CAkey "$ca_key" \
    -set_serial "0x$(openssl rand -hex 16)" -days "$leaf_days" -sha256 \
    -extfile "$work/ext.cnf" -out "$dir/$base.pem" 2>/dev/null
  rm -rf "$work"
  chmod 0600 "$dir/$base-key.pem"
  chmod 0644 "$dir/$base.pem"
  echo "dev-ca: wrote $dir/$base.pem ($cn)"
}

# The CA: kept when both halves are there; a half alone is refused rather than replaced,
# since replacing it would invalidate every certificate it signed.
if [[ -s "$ca" && -s "$ca_key" ]]; then
  echo "dev-ca: kept $ca"
elif [[ -e "$ca" || -e "$ca_key" ]]; then
  echo "dev-ca: $ca and $ca_key must both exist or neither: remove the one left" >&2
  exit 1
else
  new_key "$ca_key"
  openssl req -x509 -new -key "$ca_key" -sha256 -days 3650 \
    -subj "/CN=Sonar development CA" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$ca"
  chmod 0644 "$ca"
  echo "dev-ca: wrote $ca"
fi
chmod 0600 "$ca_key"

sans="$(san_list "${names[@]+"${names[@]}"}")"
if usable "$dir/server.pem" "$dir/server-key.pem" &&
  [[ "$(issued_sans "$dir/server.pem")" == "$(echo "$sans" | canonical)" ]]; then
  echo "dev-ca: kept $dir/server.pem"
else
  issue server sonar-nats "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$sans"
fi
chmod 0600 "$dir/server-key.pem"

if [[ "$client" -eq 1 ]]; then
  if usable "$dir/client.pem" "$dir/client-key.pem"; then
    echo "dev-ca: kept $dir/client.pem"
  else
    issue client sonar "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
  fi
  chmod 0600 "$dir/client-key.pem"
fi
