#!/bin/sh
# torch-venv.sh — the Python of a virtual environment with torch from PyPI, made once at
# $TP_TORCH_VENV (default /tmp/tp-torch-venv); prints its path.  The PyTorch scripts of bench/ run in it.
set -e
venv=${TP_TORCH_VENV:-/tmp/tp-torch-venv}
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet torch >&2
fi
echo "$venv/bin/python"
