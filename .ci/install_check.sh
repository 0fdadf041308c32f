#!/usr/bin/env bash
# Prove a non-editable install works: `pip install .` of this tree into a throwaway venv (no
# extras), then run the CLI from a directory outside the repository, where only the installed
# package (and its data in accel_sim/_data/) can be found. Wheels come from pip's cache.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/accel-sim-install.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# a copy of the tree without build outputs or venvs (a stale build/ would leak into the wheel)
mkdir "$WORK/src"
tar -C "$ROOT" --exclude=./.git --exclude='./.venv*' --exclude=./build --exclude=./results \
    --exclude='*.egg-info' --exclude=__pycache__ --exclude=.ipynb_checkpoints -cf - . \
    | tar -C "$WORK/src" -xf -

"$PYTHON" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install --disable-pip-version-check -q "$WORK/src"
rm -rf "$WORK/src"                    # nothing of the source tree is left to be found

cd "$WORK"
export PATH="$WORK/venv/bin:$PATH" MPLBACKEND=Agg
run() { echo "\$ $*"; "$@" > out.txt; head -n 3 out.txt; }

python - <<'PY'
import importlib.metadata, pathlib, sys
import accel_sim
from accel_sim import resources
site = pathlib.Path(sys.prefix).resolve()
assert pathlib.Path(accel_sim.__file__).resolve().is_relative_to(site), accel_sim.__file__
assert resources.data_root().is_relative_to(site), resources.data_root()
assert accel_sim.__version__ == importlib.metadata.version("accel-sim")
for kind in resources.KINDS:
    names = resources.list_names(kind)
    assert names and all(resources.resolve(kind, n) for n in names), kind
print("installed", accel_sim.__version__, "data at", resources.data_root())
PY
run accel-sim --version
run accel-sim --help
run accel-sim arch list
grep -qx ascend_like_cube out.txt
run accel-sim run --gemm 64x64x64 --dataflow w8a8
run accel-sim run --arch arch_configs/edge_npu_int8.yaml --gemm 16x256x256 --dataflow w8a8 --json
run accel-sim model qwen3-8b --phase decode --tokens 8 --dataflow w8a8
run accel-sim trace stats traces/smollm2-135m --json
echo "non-editable install: ok"
