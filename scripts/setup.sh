#!/usr/bin/env bash
# Set up a fresh Debian 12 machine for showcase, as root. Idempotent: a second run only checks.
# System packages (Debian's chromium, ffmpeg, docker.io, debootstrap), the browser's system user
# showcase-browser, a virtualenv in .venv with showcase installed editable, and the offline npm
# cache of the task's import map.
# --engine: also make sure a Docker engine answers (starts dockerd in the background if none does;
# it keeps running for you afterwards). The tests start and stop their own engine.
set -euo pipefail
engine=0
for arg in "$@"; do
  case "$arg" in
    --engine) engine=1 ;;
    *) echo "usage: scripts/setup.sh [--engine]" >&2; exit 2 ;;
  esac
done
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

# The checker's Chromium runs as this system user (no login, no home, no password); showcase as
# root refuses to open a page without it. Not as root, showcase uses its own namespaces instead.
if [ "$(id -u)" = 0 ] && ! getent passwd showcase-browser >/dev/null; then
  echo "setup: adding the system user showcase-browser (the browser runs as it)"
  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin --user-group showcase-browser
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
stamp=.venv/.showcase-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing showcase into .venv"
  .venv/bin/pip install -q --disable-pip-version-check -e '.[test,ray]'  # ray: the --ray tests (about 80 MB)
  touch "$stamp"
fi

.venv/bin/showcase doctor >/dev/null || .venv/bin/showcase doctor

if [ "$engine" = 1 ] && ! docker info >/dev/null 2>&1; then
  echo "setup: starting dockerd (log: /var/log/showcase-dockerd.log)"
  nohup dockerd >>/var/log/showcase-dockerd.log 2>&1 &
  for _ in $(seq 1 120); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || { echo "setup: dockerd did not answer within 60 s; see /var/log/showcase-dockerd.log" >&2; exit 3; }
fi
echo "setup: ready (.venv/bin/showcase)"
