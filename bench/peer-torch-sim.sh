#!/bin/sh
# peer-torch-sim.sh — runs bench/peer-torch-sim.py (timeprest's simulator against PyTorch's
# _simulate_comms_compute on one schedule) in the virtual environment of bench/torch-venv.sh.  Run
# from the build directory after `make`: sh bench/peer-torch-sim.sh ./timeprest [-w W] [-n N] [-r R]
set -e
here=$(cd "$(dirname "$0")" && pwd)
py=$(sh "$here/torch-venv.sh")
exec "$py" -W ignore "$here/peer-torch-sim.py" "$@"
