#!/usr/bin/env bash
# Debian's Chromium for the console's browser tests (Playwright drives it; it never downloads a browser).
# Installs the `chromium` package when /usr/bin/chromium is missing; sudo only when not root.
set -euo pipefail

CHROMIUM="${DUETIME_CHROMIUM:-/usr/bin/chromium}"
if [ -x "$CHROMIUM" ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
echo "browser-deps: installing chromium with apt-get" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium
[ -x "$CHROMIUM" ] || { echo "browser-deps: $CHROMIUM is still missing" >&2; exit 1; }
