#!/usr/bin/env bash
# Installs what the web page tests and the screenshot command need: Debian's headless
# Chromium, its chromedriver, and a font for Chinese (fonts-noto-cjk). Idempotent and
# quiet: does nothing when all are present. Run as root (or with sudo available).
set -euo pipefail

packages=(chromium chromium-driver fonts-noto-cjk)
missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install_browser.sh: need root to install ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! { $sudo apt-get update -qq && \
       $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
         "${missing[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "install_browser.sh: could not install ${missing[*]}" >&2
  exit 1
fi
echo "install_browser.sh: installed ${missing[*]}"
