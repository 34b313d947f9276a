#!/usr/bin/env bash
# Debian packages crawlfleet's local services need: redis-server, zookeeper, a JRE (and python3-venv for the
# system Python), plus Debian's chromium and its matching chromium-driver for the manager's browser tests, and
# chromium-headless-shell, the browser workers render pages with (spiders/render, through Playwright's
# executable_path; never a downloaded browser: `playwright install` is never run), and Debian's prometheus: its
# promtool checks the alert rules, and its server (run from the tests with their own config and data directory; the
# service is stopped) scrapes a fleet through its file_sd file (tests/e2e/test_prometheus.py) and answers the
# Kubernetes manifests' autoscaling trigger (tests/e2e/test_k8s_manifest_run.py). Installs only what is missing, so
# a second run is a few stat calls.
set -euo pipefail

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
[ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
[ -x /usr/lib/chromium/chromium-headless-shell ] || missing+=(chromium-headless-shell)
{ command -v prometheus && command -v promtool; } >/dev/null 2>&1 || missing+=(prometheus)  # server and promtool

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "crawlfleet needs these Debian packages: ${missing[*]}" >&2
  echo "run as root, or install them first: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi

echo "installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian's packages start their own daemons where an init system runs; crawlfleet starts its own on free ports.
for unit in redis-server zookeeper prometheus; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$unit" 2>/dev/null; then
    systemctl stop "$unit" || true
  fi
done
