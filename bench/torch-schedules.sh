#!/bin/sh
# torch-schedules.sh — runs bench/torch-schedules.py (PyTorch's schedules against timeprest's PyTorch
# CSV reader and writer) in the virtual environment of bench/torch-venv.sh.  Run from the build
# directory after `make`.
set -e
here=$(cd "$(dirname "$0")" && pwd)
py=$(sh "$here/torch-venv.sh")
exec "$py" "$here/torch-schedules.py" "$@"
