#!/bin/sh
# gtest-tap.sh — runs one GLib test program in TAP mode for Automake's tap-driver.
exec "$1" --tap -k
