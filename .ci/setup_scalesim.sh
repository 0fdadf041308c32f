#!/usr/bin/env bash
# Create the SCALE-Sim v3 reference venv used by tests/test_systolic_scalesim.py. Idempotent.
# SCALE-Sim 3.0.0 crashes with numpy 2.4 (upstream issue #160), hence the pin.
# Override the location with ACCEL_SIM_SCALESIM_PYTHON=/path/to/venv/bin/python.
set -euo pipefail

PY="${ACCEL_SIM_SCALESIM_PYTHON:-$HOME/.cache/accel-sim/scalesim-venv/bin/python}"
VENV="$(dirname "$(dirname "$PY")")"

if [ -x "$PY" ] && "$PY" -c "import scalesim.scale_sim, numpy as n; assert tuple(map(int, n.__version__.split('.')[:2])) < (2, 4)" \
        >/dev/null 2>&1; then
    echo "SCALE-Sim venv ready: $VENV"
    exit 0
fi

mkdir -p "$(dirname "$VENV")"
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check "scalesim==3.0.0" "numpy<2.4"
"$PY" -c "import scalesim.scale_sim"
echo "SCALE-Sim venv created: $VENV"
