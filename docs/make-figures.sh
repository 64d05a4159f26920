#!/bin/sh
# make-figures.sh — regenerates the pictures of README.md and docs/ with the tool itself.
# Usage: docs/make-figures.sh [BUILDDIR]   (run from the source tree)
# With a cost model the nf1b and 1f1b-async orders are fixed on the costs (the default); the
# TiMePReSt timeline is drawn in both orders to show what the unit-slot order costs.
set -e
tp=${1:-.}/timeprest
out=docs
vgg="--model vgg16-tinyimagenet --cluster C -n 4 --batch 128"
$tp plot timeline -s timeprest -w 4 -n 2 -k 8 --versions -o $out/timeline-timeprest.png
$tp plot timeline -s pipedream $vgg -k 8 -o $out/timeline-pipedream-vgg16-C.png
$tp plot timeline -s timeprest $vgg -k 8 -o $out/timeline-timeprest-vgg16-C.png
$tp plot timeline -s timeprest $vgg -k 8 --order-from slots -o $out/timeline-timeprest-vgg16-C-slots.png
$tp plot memory -s timeprest $vgg -o $out/memory-timeprest-vgg16-C.png
$tp plot memory -s pipedream $vgg -o $out/memory-pipedream-vgg16-C.png
$tp plot vmap -w 2-24 -n 2-16 -o $out/vmap.png
