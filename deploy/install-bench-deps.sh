#!/usr/bin/env bash
# Debian packages only the benchmarks need (`make bench`): nginx, the static site server of `python -m bench.crawl`.
# Installs only what is missing, so a second run is one stat call. bench.crawl starts its own nginx on loopback with
# a generated configuration; the daemon Debian's package may start is stopped.
set -euo pipefail

[ -x /usr/sbin/nginx ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "the benchmarks need nginx: run as root, or install it first: sudo apt-get install -y nginx-light" >&2
  exit 1
fi

echo "installing Debian packages: nginx-light"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends nginx-light >/dev/null
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet nginx 2>/dev/null; then
  systemctl stop nginx || true
fi
