#!/bin/sh
# peer-llama.sh — llama-tiny trained by timeprest and by PyTorch (bench/peer-torch-llama.py, the same
# network, AdamW, random tokens) in alternating rounds on the same threads: timeprest's
# tokens_per_second (training time only) of `train -s gpipe -w 1 -n 1 --threads T` against
# PyTorch's at batch B on T threads (with its explicit attention products and with its fused
# scaled_dot_product_attention), and TiMePReSt at W = 2, N = 4 (one thread a stage) against PyTorch
# on two threads.  Best of R rounds each.  Not part of `make check`.
# Usage: bench/peer-llama.sh [BUILDDIR [K [R]]]   (env: VENV, default /tmp/tp-torch-venv; bench/torch-venv.sh makes it)
set -e
b=${1:-.}
k=${2:-6}
r=${3:-3}
venv=${VENV:-/tmp/tp-torch-venv}
py="$venv/bin/python"
src=$(cd "$(dirname "$0")/.." && pwd)
field() { sed -n "s/.*\"$1\": \\([-0-9.e+]*\\).*/\\1/p" | head -n 1; }
best() { sort -g | tail -n 1; }
tp() { # preset W N T
  "$b/timeprest" train -m llama-tiny -s "$1" -w "$2" -n "$3" --threads "$4" -k "$k" --batch 32 \
    --data synthetic:$((32 * k + 64)):32 --optimizer adamw --profile-reps 1 -f json -q | field tokens_per_second
}
torch() { "$py" "$src/bench/peer-torch-llama.py" -k "$k" --threads "$1" $2 2>/dev/null | field tokens_per_second; }
: >/tmp/peer-llama.$$
for i in $(seq "$r"); do
  echo "tp1 $(tp gpipe 1 1 1)" >>/tmp/peer-llama.$$
  echo "pt1 $(torch 1)" >>/tmp/peer-llama.$$
  echo "pt1s $(torch 1 --sdpa)" >>/tmp/peer-llama.$$
  echo "tp2 $(tp timeprest 2 4 1)" >>/tmp/peer-llama.$$
  echo "pt2 $(torch 2)" >>/tmp/peer-llama.$$
  echo "pt2s $(torch 2 --sdpa)" >>/tmp/peer-llama.$$
done
for key in tp1 pt1 pt1s tp2 pt2 pt2s; do
  echo "$key $(awk -v k="$key" '$1 == k { print $2 }' /tmp/peer-llama.$$ | best) $(awk -v k="$key" '$1 == k { printf "%s%.0f", (n++ ? "," : ""), $2 }' /tmp/peer-llama.$$)"
done | awk '{ v[$1] = $2; all[$1] = $3 }
  END {
    printf "llama-tiny, batch 32 sequences of 128 tokens, AdamW; tokens/s, best of the rounds (all rounds)\n"
    printf "1 thread:  timeprest gpipe W=1 %.0f (%s) | PyTorch %.0f (%s) | PyTorch sdpa %.0f (%s) | ratio %.2f, %.2f\n",
      v["tp1"], all["tp1"], v["pt1"], all["pt1"], v["pt1s"], all["pt1s"], v["tp1"] / v["pt1"], v["tp1"] / v["pt1s"]
    printf "2 threads: timeprest W=2 N=4 %.0f (%s) | PyTorch %.0f (%s) | PyTorch sdpa %.0f (%s) | ratio %.2f, %.2f\n",
      v["tp2"], all["tp2"], v["pt2"], all["pt2"], v["pt2s"], all["pt2s"], v["tp2"] / v["pt2"], v["tp2"] / v["pt2s"]
  }'
rm -f /tmp/peer-llama.$$
