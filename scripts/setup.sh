#!/usr/bin/env bash
# Set up a fresh Debian 12 machine for showcase, as root. Idempotent: a second run only checks.
# System packages (Debian's chromium, ffmpeg, docker.io, debootstrap), a virtualenv in .venv with
# showcase installed editable, and the offline npm cache of the task's import map.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(chromium ffmpeg docker.io debootstrap iproute2 curl)
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
stamp=.venv/.showcase-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing showcase into .venv"
  .venv/bin/pip install -q --disable-pip-version-check -e '.[test]'
  touch "$stamp"
fi

.venv/bin/showcase doctor >/dev/null || .venv/bin/showcase doctor
echo "setup: ready (.venv/bin/showcase)"
