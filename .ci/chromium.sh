#!/usr/bin/env bash
# Makes sure Debian's chromium and chromium-driver are here for the dashboard's browser test
# (python-client/tests/e2e/test_dashboard_browser.py). Installs them with apt when root and
# missing; elsewhere says what to install. Cheap when both are present.
#
# Exit status: 0 = /usr/bin/chromium and /usr/bin/chromedriver are there; 3 = they cannot be
# installed here (the reason is printed; the browser test then skips saying why).
set -euo pipefail

have() { [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; }

have && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "chromium: /usr/bin/chromium or /usr/bin/chromedriver is missing and this is not root" \
       "with apt-get; install them (Debian: sudo apt-get install chromium chromium-driver)" \
       "or the dashboard's browser test skips" >&2
  exit 3
fi
echo "chromium: installing chromium and chromium-driver with apt-get"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null || { echo "chromium: apt-get update failed" >&2; exit 3; }
apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null \
  || { echo "chromium: apt-get install chromium chromium-driver failed" >&2; exit 3; }
have || { echo "chromium: installed, but /usr/bin/chromium or chromedriver is missing" >&2; exit 3; }
