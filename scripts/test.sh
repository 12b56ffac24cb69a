#!/usr/bin/env bash
# Run the whole test suite. Tests that need Docker start the engine themselves (tests/conftest.py)
# and stop it after if they started it.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m pytest -ra --durations=30 "$@"
