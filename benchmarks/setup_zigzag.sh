#!/usr/bin/env bash
# Create the ZigZag 3.9.1 reference venv used by benchmarks/bench_mapper.py. Idempotent.
# The zigzag-dse 3.9.1 wheel imports `six` without declaring it, hence the explicit install.
# Override the location with ACCEL_SIM_ZIGZAG_PYTHON=/path/to/venv/bin/python.
set -euo pipefail

PY="${ACCEL_SIM_ZIGZAG_PYTHON:-$HOME/.cache/accel-sim/zigzag-venv/bin/python}"
VENV="$(dirname "$(dirname "$PY")")"

if [ -x "$PY" ] && "$PY" -c "import six, zigzag.api; from importlib.metadata import version; \
assert version('zigzag-dse') == '3.9.1'" >/dev/null 2>&1; then
    echo "ZigZag venv ready: $VENV"
    exit 0
fi

mkdir -p "$(dirname "$VENV")"
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check "zigzag-dse==3.9.1" six
"$PY" -c "import zigzag.api; from zigzag.api import get_hardware_performance_zigzag"
echo "ZigZag venv created: $VENV"
