#!/bin/sh
# install-deps.sh — Debian packages timeprest builds, tests and plots with (run as root or via sudo).
set -e
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential autoconf automake libtool pkg-config bc \
  libglib2.0-dev libjson-glib-dev libopenblas-dev zlib1g-dev libssl-dev \
  gnuplot-nox dataset-fashion-mnist fortunes \
  libopenmpi-dev openmpi-bin >/dev/null
