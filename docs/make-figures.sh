#!/bin/sh
# make-figures.sh — regenerates the pictures of README.md with the tool itself.
# Usage: docs/make-figures.sh [BUILDDIR]   (run from the source tree)
set -e
tp=${1:-.}/timeprest
out=docs
$tp plot timeline -s timeprest -w 4 -n 2 -k 8 --versions -o $out/timeline-timeprest.png
$tp plot timeline -s pipedream --model vgg16-tinyimagenet --cluster C -n 4 --batch 128 -k 8 -o $out/timeline-pipedream-vgg16-C.png
$tp plot memory -s timeprest --model vgg16-tinyimagenet --cluster C -n 4 --batch 128 -o $out/memory-timeprest-vgg16-C.png
$tp plot memory -s pipedream --model vgg16-tinyimagenet --cluster C -n 4 --batch 128 -o $out/memory-pipedream-vgg16-C.png
$tp plot vmap -w 2-24 -n 2-16 -o $out/vmap.png
