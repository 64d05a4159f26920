#!/bin/sh
# peer-torch-sim.sh — runs bench/peer-torch-sim.py (timeprest's simulator against PyTorch's
# _simulate_comms_compute on one schedule) in the virtual environment bench/torch-schedules.sh
# makes (torch from PyPI, at $TP_TORCH_VENV, default /tmp/tp-torch-venv).  Run from the build
# directory after `make`: sh bench/peer-torch-sim.sh ./timeprest [-w W] [-n N] [-r R]
set -e
here=$(cd "$(dirname "$0")" && pwd)
venv=${TP_TORCH_VENV:-/tmp/tp-torch-venv}
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet torch
fi
exec "$venv/bin/python" -W ignore "$here/peer-torch-sim.py" "$@"
