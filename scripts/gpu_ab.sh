#!/usr/bin/env bash
# Speed of several source trees of convt on one GPU, in one session: installs each tree's
# Python package in turn, runs the same `convt bench` on it (which also checks every case
# against PyTorch), and compares the runs case by case (scripts/bench_compare.py).
#
#   bash scripts/gpu_ab.sh [convt bench arguments] -- NAME=DIR[,VAR=VALUE...] ...
#
# VAR=VALUE pairs after a tree set environment variables for its bench only (e.g.
# CONVT_TMA_MMA=wgmma); a tree named again right after itself is not installed again.
#
# For example, a branch against the working tree: export it first,
#   mkdir -p ab/x && git archive exp/x | tar -x -C ab/x
# then, on the GPU machine (with ab/ carried along: it is not tracked),
#   bash scripts/gpu_ab.sh --dtype fp32,bf16 --math default -- base=. x=ab/x
# The first tree's bench is preceded by a throw-away one (AB_WARMUP=0 skips it).
# Logs and JSON go to $OUT (default ./out): ab-NAME-install.log, ab-NAME-bench.log,
# bench-NAME.json, ab-compare.txt. The first tree is the reference of the ratios.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export CONVT_CUDA_ARCHS=${CONVT_CUDA_ARCHS:-90a}
export PYTHONUNBUFFERED=1

bench_args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  bench_args+=("$1")
  shift
done
if [ $# -lt 2 ]; then
  echo "usage: bash scripts/gpu_ab.sh [convt bench arguments] -- NAME=DIR[,VAR=VALUE...] ..." >&2
  exit 2
fi
shift

jsons=()
installed=""
for spec in "$@"; do
  name=${spec%%=*}
  rest=${spec#*=}
  dir=${rest%%,*}
  envs=()
  [ "$rest" != "$dir" ] && IFS=, read -r -a envs <<<"${rest#*,}"
  if [ "$name" = "$spec" ] || [ ! -f "$dir/pyproject.toml" ]; then
    echo "$spec: expected NAME=DIR[,VAR=VALUE...], DIR a convt source tree" >&2
    exit 2
  fi
  t0=$(date +%s)
  if [ "$dir" != "$installed" ]; then
    installed=""
    if ! (cd "$dir" && CONVT_ENABLE_CUDA=ON python3 -m pip install --no-build-isolation --no-deps .) \
        >"$OUT/ab-$name-install.log" 2>&1; then
      echo "$name: install failed (ab-$name-install.log)"
      tail -n 20 "$OUT/ab-$name-install.log"
      continue
    fi
    installed=$dir
  fi
  t1=$(date +%s)
  if [ ${#jsons[@]} -eq 0 ] && [ "${AB_WARMUP:-1}" != 0 ]; then
    # A throw-away run first: on a fresh machine the first bench ran 4-40% slower on every
    # case (H200; docs/kernels.md, the even-width experiment). AB_WARMUP=0 skips it.
    env "${envs[@]}" python3 -m convt bench "${bench_args[@]}" --reps 3 -q \
      >"$OUT/ab-warmup.log" 2>&1
  fi
  env "${envs[@]}" python3 -m convt bench "${bench_args[@]}" --json "$OUT/bench-$name.json" -q \
    >"$OUT/ab-$name-bench.log" 2>&1
  rc=$?
  echo "$name: install $((t1 - t0))s, bench rc=$rc $(($(date +%s) - t1))s"
  grep -E "geomean|FAIL" "$OUT/ab-$name-bench.log" | sed "s/^/  /"
  [ -f "$OUT/bench-$name.json" ] && jsons+=("$OUT/bench-$name.json")
done
if [ ${#jsons[@]} -ge 2 ]; then
  python3 scripts/bench_compare.py "${jsons[@]}" | tee "$OUT/ab-compare.txt"
fi
