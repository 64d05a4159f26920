#!/bin/sh
# torch-schedules.sh — runs bench/torch-schedules.py (PyTorch's schedules against timeprest's PyTorch
# CSV reader and writer) in a virtual environment with torch from PyPI, made once at $TP_TORCH_VENV
# (default /tmp/tp-torch-venv).  Run from the build directory after `make`.
set -e
here=$(cd "$(dirname "$0")" && pwd)
venv=${TP_TORCH_VENV:-/tmp/tp-torch-venv}
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet torch
fi
exec "$venv/bin/python" "$here/torch-schedules.py" "$@"
