#!/usr/bin/env bash
# The full check on a CUDA machine: build for sm_90a with all cores, run the C++ and
# Python GPU tests, compute-sanitizer on the CUDA tests, and the benchmark.
# Logs and JSON go to $OUT (default ./out).
#
#   bash scripts/gpu_check.sh                 # all steps
#   bash scripts/gpu_check.sh build ctest     # chosen steps: build ctest sanitize python bench overhead
#   PYTEST_FILES='tests/python/test_[a-f]*.py' bash scripts/gpu_check.sh python   # part of the Python tests
#   bash scripts/gpu_check.sh build install bench-fwd ncu   # a forward-performance iteration
#   bash scripts/gpu_check.sh build fastpath sanitize-fastpath   # the forward kernels' tests
#   bash scripts/gpu_check.sh build direct-test   # the direct forward's tests and sanitizers
#   bash scripts/gpu_check.sh build few-test install few-ab   # few input channels on wgmma (CONVT_WG_FEW)
#   bash scripts/gpu_check.sh install ncu-suite   # Nsight Compute metrics of every suite case
#     (NCU_SUITE=models for another suite, NCU_CASES / NCU_DTYPES / NCU_MATH to narrow it)
#   NCU_CASE="kb57 --dtype bf16 --kernel implicit_gemm_wgmma" bash scripts/gpu_check.sh \
#     build install ncu-src   # stall reasons and per-instruction samples of one kernel
#   bash scripts/gpu_check.sh install layout-sweep   # the wgmma tiles' layouts against its planner's
#   bash scripts/gpu_check.sh install even-ab   # pair-aligned tile layouts: the default against none and everywhere
#   bash scripts/gpu_check.sh install f32-aligned-ab   # float32 on wgmma with aligned layouts (CONVT_WG_F32_ALIGNED)
#   bash scripts/gpu_check.sh install planes-ab   # float32 planes on wgmma whatever the reduction (CONVT_WG_F32_PLANES)
#   bash scripts/gpu_check.sh install reduction16-ab   # 16-bit layers the reduction rule gives the TMA kernel
#   bash scripts/gpu_check.sh install reduction16b-ab   # that rule lifted (CONVT_WG_REDUCTION16=0), a second draw
#   bash scripts/gpu_check.sh install f32-pairs-ab   # float32 W phase pairs wherever they run (CONVT_WG_F32_PAIRS)
#   bash scripts/gpu_check.sh install f32-pairs-1d-ab   # those pairs on 1-D layers, against without
#   bash scripts/gpu_check.sh install hfirst-ab   # more H taps a K step where the boxes shrink (CONVT_WG_HFIRST)
#   bash scripts/gpu_check.sh install hfirst-held-ab   # the same, the default against off, on a later draw
#   bash scripts/gpu_check.sh install xp-hfull-ab   # float32 H-complete K steps transposed in the kernel, on against off (CONVT_WG_XP_HFULL)
#   bash scripts/gpu_check.sh install xp-hfull3-ab   # the same with float32 stages given up down to two (CONVT_WG_XP_HFULL=3)
#   bash scripts/gpu_check.sh install xp-unaligned-ab   # inputs the transposition cannot read in place planned as the copy (CONVT_WG_XP_UNALIGNED)
#   bash scripts/gpu_check.sh install xp-rows-ab   # tiles of enough rows for the H-complete step transposed in the kernel (CONVT_WG_XP_ROWS)
#   bash scripts/gpu_check.sh install xp-even-ab   # the transposition over pair-aligned layouts (CONVT_WG_XP_OVER_EVEN), opt-in
#   bash scripts/gpu_check.sh build install sc-segs-ab   # scattered W taps in segments of long rows (CONVT_WG_SC_SEGS), opt-in
#   bash scripts/gpu_check.sh build install sc-segs2-ab   # the same with a staging area grown up to twice the default (CONVT_WG_SC_SEGS=2)
#   bash scripts/gpu_check.sh install sc-wup-ab   # both of those defaults against as before, held-out layers and the model suites
#   bash scripts/gpu_check.sh install sc-xp-ab   # the W phase pairs transposed in the kernel over scattered W taps (CONVT_WG_SC_XP=1: whatever their boxes)
#   bash scripts/gpu_check.sh install sc-xp-held-ab   # those pairs where their boxes are few (the default) against scattered taps, held-out layers
#   bash scripts/gpu_check.sh install volume-sparse-ab   # 3-D layers declined for the wgmma tile's dropped positions, against it forced
#   bash scripts/gpu_check.sh install volume-held-ab   # sparse volumes on the wgmma kernel (the default) against the rules of planes, held-out layers
#   bash scripts/gpu_check.sh install f32-rows-held-ab   # strided 1-D float32 layers on the wgmma kernel (the default) against the reduction rules, held-out layers
#   bash scripts/gpu_check.sh install f32-rows-held2-ab   # the same on a draw made after its bound (2.5) was set
#   bash scripts/gpu_check.sh install wtap1-ab   # layers of one W tap and a W stride: as dispatched against the TMA kernel forced
#   bash scripts/gpu_check.sh build xp-coop-test install xp-coop-ab   # two warpgroups over the input transposed in the kernel (CONVT_WG_XP_COOP=1): tests, sanitizers, A/B
#     (build xp-coop-sanitize: the sanitizers on its tests alone)
#   bash scripts/gpu_check.sh install xp-coop-held-ab   # its default rule on the held-out draw
#   bash scripts/gpu_check.sh install xp-coop-macs-ab   # two warpgroups transposing past 768 multiply-adds per input element (CONVT_WG_XP_COOP_MACS)
#   bash scripts/gpu_check.sh build xp-w2-test install xp-w2-ab   # two transposer warps (the default) against one (CONVT_WG_XP_WARPS=1): tests, sanitizers, A/B
#   bash scripts/gpu_check.sh install xp-w2-held-ab   # the same A/B on the held-out draws
#   bash scripts/gpu_check.sh build rules-test   # the layers the dispatch rules move, and the two-warpgroup transposition's tests
#   bash scripts/gpu_check.sh install few-out-ab   # few output channels (1-4): the default against the direct and TMA kernels (FEW_OUT_SUITE)
#   bash scripts/gpu_check.sh build fold-test install fold-ab   # GEMM and fold: tests, sanitizers, A/B on few output channels (FEW_OUT_SUITE)
#     (FEW_OUT_SUITE=scripts/suites/few_outputs_third.json: the draw that checks the rule for several row tiles)
#   bash scripts/gpu_check.sh install fold-models   # GEMM and fold on published last layers
#   bash scripts/gpu_check.sh install fold-draws   # GEMM and fold against off and forced on every few-output draw (FOLD_SUITES)
#   bash scripts/gpu_check.sh build store4-test install store4-ab   # the wgmma epilogues storing four outputs a lane (CONVT_WG_STORE4=1): tests, sanitizers, A/B
#   bash scripts/gpu_check.sh install export-time   # an exported solution's first build and check (EXPORT_CASE)
#   AUDIT_SUITE=scripts/suites/dispatch_audit_wide.json bash scripts/gpu_check.sh install dispatch-audit   # the audit on wider groups (4-256 channels, 1-4 groups, strides up to 4)
#   bash scripts/gpu_check.sh build install wprobe   # the weight tiles' L2 traffic's cost: KernelBench under CONVT_WG_WREUSE=2 (a probe, wrong results)
#   bash scripts/gpu_check.sh install wup-ab   # zeros inserted along W against without, by input / output bytes (CONVT_WG_WUP=0)
#   bash scripts/gpu_check.sh install xp-hfull16-ab   # the same in 16-bit types (CONVT_WG_XP_HFULL=2, the default) against float32 only
#   bash scripts/gpu_check.sh install volumes-ab   # volumes on wgmma whatever the reduction (CONVT_WG_VOLUMES)
#   bash scripts/gpu_check.sh install xp-ring-ab   # the in-kernel transposition's supply (CONVT_WG_XP_EARLY, CONVT_WG_XP_RING)
#   NCU_CASE="kb71 --dtype bf16;CONVT_WG_WV=114 kb71 --dtype bf16" NCU_KERNEL=fprop_wgmma \
#     bash scripts/gpu_check.sh install ncu-src   # the same under another setting, side by side
#   bash scripts/gpu_check.sh install bench-strict   # strict float32 forward, 10 runs a side
#   bash scripts/gpu_check.sh install bench-models   # the layers of published models (--suite models)
#   bash scripts/gpu_check.sh build tsplit-test install tsplit-ab   # taps split: tests, sanitizers, A/B (CONVT_WG_TSPLIT)
#   bash scripts/gpu_check.sh install kernel-times   # the GPU's time alone, convt against PyTorch, with each side's kernels
#   bash scripts/gpu_check.sh install host-time   # host time per call on those layers, and in the bench's interleaving (scripts/host_time.py)
#   bash scripts/gpu_check.sh install tile-sweep   # the TMA kernel's tiles against its planner
#   bash scripts/gpu_check.sh build install wgmma   # the TMA kernel on wgmma: tests, sanitizers, timing
#   bash scripts/gpu_check.sh install owners   # tap-less W phases by their owners, on and off
#   bash scripts/gpu_check.sh build wg-test wg-sanitize install wg-bench   # the persistent wgmma kernel
#     (WG_TEST_ENV="NAME=VALUE" runs its tests a second time with that setting; WG_FILTER
#     picks the tests, a gtest filter)
#   bash scripts/gpu_check.sh build install wg-strict   # strict float32 on the wgmma kernel
#   bash scripts/gpu_check.sh build install wg-steps   # the wgmma kernel's K steps against its planner
#   bash scripts/gpu_check.sh install wup   # zeros inserted along W, on against off
#   bash scripts/gpu_check.sh build install raw   # the input read in place, on against off
#   bash scripts/gpu_check.sh build install fold   # W taps folded into N wherever they can be, against nowhere
#   bash scripts/gpu_check.sh build mfold install mfold-ab   # W taps stacked in M: tests, sanitizers, A/B (CONVT_WG_MFOLD)
#   bash scripts/gpu_check.sh install install-old odd-ab   # stores by runs of adjacent outputs, against the tree in ./ab
#   bash scripts/gpu_check.sh install xp-more-ab   # the input transposed in the kernel where the rules keep the copy (kb70 bf16, kb78 fp32)
#   bash scripts/gpu_check.sh build install merge   # W phases merged wherever W is strided, against not
#   bash scripts/gpu_check.sh install copier-ab   # the copier warps' variants against the defaults
#   bash scripts/gpu_check.sh install small-ab   # the models suite's layers under the planner's knobs
#   bash scripts/gpu_check.sh install splitk-models   # split K forced (2, 4) on the model suites
#   bash scripts/gpu_check.sh install pairs-ab   # W phase pairs (channel-major, float32 one-tap) on and off
#   bash scripts/gpu_check.sh install gmerge-ab   # groups merged (CONVT_WG_GMERGE) against the default and none
#   bash scripts/gpu_check.sh install direct-ab   # the direct forward's rows a thread, several against one
#   bash scripts/gpu_check.sh install channels-ab   # the direct forward's output channels a thread, and bench
#   bash scripts/gpu_check.sh install dispatch-ab   # the dispatch against each kernel forced
#   bash scripts/gpu_check.sh install dispatch-audit   # the same over fuzzed layers of the whole argument space
#   bash scripts/gpu_check.sh install rules-ab   # the planner's rules of 274d21e-0d26e69 against what each replaced
#   bash scripts/gpu_check.sh build install splitk   # split K: its tests, then the few-tile layers with and without
#   bash scripts/gpu_check.sh install kstep-ab   # K steps of 16 channels (more stages) against the planner's
#   bash scripts/gpu_check.sh build install coopn   # two warpgroups sharing the weight tiles: tests, sanitizers, A/B
#   ENV_AB="base= noxp=CONVT_WG_XP=0" bash scripts/gpu_check.sh install env-ab
#     # one build timed under several CONVT_* settings, alternated (scripts/env_ab.py)
#   ENV_AB="base= old=PYTHONPATH=/tmp/old" bash scripts/gpu_check.sh install install-old env-ab
#     # against an earlier tree in ./ab (git archive REV | tar -x -C ab; carry ab)
#
# Performance steps: install (the Python package only), bench-fwd (fp32 with TF32 and
# bf16 forward, 10 runs a side, compared case by case with BENCH_BASELINE, by default
# docs/data/h200-2026-11-21-fwd.json; CONVT_FORWARD_KERNEL picks a kernel), ncu (Nsight Compute
# on one forward: NCU_CASE, default "kb57 --dtype bf16 --batch 2").
#
# PACK_LOGS=1 packs the step logs into $OUT/logs.tar.gz at the end.
#
# GoogleTest: an installed GTest, or sources in .deps/googletest (a copy of
# /usr/src/googletest from Debian's googletest package) for machines without one.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
JOBS=$(nproc)
STEPS=${*:-"build ctest sanitize python bench overhead"}
export CONVT_CUDA_ARCHS=${CONVT_CUDA_ARCHS:-90a}
export PYTHONUNBUFFERED=1
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"

step() {  # step NAME COMMAND...: run, log to $OUT/NAME.log, record status and duration
  local name=$1; shift
  local t0=$(date +%s)
  echo "==== $name: $*"
  "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  local dt=$(( $(date +%s) - t0 ))
  tail -n 25 "$OUT/$name.log"
  echo "$name rc=$rc ${dt}s" | tee -a "$SUMMARY"
  return $rc
}

has() { [[ " $STEPS " == *" $1 "* ]]; }

# model_suites_ab NAME SETTING...: the models suite and scripts/suites/more_models.json timed
# under the default and each setting (GPU time, fp32 and bf16, two rounds; scripts/env_ab.py),
# logged as NAME-models and NAME-more_models.
model_suites_ab() {
  local name=$1; shift
  local s n
  for s in models scripts/suites/more_models.json; do
    n=$(basename "$s" .json)
    step "$name-$n" python3 scripts/env_ab.py --suite "$s" --dtype fp32,bf16 --rounds 2 \
      --gpu-time base= "$@"
    grep -E "geomean" "$OUT/$name-$n.log" | tee -a "$SUMMARY"
  done
}

# draw_ab NAME SUITE DTYPES VAR=VALUE[,VAR=VALUE...]: a fuzzed draw checked against PyTorch
# under the setting (NAME-check), then timed under the default and the setting (GPU time,
# two rounds; NAME-fuzz, summarised by scripts/ab_summary.py). More settings after the
# first are timed too (NAME=VAR=VALUE... each, as scripts/env_ab.py takes them).
draw_ab() {
  local name=$1 suite=$2 dtypes=$3 setting=$4; shift 4
  step "$name-check" env ${setting//,/ } python3 -m convt bench --suite "$suite" \
    --dtype "$dtypes" --reps 1 --warmup 1 --json "$OUT/$name-check.json" -q
  grep -E "geomean|error|mismatch" "$OUT/$name-check.log" | tail -4 | tee -a "$SUMMARY"
  step "$name-fuzz" python3 scripts/env_ab.py --suite "$suite" --dtype "$dtypes" --rounds 2 \
    --gpu-time --json "$OUT/$name-fuzz.json" base= "new=$setting" "$@"
  python3 scripts/ab_summary.py "$OUT/$name-fuzz.log" | tee -a "$SUMMARY"
}

# held_ab NAME SUITE DTYPES LABEL=VAR=VALUE[,VAR=VALUE...]: a draw made after a default rule
# was set, checked against PyTorch as the default plans it (NAME-check), then timed under
# the default and the setting that restores the rule's predecessor (GPU time, two rounds;
# NAME-fuzz, summarised by scripts/ab_summary.py).
held_ab() {
  local name=$1 suite=$2 dtypes=$3 setting=$4
  step "$name-check" python3 -m convt bench --suite "$suite" --dtype "$dtypes" --reps 1 \
    --warmup 1 --json "$OUT/$name-check.json" -q
  grep -E "geomean|error|mismatch" "$OUT/$name-check.log" | tail -4 | tee -a "$SUMMARY"
  step "$name-fuzz" python3 scripts/env_ab.py --suite "$suite" --dtype "$dtypes" --rounds 2 \
    --gpu-time --json "$OUT/$name-fuzz.json" base= "$setting"
  python3 scripts/ab_summary.py "$OUT/$name-fuzz.log" | tee -a "$SUMMARY"
}

{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  nvcc --version | tail -1
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"
} 2>&1 | tee "$OUT/machine.txt"

GTEST_ARGS=()
[ -d .deps/googletest ] && GTEST_ARGS=(-DCONVT_GTEST_SOURCE_DIR="$PWD/.deps/googletest")
BUILD=build/gpu

if has build; then
  step build bash -c "cmake -S . -B $BUILD -G Ninja -DCMAKE_BUILD_TYPE=Release -DCONVT_ENABLE_CUDA=ON \
    -DCONVT_CUDA_ARCHS=$CONVT_CUDA_ARCHS ${GTEST_ARGS[*]} && cmake --build $BUILD -j $JOBS"
fi
if has ctest; then
  # Each suite in one process (so state carried between tests is exercised too).
  step ctest bash -c "set -e; cd $BUILD; for t in \$(find tests/cpp -maxdepth 1 -type f -executable -name 'convt_test_*' | sort); do echo \"== \$t\"; ./\$t; done; ./examples/convt_example_forward"
  grep -E "^== |PASSED|FAILED|SKIPPED \]" "$OUT/ctest.log" | tee -a "$SUMMARY"
fi
if has fastpath; then
  # The tensor-core forward kernels' own tests only (fast-path, TMA path, ordering).
  step fastpath "$BUILD/tests/cpp/convt_test_cuda" --gtest_filter='*FastPath*:*TmaPath*:*StrictFloat32*'
  grep -E "PASSED|FAILED|SKIPPED \]" "$OUT/fastpath.log" | tail -5 | tee -a "$SUMMARY"
fi
if has direct-test; then
  # The direct forward kernels' tests (every form, with kCo forced), their shapes' rules, and
  # the sanitizers on the direct sweep (each cut at DIRECT_SAN_S seconds, default 90).
  step direct-test "$BUILD/tests/cpp/convt_test_cuda" \
    --gtest_filter='*DirectForward*:CudaStrictFloat32.*:*NonFinite*:*SmallGroupsDispatched*:CudaEdgeCases.*'
  grep -E "PASSED|FAILED" "$OUT/direct-test.log" | tail -3 | tee -a "$SUMMARY"
  step direct-planner "$BUILD/tests/cpp/convt_test_cuda_planner" --gtest_filter='CudaPlanner.Direct*'
  grep -E "PASSED|FAILED" "$OUT/direct-planner.log" | tail -3 | tee -a "$SUMMARY"
  for tool in memcheck initcheck racecheck; do
    step "sanitize-direct-$tool" timeout "${DIRECT_SAN_S:-90}" env CONVT_TEST_QUICK=1 compute-sanitizer \
      --tool "$tool" --error-exitcode 1 "$BUILD/tests/cpp/convt_test_cuda" \
      --gtest_filter='CudaDirectForwardRows.*'
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/sanitize-direct-$tool.log" | tail -3 | tee -a "$SUMMARY"
  done
fi
if has few-test; then
  # Layers of fewer than 8 input channels on the wgmma kernel (CONVT_WG_FEW=1, set by the
  # tests themselves): their tests and memcheck on them.
  step few-test "$BUILD/tests/cpp/convt_test_cuda" --gtest_filter='*WgmmaFewChannels*'
  grep -E "PASSED|FAILED" "$OUT/few-test.log" | tail -3 | tee -a "$SUMMARY"
  step few-planner "$BUILD/tests/cpp/convt_test_cuda_planner" --gtest_filter='CudaPlanner.FewInput*'
  grep -E "PASSED|FAILED" "$OUT/few-planner.log" | tail -3 | tee -a "$SUMMARY"
  step sanitize-few-memcheck timeout 240 env CONVT_TEST_QUICK=1 compute-sanitizer --tool memcheck \
    --error-exitcode 1 "$BUILD/tests/cpp/convt_test_cuda" --gtest_filter='*WgmmaFewChannels*'
  grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/sanitize-few-memcheck.log" | tail -3 | tee -a "$SUMMARY"
fi
if has sanitize-fastpath; then
  for tool in memcheck racecheck initcheck; do
    step "sanitize-fastpath-$tool" env CONVT_TEST_QUICK=1 compute-sanitizer --tool "$tool" \
      --error-exitcode 1 "$BUILD/tests/cpp/convt_test_cuda" --gtest_filter='*FastPath*:*TmaPath*:*StrictFloat32*'
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/sanitize-fastpath-$tool.log" | tail -3 | tee -a "$SUMMARY"
  done
fi
if has sanitize; then
  for tool in memcheck racecheck initcheck; do
    step "sanitize-$tool" env CONVT_TEST_QUICK=1 compute-sanitizer --tool "$tool" --error-exitcode 1 \
      "$BUILD/tests/cpp/convt_test_cuda"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/sanitize-$tool.log" | tail -3 | tee -a "$SUMMARY"
  done
fi
if has python; then
  step pip-install env CONVT_ENABLE_CUDA=ON python3 -m pip install --no-build-isolation --no-deps -v .
  # (PYTEST_FILES picks the files, e.g. 'tests/python/test_[a-f]*.py' and then the rest in
  # a second call, where the whole suite would pass one call's time limit.)
  step pytest python3 -m pytest -q -ra ${PYTEST_FILES:-tests/python} -p no:cacheprovider \
    --junitxml="$OUT/pytest.xml"
  tail -n 3 "$OUT/pytest.log" | tee -a "$SUMMARY"
fi
if has install; then
  step pip-install env CONVT_ENABLE_CUDA=ON python3 -m pip install --no-build-isolation --no-deps -v .
fi
if has install-old; then
  # An earlier tree in ./ab (e.g. `git archive REV | tar -x -C ab`, carried to the machine)
  # built into /tmp/old, to time against with ENV_AB="... old=PYTHONPATH=/tmp/old".
  step pip-install-old env CONVT_ENABLE_CUDA=ON python3 -m pip install --no-build-isolation \
    --no-deps --target /tmp/old ./ab
fi
if has bench-strict; then
  step bench-strict python3 -m convt bench --dtype fp32 --math strict --reps 10 --warmup 2 \
    --json "$OUT/bench-strict.json" -q
  grep -E "geomean" "$OUT/bench-strict.log" | tee -a "$SUMMARY"
fi
if has bench-fwd; then
  step bench-fwd python3 -m convt bench --dtype fp32,bf16 --math default --reps 10 --warmup 2 \
    --json "$OUT/bench-fwd.json" -q
  grep -E "geomean" "$OUT/bench-fwd.log" | tee -a "$SUMMARY"
  # Case by case against the recorded run of the forward kernels (BENCH_BASELINE; compare
  # like with like: the same GPU model).
  BASELINE=${BENCH_BASELINE:-docs/data/h200-2026-11-21-fwd.json}
  if [ -f "$BASELINE" ] && [ -f "$OUT/bench-fwd.json" ]; then
    python3 scripts/bench_compare.py "$BASELINE" "$OUT/bench-fwd.json" | tee "$OUT/bench-fwd-compare.txt" |
      grep -E "geomean" | tee -a "$SUMMARY"
  fi
fi
if has ncu; then
  # NCU_CASE: one or more profile_case.py argument lists separated by ';' (--kernel NAME
  # forces a kernel). Per case: the forward kernel's sections (NCU_KERNEL, a regex), then
  # time and traffic of every convt kernel of one forward.
  IFS=';' read -ra NCU_LIST <<<"${NCU_CASE:-kb57 --dtype bf16 --batch 2}"
  i=0
  for c in "${NCU_LIST[@]}"; do
    step "ncu-$i" ncu --clock-control none --kernel-name "regex:${NCU_KERNEL:-fprop}" \
      --launch-skip 1 --launch-count 1 \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
      --section MemoryWorkloadAnalysis_Tables --section SchedulerStats --section WarpStateStats \
      --section Occupancy --section LaunchStats --section SourceCounters \
      python3 scripts/profile_case.py $c
    step "ncu-$i-all" ncu --clock-control none --kernel-name-base demangled \
      --kernel-name regex:convt:: --launch-skip 0 --launch-count 8 --metrics \
      gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
      python3 scripts/profile_case.py $c --reps 2
    i=$((i + 1))
  done
fi
if has ncu-src; then
  # Per NCU_CASE (as for ncu): the forward kernel's warp stall reasons in full and its SASS
  # with per-instruction samples (ncu-src-N-sass.csv), for finding where warps wait.
  # (An entry may start with VAR=VALUE words, the environment of that run alone, e.g.
  # NCU_CASE="kb71 --dtype bf16;CONVT_WG_WV=114 kb71 --dtype bf16".)
  IFS=';' read -ra NCU_LIST <<<"${NCU_CASE:-kb57 --dtype bf16 --batch 2}"
  i=0
  for c in "${NCU_LIST[@]}"; do
    read -ra words <<<"$c"
    case_env=()
    while [ "${#words[@]}" -gt 0 ] && [[ "${words[0]}" == *=* ]]; do
      case_env+=("${words[0]}")
      words=("${words[@]:1}")
    done
    step "ncu-src-$i" env "${case_env[@]}" ncu --clock-control none \
      --kernel-name "regex:${NCU_KERNEL:-fprop}" \
      --launch-skip 1 --launch-count 1 --section WarpStateStats --section SourceCounters \
      --section SchedulerStats --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --import-source no -f -o "$OUT/ncu-src-$i" \
      python3 scripts/profile_case.py "${words[@]}"
    ncu -i "$OUT/ncu-src-$i.ncu-rep" --print-details all >"$OUT/ncu-src-$i-details.txt" 2>&1
    ncu -i "$OUT/ncu-src-$i.ncu-rep" --page source --csv --print-source sass \
      >"$OUT/ncu-src-$i-sass.csv" 2>&1
    python3 scripts/ncu_src_summary.py "$OUT/ncu-src-$i-sass.csv" | tee -a "$SUMMARY"
    rm -f "$OUT/ncu-src-$i.ncu-rep"
    i=$((i + 1))
  done
fi
if has ncu-suite; then
  # Nsight Compute over every case of the suite (one forward each), summarised per case.
  NCU_METRICS=gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_op_write.sum,dram__bytes_write.sum,dram__bytes_read.sum
  SUITE_ARGS="--dtype ${NCU_DTYPES:-fp32,bf16} --math ${NCU_MATH:-default} ${NCU_CASES:+--cases $NCU_CASES} ${NCU_SUITE:+--suite $NCU_SUITE}"
  step ncu-suite ncu --csv --page raw --clock-control none --kernel-name-base demangled \
    --kernel-name regex:convt:: --metrics "$NCU_METRICS" --log-file "$OUT/ncu-suite.csv" \
    python3 scripts/profile_suite.py $SUITE_ARGS
  python3 scripts/profile_suite.py $SUITE_ARGS --table "$OUT/ncu-suite.csv" | tee "$OUT/ncu-suite.txt"
fi
if has tile-sweep; then
  # The TMA kernel with each of its tiles against the planner's choice (fp32 TF32 and bf16).
  step tile-sweep python3 scripts/tma_tile_sweep.py --dtype fp32,bf16 --math default \
    --json "$OUT/tile-sweep.json"
  tail -n 40 "$OUT/tile-sweep.log"
fi
if has wgmma; then
  # The TMA kernel on wgmma (CONVT_TMA_MMA=wgmma; TF32 and 16-bit types): its tests,
  # under compute-sanitizer too, then fp32 (TF32) and bf16 forward on mma.sync and on wgmma.
  step wgmma-test "$BUILD/tests/cpp/convt_test_cuda" --gtest_filter='*TmaWgmma*:*TmaPath*'
  grep -E "PASSED|FAILED" "$OUT/wgmma-test.log" | tail -3 | tee -a "$SUMMARY"
  for tool in memcheck racecheck initcheck; do
    step "wgmma-sanitize-$tool" env CONVT_TEST_QUICK=1 compute-sanitizer --tool "$tool" \
      --error-exitcode 1 "$BUILD/tests/cpp/convt_test_cuda" --gtest_filter='*TmaWgmma*'
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/wgmma-sanitize-$tool.log" | tee -a "$SUMMARY"
  done
  step wgmma-bench-mma python3 -m convt bench --dtype fp32,bf16 --math default \
    --json "$OUT/bench-mma.json" -q
  step wgmma-bench env CONVT_TMA_MMA=wgmma python3 -m convt bench --dtype fp32,bf16 \
    --math default --json "$OUT/bench-wgmma.json" -q
  grep -E "geomean" "$OUT/wgmma-bench-mma.log" "$OUT/wgmma-bench.log" | tee -a "$SUMMARY"
fi
# The persistent wgmma kernel's tests (every *Wgmma* suite: CudaWgmmaPath, every TMA case
# and its own; CudaWgmmaTiles, its other tiles; ...), or those WG_FILTER names (a gtest
# filter: narrow it for the sanitizers, which run each test many times slower).
WG_FILTER=${WG_FILTER:-'*Wgmma*'}
if has wg-test; then
  step wg-test "$BUILD/tests/cpp/convt_test_cuda" --gtest_filter="$WG_FILTER"
  grep -E "PASSED|FAILED" "$OUT/wg-test.log" | tail -12 | tee -a "$SUMMARY"
  if [ -n "${WG_TEST_ENV:-}" ]; then  # the same tests again with one more setting
    step wg-test-env env $WG_TEST_ENV "$BUILD/tests/cpp/convt_test_cuda" --gtest_filter="$WG_FILTER"
    grep -E "PASSED|FAILED" "$OUT/wg-test-env.log" | tail -12 | tee -a "$SUMMARY"
  fi
fi
if has wg-sanitize; then
  # (With WG_TEST_ENV, each tool runs a second time with that setting.)
  for tool in memcheck racecheck initcheck; do
    step "wg-sanitize-$tool" env CONVT_TEST_QUICK=1 compute-sanitizer --tool "$tool" \
      --error-exitcode 1 "$BUILD/tests/cpp/convt_test_cuda" --gtest_filter="$WG_FILTER"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/wg-sanitize-$tool.log" | tail -3 | tee -a "$SUMMARY"
    if [ -n "${WG_TEST_ENV:-}" ]; then
      step "wg-sanitize-env-$tool" env CONVT_TEST_QUICK=1 $WG_TEST_ENV compute-sanitizer \
        --tool "$tool" --error-exitcode 1 "$BUILD/tests/cpp/convt_test_cuda" \
        --gtest_filter="$WG_FILTER"
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/wg-sanitize-env-$tool.log" | tail -3 | tee -a "$SUMMARY"
    fi
  done
fi
if has env-ab; then
  # One installed build timed under several CONVT_* settings (scripts/env_ab.py): ENV_AB
  # holds the settings (NAME=VAR=VALUE,... each; the first is the reference), ENV_AB_ARGS
  # more arguments (e.g. "--dtype fp32 --cases kb57,kb68 --rounds 3").
  # shellcheck disable=SC2086
  step env-ab python3 scripts/env_ab.py ${ENV_AB_ARGS:-} ${ENV_AB:-base=}
  tail -n 40 "$OUT/env-ab.log" | tee -a "$SUMMARY"
fi
if has copier-ab; then
  # The copier warps against the copy kernel and wherever they can run, one installed build
  # (scripts/env_ab.py, two rounds): CONVT_WG_FUSED_COPY=0 / =1, and in place of the
  # transposition in the kernel for 16-bit types (CONVT_WG_XP=0), and on the models suite's
  # small layers (the GPU's time alone, --gpu-time).
  step copier-ab-fp32 python3 scripts/env_ab.py --dtype fp32 --rounds 2 \
    --cases kb57,kb61,kb64,kb65,kb68,kb69,kb70 base= copy=CONVT_WG_FUSED_COPY=0 \
    all=CONVT_WG_FUSED_COPY=1
  grep -E "geomean" "$OUT/copier-ab-fp32.log" | tee -a "$SUMMARY"
  step copier-ab-16 python3 scripts/env_ab.py --dtype bf16,fp16 --rounds 2 \
    --cases kb57,kb61,kb64,kb65,kb68,kb69,kb74 \
    base= all=CONVT_WG_FUSED_COPY=1 noxp=CONVT_WG_XP=0,CONVT_WG_FUSED_COPY=1
  grep -E "geomean" "$OUT/copier-ab-16.log" | tee -a "$SUMMARY"
  step copier-ab-models python3 scripts/env_ab.py --suite models --dtype fp32,bf16 --rounds 2 \
    --gpu-time base= all=CONVT_WG_FUSED_COPY=1
  grep -E "geomean" "$OUT/copier-ab-models.log" | tee -a "$SUMMARY"
fi
if has dispatch-ab; then
  # The forward dispatch against each kernel forced, and zeros along W against the W phases,
  # on the layers of published models and the short-rows suite (GPU time alone), and on the
  # strided KernelBench cases.
  S="base= wg=CONVT_FORWARD_KERNEL=implicit_gemm_wgmma tma=CONVT_FORWARD_KERNEL=implicit_gemm_tma wup0=CONVT_WG_WUP=0"
  step dispatch-ab-models python3 scripts/env_ab.py --suite models --dtype fp32,bf16 --rounds 2 \
    --gpu-time $S
  step dispatch-ab-rows python3 scripts/env_ab.py --suite scripts/suites/short_rows.json \
    --dtype fp32,bf16 --rounds 2 --gpu-time $S
  step dispatch-ab-kb python3 scripts/env_ab.py --cases kb72,kb73,kb75,kb77,kb79,kb81 \
    --dtype fp32,bf16 --rounds 2 $S
  grep -E "geomean" "$OUT"/dispatch-ab-*.log | tee -a "$SUMMARY"
fi
if has dispatch-audit; then
  # The dispatch against each tensor-core kernel forced over fuzzed layers of the whole
  # argument space (scripts/suites/dispatch_audit.json: 8-128 channels a group, 1-2 groups,
  # 1-3 dimensions, strides up to 3), GPU time, one round (the kinds of layer where a forced
  # kernel wins, for rules to seek; a layer's gain is then checked with more rounds):
  # scripts/dispatch_audit.py lists them. AUDIT_SUITE picks another suite file, e.g.
  # scripts/suites/dispatch_audit_any.json (the same ranges, input sizes of any value).
  audit_suite=${AUDIT_SUITE:-scripts/suites/dispatch_audit.json}
  step dispatch-audit python3 scripts/env_ab.py --suite "$audit_suite" \
    --dtype fp32,bf16 --rounds "${AUDIT_ROUNDS:-1}" --gpu-time base= \
    wg=CONVT_FORWARD_KERNEL=implicit_gemm_wgmma tma=CONVT_FORWARD_KERNEL=implicit_gemm_tma
  python3 scripts/dispatch_audit.py "$OUT/dispatch-audit.log" \
    "$audit_suite" | tee "$OUT/dispatch-audit-summary.txt" |
    grep -E "^[a-z0-9]+: " | tee -a "$SUMMARY"
fi
if has rules-ab; then
  # The wgmma planner's and dispatcher's rules against the choice each replaces: two
  # consumer warpgroups (CONVT_WG_COOP=0: one), the N that fills up to four waves
  # (CONVT_WG_FILL_WAVES=1: only below one wave), few K steps on the TMA kernel in 16-bit
  # types (CONVT_WG_FEW_STEPS=0: wgmma), on the models and short-rows suites (GPU time
  # alone) and the KernelBench cases that take two warpgroups.
  S="base= one=CONVT_WG_COOP=0 w1=CONVT_WG_FILL_WAVES=1 keep=CONVT_WG_FEW_STEPS=0"
  step rules-ab-models python3 scripts/env_ab.py --suite models --dtype fp32,bf16 --rounds 2 \
    --gpu-time $S
  step rules-ab-rows python3 scripts/env_ab.py --suite scripts/suites/short_rows.json \
    --dtype bf16 --rounds 2 --gpu-time base= keep=CONVT_WG_FEW_STEPS=0
  step rules-ab-kb python3 scripts/env_ab.py --cases kb64,kb69 --dtype fp32,bf16 --rounds 2 \
    base= one=CONVT_WG_COOP=0
  grep -E "geomean" "$OUT"/rules-ab-*.log | tee -a "$SUMMARY"
fi
if has splitk; then
  # Split K (on by default; CONVT_WG_SPLIT_K=0 turns it off): its tests (with WG_FILTER
  # unset, wg-test runs them too), then the layers of few deep tiles with and without it
  # (GPU time alone).
  step splitk-test "$BUILD/tests/cpp/convt_test_cuda" --gtest_filter='*WgmmaSplitK*'
  grep -E "PASSED|FAILED" "$OUT/splitk-test.log" | tail -3 | tee -a "$SUMMARY"
  step splitk-ab python3 scripts/env_ab.py --suite scripts/suites/more_models.json \
    --dtype fp32,bf16 --rounds 2 --gpu-time base= nosplit=CONVT_WG_SPLIT_K=0
  grep -E "geomean" "$OUT/splitk-ab.log" | tee -a "$SUMMARY"
fi
if has coopn; then
  # Two warpgroups sharing the weight tiles (opt-in, CONVT_WG_COOP_N=1): its tests, memcheck
  # and initcheck on them (CONVT_TEST_QUICK=1), then the cases of 64 channels or fewer with
  # and without it.
  step coopn-test "$BUILD/tests/cpp/convt_test_cuda" --gtest_filter='*WgmmaCoopN*'
  grep -E "PASSED|FAILED" "$OUT/coopn-test.log" | tail -3 | tee -a "$SUMMARY"
  for tool in memcheck initcheck; do
    step "coopn-sanitize-$tool" env CONVT_TEST_QUICK=1 compute-sanitizer --tool "$tool" \
      --error-exitcode 1 "$BUILD/tests/cpp/convt_test_cuda" --gtest_filter='*WgmmaCoopN*'
    grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/coopn-sanitize-$tool.log" | tail -2 | tee -a "$SUMMARY"
  done
  step coopn-ab python3 scripts/env_ab.py --cases kb57,kb61,kb65,kb68,kb77 --dtype fp32,bf16 \
    --rounds 2 base= n=CONVT_WG_COOP_N=1
  grep -E "geomean" "$OUT/coopn-ab.log" | tee -a "$SUMMARY"
fi
if has kstep-ab; then
  # Narrower K steps, more stages, on the plans of two stages (kb64: 2 stages of 32 channels;
  # 16 channels give 4 in float32, 6 in bfloat16) and of two warpgroups, against the
  # planner's widest channel block (CONVT_WG_BK: channels per K step, where it fits).
  step kstep-ab-kb python3 scripts/env_ab.py --cases kb64,kb69,kb57,kb65 --dtype fp32,bf16 \
    --rounds 2 base= bk16=CONVT_WG_BK=16
  step kstep-ab-models python3 scripts/env_ab.py --suite models --dtype fp32,bf16 --rounds 2 \
    --gpu-time base= bk16=CONVT_WG_BK=16
  grep -E "geomean" "$OUT"/kstep-ab-*.log | tee -a "$SUMMARY"
fi
if has gmerge-ab; then
  # Groups merged (CONVT_WG_GMERGE: 0 none, m that many wherever m divides the groups;
  # CONVT_WG_GMERGE_SMALL=0 groups of fewer than 8 input channels kept apart) against the default
  # rule, GPU time, one build: KernelBench's grouped layers, the models suite's depthwise
  # layer and the narrow groups of scripts/suites/groups.json, the describe line of each.
  step gmerge-kb python3 scripts/env_ab.py --cases kb72,kb75 --dtype fp32,bf16 --rounds 2 \
    --gpu-time base= off=CONVT_WG_GMERGE=0 m2=CONVT_WG_GMERGE=2 m4=CONVT_WG_GMERGE=4
  grep -E "geomean" "$OUT/gmerge-kb.log" | tee -a "$SUMMARY"
  step gmerge-dw python3 scripts/env_ab.py --suite models --cases centernet_dw \
    --dtype fp32,bf16 --rounds 2 --gpu-time base= nosmall=CONVT_WG_GMERGE_SMALL=0 \
    m8=CONVT_WG_GMERGE=8 m16=CONVT_WG_GMERGE=16
  grep -E "geomean" "$OUT/gmerge-dw.log" | tee -a "$SUMMARY"
  step gmerge-groups python3 scripts/env_ab.py --suite scripts/suites/groups.json \
    --dtype fp32,bf16 --rounds 2 --gpu-time base= off=CONVT_WG_GMERGE=0 \
    nosmall=CONVT_WG_GMERGE_SMALL=0 m2=CONVT_WG_GMERGE=2 m4=CONVT_WG_GMERGE=4
  grep -E "geomean" "$OUT/gmerge-groups.log" | tee -a "$SUMMARY"
  step gmerge-describe python3 scripts/time_cases.py bf16 all --suite scripts/suites/groups.json \
    --reps 3 --describe
fi
if has direct-ab; then
  # The direct forward by rows of outputs, several rows a thread (the default) against one
  # (CONVT_DIRECT_ROWS=1), with small groups kept on it (CONVT_WG_GMERGE_SMALL=0), and the
  # default dispatch (those groups merged onto the wgmma kernel): GPU time, one build, on the
  # depthwise and small-group layers of docs/data/small-groups-suite.json and the 1-D
  # depthwise layer of scripts/suites/groups.json.
  step direct-ab python3 scripts/env_ab.py --suite docs/data/small-groups-suite.json \
    --dtype fp32,bf16 --rounds 2 --gpu-time direct=CONVT_WG_GMERGE_SMALL=0 \
    onerow=CONVT_WG_GMERGE_SMALL=0,CONVT_DIRECT_ROWS=1 base=
  grep -E "geomean" "$OUT/direct-ab.log" | tee -a "$SUMMARY"
  step direct-ab-1d python3 scripts/env_ab.py --suite scripts/suites/groups.json \
    --cases dw1d_128_s4 --dtype fp32,bf16 --rounds 2 --gpu-time base= \
    onerow=CONVT_DIRECT_ROWS=1
fi
if has channels-ab; then
  # The direct forward's several output channels a thread (forward_channels_kernel, the
  # default) against the kernel by rows (CONVT_DIRECT_CHANNELS=0): GPU time, one build, on
  # few-input-channel layers (scripts/suites/few_channels.json), 1-D narrow groups
  # (scripts/suites/groups_1d.json, with groups merged 16 at a time onto wgmma too) and the
  # small-group suite (kept on the direct kernel, CONVT_WG_GMERGE_SMALL=0, against the
  # default dispatch, merged); then convt bench against PyTorch on the few-channel layers.
  step channels-ab python3 scripts/env_ab.py --suite scripts/suites/few_channels.json \
    --dtype fp32,bf16 --rounds 2 --gpu-time base= rows=CONVT_DIRECT_CHANNELS=0
  grep -E "geomean" "$OUT/channels-ab.log" | tee -a "$SUMMARY"
  step channels-ab-1d python3 scripts/env_ab.py --suite scripts/suites/groups_1d.json \
    --dtype fp32,bf16 --rounds 2 --gpu-time base= rows=CONVT_DIRECT_CHANNELS=0 \
    m16=CONVT_WG_GMERGE=16
  grep -E "geomean" "$OUT/channels-ab-1d.log" | tee -a "$SUMMARY"
  step channels-ab-small python3 scripts/env_ab.py --suite docs/data/small-groups-suite.json \
    --dtype fp32,bf16 --rounds 2 --gpu-time base= direct=CONVT_WG_GMERGE_SMALL=0 \
    rows=CONVT_WG_GMERGE_SMALL=0,CONVT_DIRECT_CHANNELS=0
  grep -E "geomean" "$OUT/channels-ab-small.log" | tee -a "$SUMMARY"
  step bench-few python3 -m convt bench --suite scripts/suites/few_channels.json \
    --dtype fp32,bf16 --json "$OUT/few-channels.json"
  grep -E "geomean" "$OUT/bench-few.log" | tee -a "$SUMMARY"
fi
if has few-ab; then
  # Layers of fewer than 8 input channels: the dispatch's choice (base) against the direct
  # kernel's channel chunks everywhere (CONVT_WG_FEW=0) and the wgmma kernel with the
  # channels padded wherever its box fits (=1), on the few-channel layers, the fuzzed ones
  # the rule was chosen on and the held-out ones: GPU time, one build.
  for suite in few_channels few_channels_fuzz few_channels_heldout; do
    step "few-ab-$suite" python3 scripts/env_ab.py --suite "scripts/suites/$suite.json" \
      --dtype fp32,bf16 --rounds 2 --gpu-time base= direct=CONVT_WG_FEW=0 wg=CONVT_WG_FEW=1
    grep -E "geomean" "$OUT/few-ab-$suite.log" | tee -a "$SUMMARY"
  done
fi
if has layout-sweep; then
  # The wgmma kernel's tile layouts (rows x column segments) against its planner's, per case:
  # KernelBench in both precisions (fp32 on the wgmma kernel where the dispatch takes the
  # TMA kernel) and the models suite in bfloat16 (scripts/wg_layout_sweep.py).
  step layout-sweep-kb python3 scripts/wg_layout_sweep.py --dtype fp32,bf16 --wgmma \
    --json "$OUT/layout-sweep-kb.json"
  grep -E "fastest" "$OUT/layout-sweep-kb.log" | tee -a "$SUMMARY"
  step layout-sweep-models python3 scripts/wg_layout_sweep.py --suite models --dtype bf16 \
    --json "$OUT/layout-sweep-models.json"
  grep -E "fastest" "$OUT/layout-sweep-models.log" | tee -a "$SUMMARY"
fi
if has even-ab; then
  # Pair-aligned tile layouts (by default in 16-bit types where W has stride 1) against none
  # (CONVT_WG_EVEN=0) and everywhere they can run (=1): KernelBench in both precisions, the
  # held-out layers the rule changes (scripts/suites/even_layouts_fuzz.json) and the model
  # suites in bfloat16, GPU time. EVEN_AB adds settings (e.g. "two=CONVT_WG_EVEN=2").
  step even-ab-kb python3 scripts/env_ab.py --dtype fp32,bf16 --rounds 2 --gpu-time \
    base= off=CONVT_WG_EVEN=0 on=CONVT_WG_EVEN=1 ${EVEN_AB:-}
  python3 scripts/ab_summary.py "$OUT/even-ab-kb.log" | tee -a "$SUMMARY"
  step even-ab-fuzz python3 scripts/env_ab.py --suite scripts/suites/even_layouts_fuzz.json \
    --dtype fp32,bf16 --rounds 2 --gpu-time base= off=CONVT_WG_EVEN=0 on=CONVT_WG_EVEN=1 \
    ${EVEN_AB:-}
  python3 scripts/ab_summary.py "$OUT/even-ab-fuzz.log" | tee -a "$SUMMARY"
  # (The same layers with channels_last inputs, whose outputs PyTorch makes channels_last:
  # the rule does not look at the memory format.)
  step even-ab-cl python3 scripts/env_ab.py --suite scripts/suites/even_layouts_fuzz.json \
    --dtype bf16 --rounds 2 --gpu-time --channels-last base= off=CONVT_WG_EVEN=0
  python3 scripts/ab_summary.py "$OUT/even-ab-cl.log" | tee -a "$SUMMARY"
  # kb71 / kb78 in float32 run the TMA kernel: on the wgmma kernel with and without the
  # aligned layouts.
  step even-ab-f32 python3 scripts/env_ab.py --cases kb71,kb78 --dtype fp32 --rounds 2 \
    --gpu-time base= wg=CONVT_FORWARD_KERNEL=implicit_gemm_wgmma \
    wgon=CONVT_FORWARD_KERNEL=implicit_gemm_wgmma,CONVT_WG_EVEN=1
  python3 scripts/ab_summary.py "$OUT/even-ab-f32.log" | tee -a "$SUMMARY"
  for suite in models scripts/suites/more_models.json; do
    name=$(basename "$suite" .json)
    step "even-ab-$name" python3 scripts/env_ab.py --suite "$suite" --dtype bf16 --rounds 2 \
      --gpu-time base= off=CONVT_WG_EVEN=0 ${EVEN_AB:-}
    python3 scripts/ab_summary.py "$OUT/even-ab-$name.log" | tee -a "$SUMMARY"
  done
fi
if has f32-aligned-ab; then
  # Float32 as TF32 on the wgmma kernel with pair-aligned layouts where the dispatch would give
  # the TMA kernel (CONVT_WG_F32_ALIGNED=R, default 4: no stride, 17-32 output channels per
  # group, a reduction under 1024, multiply-adds per input element at least R times the input
  # channels, or in a volume at least CONVT_WG_F32_DH_TAPS=T (4) D x H taps): first the third draw of
  # fuzzed layers against PyTorch with R = 0.001 (every layer of the class on the wgmma
  # kernel; convt bench's status), then the default against off (0), every layer (0.001),
  # R = 8 and without the D x H term, GPU time, on KernelBench (kb71, kb78 change; kb73, kb57
  # do not), the two draws of fuzzed layers the rule was picked on, a third and a 3-D one
  # drawn after, and the short-row suite.
  if [ -z "${F32_AB_NO_CHECK:-}" ]; then
    step f32-aligned-check env CONVT_WG_F32_ALIGNED=0.001 python3 -m convt bench \
      --suite scripts/suites/f32_aligned_fuzz3.json --dtype fp32 --reps 3 --warmup 1 \
      --json "$OUT/f32-aligned-check.json" -q
    grep -E "geomean|error|mismatch" "$OUT/f32-aligned-check.log" | tail -5 | tee -a "$SUMMARY"
  fi
  # (short_rows: its 2-D layer of rows of 24 is the one plan of the other suites the rule
  # changes.)
  # F32_AB_SUITES and F32_AB_SETTINGS narrow it (with "off" and "all" timed, every layer of the
  # class runs on both kernels, and any other rule's outcome follows from the same runs).
  for s in ${F32_AB_SUITES:-kb:--cases=kb71,kb78,kb73,kb57 \
           fuzz:--suite=scripts/suites/f32_aligned_fuzz.json \
           fuzz2:--suite=scripts/suites/f32_aligned_fuzz2.json \
           fuzz3:--suite=scripts/suites/f32_aligned_fuzz3.json \
           fuzz3d:--suite=scripts/suites/f32_aligned_3d.json \
           fuzz3d2:--suite=scripts/suites/f32_aligned_3d2.json \
           short:--suite=scripts/suites/short_rows.json}; do
    # shellcheck disable=SC2086
    step "f32-aligned-${s%%:*}" python3 scripts/env_ab.py "${s#*:}" --dtype fp32 --rounds 2 \
      --gpu-time ${F32_AB_SETTINGS:-base= off=CONVT_WG_F32_ALIGNED=0 \
      all=CONVT_WG_F32_ALIGNED=0.001 r8=CONVT_WG_F32_ALIGNED=8 nodh=CONVT_WG_F32_DH_TAPS=0}
    python3 scripts/ab_summary.py "$OUT/f32-aligned-${s%%:*}.log" | tee -a "$SUMMARY"
  done
fi
if has volumes-ab; then
  # Volumes (outputs deeper than 1) on the wgmma kernel whatever the reduction
  # (CONVT_WG_VOLUMES, default on) against the reduction rules (=0): first the held-out draw
  # (scripts/suites/volumes_fuzz.json, 3-D layers whose plan the rule changes) against
  # PyTorch, then GPU time on it and on the other suites' layers it changes (kb73 and one
  # layer each of the groups, short-row and even-layout suites, float32).
  step volumes-check python3 -m convt bench --suite scripts/suites/volumes_fuzz.json \
    --dtype fp32,bf16 --reps 3 --warmup 1 --json "$OUT/volumes-check.json" -q
  grep -E "geomean|error|mismatch" "$OUT/volumes-check.log" | tail -6 | tee -a "$SUMMARY"
  for s in fuzz:--suite=scripts/suites/volumes_fuzz.json@fp32,bf16 kb:--cases=kb73@fp32 \
           groups:--suite=scripts/suites/groups.json@fp32@g3d_32_32_g8_s2 \
           rows:--suite=scripts/suites/short_rows.json@fp32@sr3d_k3 \
           even:--suite=scripts/suites/even_layouts_fuzz.json@fp32@f190_3d_c67_23; do
    IFS=@ read -r what dts only <<<"${s#*:}"
    step "volumes-${s%%:*}" python3 scripts/env_ab.py "$what" ${only:+--cases "$only"} \
      --dtype "$dts" --rounds 2 --gpu-time base= old=CONVT_WG_VOLUMES=0
    python3 scripts/ab_summary.py "$OUT/volumes-${s%%:*}.log" | tee -a "$SUMMARY"
  done
fi
if has planes-ab; then
  # Float32 planes (2-D outputs of several rows) on the wgmma kernel whatever the reduction
  # (CONVT_WG_F32_PLANES, default on) against the reduction rules (=0): the held-out draw
  # (scripts/suites/planes_fuzz.json) against PyTorch, then GPU time on it and on the models
  # suites.
  step planes-check python3 -m convt bench --suite scripts/suites/planes_fuzz.json \
    --dtype fp32 --reps 1 --warmup 1 --json "$OUT/planes-check.json" -q
  grep -E "geomean|error|mismatch" "$OUT/planes-check.log" | tail -4 | tee -a "$SUMMARY"
  for s in fuzz:scripts/suites/planes_fuzz.json models:models \
           more:scripts/suites/more_models.json; do
    step "planes-${s%%:*}" python3 scripts/env_ab.py --suite "${s#*:}" --dtype fp32 --rounds 2 \
      --gpu-time base= old=CONVT_WG_F32_PLANES=0
    python3 scripts/ab_summary.py "$OUT/planes-${s%%:*}.log" | tee -a "$SUMMARY"
  done
fi
if has reduction16-ab; then
  # 16-bit layers of 1-2 dimensions that the reduction rule (under 64 per phase) gave the
  # TMA kernel (scripts/suites/reduction16_fuzz.json), against the wgmma kernel forced,
  # bfloat16, GPU time.
  step reduction16 python3 scripts/env_ab.py --suite scripts/suites/reduction16_fuzz.json \
    --dtype bf16 --rounds 2 --gpu-time base= wg=CONVT_FORWARD_KERNEL=implicit_gemm_wgmma
  python3 scripts/ab_summary.py "$OUT/reduction16.log" | tee -a "$SUMMARY"
fi
if has reduction16b-ab; then
  # The 16-bit reduction rule lifted (CONVT_WG_REDUCTION16=0: the wgmma kernel whatever the
  # reduction, the rules of sparse tiles and few K steps still apply) against the rule, on a
  # second draw (scripts/suites/reduction16_fuzz2.json), bfloat16 and float16, GPU time;
  # the layers checked against PyTorch first.
  step reduction16b-check env CONVT_WG_REDUCTION16=0 python3 -m convt bench \
    --suite scripts/suites/reduction16_fuzz2.json --dtype bf16,fp16 --reps 1 --warmup 1 \
    --json "$OUT/reduction16b-check.json" -q
  grep -E "geomean|error|mismatch" "$OUT/reduction16b-check.log" | tail -4 | tee -a "$SUMMARY"
  step reduction16b python3 scripts/env_ab.py --suite scripts/suites/reduction16_fuzz2.json \
    --dtype bf16,fp16 --rounds 2 --gpu-time base= lifted=CONVT_WG_REDUCTION16=0
  python3 scripts/ab_summary.py "$OUT/reduction16b.log" | tee -a "$SUMMARY"
fi
if has f32-pairs-ab; then
  # Float32 (TF32) on the W phase pairs of position-major tiles wherever they can run
  # (CONVT_WG_F32_PAIRS=1) against the pairs only where every W phase has one tap: a fuzzed
  # draw (scripts/suites/f32_pairs_fuzz.json), kb72, kb73 and the models suite, GPU time;
  # the draw checked against PyTorch first.
  step f32-pairs-check env CONVT_WG_F32_PAIRS=1 python3 -m convt bench \
    --suite scripts/suites/f32_pairs_fuzz.json --dtype fp32 --reps 1 --warmup 1 \
    --json "$OUT/f32-pairs-check.json" -q
  grep -E "geomean|error|mismatch" "$OUT/f32-pairs-check.log" | tail -4 | tee -a "$SUMMARY"
  for s in fuzz:scripts/suites/f32_pairs_fuzz.json models:models; do
    step "f32-pairs-${s%%:*}" python3 scripts/env_ab.py --suite "${s#*:}" --dtype fp32 \
      --rounds 2 --gpu-time base= pairs=CONVT_WG_F32_PAIRS=1
    python3 scripts/ab_summary.py "$OUT/f32-pairs-${s%%:*}.log" | tee -a "$SUMMARY"
  done
  step f32-pairs-kb python3 scripts/env_ab.py --cases kb72,kb73 --dtype fp32 --rounds 3 \
    --gpu-time base= pairs=CONVT_WG_F32_PAIRS=1
  python3 scripts/ab_summary.py "$OUT/f32-pairs-kb.log" | tee -a "$SUMMARY"
fi
if has f32-pairs-1d-ab; then
  # The float32 W phase pairs (CONVT_WG_F32_PAIRS=1, the default) against =0 on 1-D layers
  # (scripts/suites/f32_pairs_1d.json, checked against PyTorch first), GPU time: the rule's
  # first draw had two of its five 1-D layers slower.
  step f32-pairs-1d-check python3 -m convt bench --suite scripts/suites/f32_pairs_1d.json \
    --dtype fp32 --reps 1 --warmup 1 --json "$OUT/f32-pairs-1d-check.json" -q
  grep -E "geomean|error|mismatch" "$OUT/f32-pairs-1d-check.log" | tail -4 | tee -a "$SUMMARY"
  step f32-pairs-1d python3 scripts/env_ab.py --suite scripts/suites/f32_pairs_1d.json \
    --dtype fp32 --rounds 2 --gpu-time base= nopairs=CONVT_WG_F32_PAIRS=0
  python3 scripts/ab_summary.py "$OUT/f32-pairs-1d.log" | tee -a "$SUMMARY"
fi
if has hfirst-ab; then
  # More H taps a K step where that cuts the rows the wgmma tiles' boxes load to 70% or less
  # (CONVT_WG_HFIRST=1: channel blocks of at least 64 bytes; =2: of 32 bytes too; opt-in)
  # against the planner's K step: the fuzzed draw of layers they change
  # (scripts/suites/hfirst_fuzz.json, checked against PyTorch first), KernelBench and the
  # models suites, float32 (TF32) and bfloat16, GPU time.
  for v in 1 2; do
    step "hfirst$v-check" env CONVT_WG_HFIRST=$v python3 -m convt bench \
      --suite scripts/suites/hfirst_fuzz.json --dtype fp32,bf16 --reps 1 --warmup 1 \
      --json "$OUT/hfirst$v-check.json" -q
    grep -E "geomean|error|mismatch" "$OUT/hfirst$v-check.log" | tail -4 | tee -a "$SUMMARY"
  done
  for s in fuzz:scripts/suites/hfirst_fuzz.json kb:kernelbench models:models \
           more:scripts/suites/more_models.json; do
    step "hfirst-${s%%:*}" python3 scripts/env_ab.py --suite "${s#*:}" --dtype fp32,bf16 \
      --rounds 2 --gpu-time base= hfirst=CONVT_WG_HFIRST=1 hfirst2=CONVT_WG_HFIRST=2
    python3 scripts/ab_summary.py "$OUT/hfirst-${s%%:*}.log" | tee -a "$SUMMARY"
  done
fi
if has hfirst-held-ab; then
  # More H taps a K step (CONVT_WG_HFIRST=1, the default) against =0 on the layers of a draw
  # made after the rule was picked (scripts/suites/hfirst_fuzz2.json, checked against
  # PyTorch first), float32 (TF32) and bfloat16, GPU time.
  step hfirst-held-check python3 -m convt bench --suite scripts/suites/hfirst_fuzz2.json \
    --dtype fp32,bf16 --reps 1 --warmup 1 --json "$OUT/hfirst-held-check.json" -q
  grep -E "geomean|error|mismatch" "$OUT/hfirst-held-check.log" | tail -4 | tee -a "$SUMMARY"
  step hfirst-held python3 scripts/env_ab.py --suite scripts/suites/hfirst_fuzz2.json \
    --dtype fp32,bf16 --rounds 2 --gpu-time base= off=CONVT_WG_HFIRST=0
  python3 scripts/ab_summary.py "$OUT/hfirst-held.log" | tee -a "$SUMMARY"
fi
if has xp-hfull-ab; then
  # The float32 H-complete K step transposed in the kernel (CONVT_WG_XP_HFULL=1, the default)
  # against the planner's step with the input copy (=0): the fuzzed layers it changes
  # (scripts/suites/xp_hfull_fuzz.json; xp_hfull_fuzz2.json, drawn after the form was
  # chosen; xp_hfull_fuzz3.json, drawn after its bound on the box rows was; each checked
  # against PyTorch first), KernelBench and the models suite, float32 (TF32), GPU time.
  for d in xp_hfull_fuzz xp_hfull_fuzz2 xp_hfull_fuzz3; do
    step "$d-check" python3 -m convt bench --suite "scripts/suites/$d.json" --dtype fp32 \
      --reps 1 --warmup 1 --json "$OUT/$d-check.json" -q
    grep -E "geomean|error|mismatch" "$OUT/$d-check.log" | tail -4 | tee -a "$SUMMARY"
  done
  for s in fuzz:scripts/suites/xp_hfull_fuzz.json fuzz2:scripts/suites/xp_hfull_fuzz2.json \
           fuzz3:scripts/suites/xp_hfull_fuzz3.json kb:kernelbench models:models; do
    step "xp-hfull-${s%%:*}" python3 scripts/env_ab.py --suite "${s#*:}" --dtype fp32 \
      --rounds 2 --gpu-time base= off=CONVT_WG_XP_HFULL=0
    python3 scripts/ab_summary.py "$OUT/xp-hfull-${s%%:*}.log" | tee -a "$SUMMARY"
  done
fi
if has xp-hfull3-ab; then
  # Float32 H-complete K steps transposed in the kernel with stages given up down to two
  # (CONVT_WG_XP_HFULL=3) against the default (the copy's stages only): the fuzzed layers it
  # changes (scripts/suites/xp_hfull_stages_fuzz.json, checked against PyTorch first) and
  # kb78, float32 (TF32), GPU time.
  step xp-hfull3-check env CONVT_WG_XP_HFULL=3 python3 -m convt bench \
    --suite scripts/suites/xp_hfull_stages_fuzz.json --dtype fp32 --reps 1 --warmup 1 \
    --json "$OUT/xp-hfull3-check.json" -q
  grep -E "geomean|error|mismatch" "$OUT/xp-hfull3-check.log" | tail -4 | tee -a "$SUMMARY"
  step xp-hfull3-fuzz python3 scripts/env_ab.py --suite scripts/suites/xp_hfull_stages_fuzz.json \
    --dtype fp32 --rounds 2 --gpu-time --json "$OUT/xp-hfull3-fuzz.json" base= h3=CONVT_WG_XP_HFULL=3
  python3 scripts/ab_summary.py "$OUT/xp-hfull3-fuzz.log" | tee -a "$SUMMARY"
  step xp-hfull3-kb python3 scripts/env_ab.py --cases kb78,kb71 --dtype fp32 --rounds 2 \
    --gpu-time --json "$OUT/xp-hfull3-kb.json" base= h3=CONVT_WG_XP_HFULL=3
  tail -n 4 "$OUT/xp-hfull3-kb.log" | tee -a "$SUMMARY"
fi
if has xp-unaligned-ab; then
  # Inputs the transposition cannot read in place (rows, planes or channels not 16-byte
  # aligned) planned as the copy (the default) against the transposition planned and the copy
  # run with its step (CONVT_WG_XP_UNALIGNED=1): the fuzzed layers with input sizes of any value
  # whose plan it changes (scripts/suites/xp_unaligned_{fp32,bf16}.json, checked against
  # PyTorch first), GPU time.
  for d in fp32 bf16; do
    step "xp-unaligned-check-$d" python3 -m convt bench --suite "scripts/suites/xp_unaligned_$d.json" \
      --dtype $d --reps 1 --warmup 1 --json "$OUT/xp-unaligned-check-$d.json" -q
    grep -E "geomean|error|mismatch" "$OUT/xp-unaligned-check-$d.log" | tail -3 | tee -a "$SUMMARY"
    step "xp-unaligned-$d" python3 scripts/env_ab.py --suite "scripts/suites/xp_unaligned_$d.json" \
      --dtype $d --rounds 2 --gpu-time --json "$OUT/xp-unaligned-$d.json" base= \
      old=CONVT_WG_XP_UNALIGNED=1
    python3 scripts/ab_summary.py "$OUT/xp-unaligned-$d.log" | tee -a "$SUMMARY"
  done
fi
if has xp-rows-ab; then
  # Tiles of enough rows for an H-complete K step transposed in the kernel
  # (CONVT_WG_XP_ROWS=1) against the planner's widest tiles: the fuzzed layers whose plan it
  # changes (scripts/suites/xp_rows_{fp32,bf16}.json, checked against PyTorch first) and
  # kb57, GPU time.
  for d in fp32 bf16; do
    step "xp-rows-check-$d" env CONVT_WG_XP_ROWS=1 python3 -m convt bench \
      --suite "scripts/suites/xp_rows_$d.json" --dtype $d --reps 1 --warmup 1 \
      --json "$OUT/xp-rows-check-$d.json" -q
    grep -E "geomean|error|mismatch" "$OUT/xp-rows-check-$d.log" | tail -3 | tee -a "$SUMMARY"
    step "xp-rows-$d" python3 scripts/env_ab.py --suite "scripts/suites/xp_rows_$d.json" \
      --dtype $d --rounds 2 --gpu-time --json "$OUT/xp-rows-$d.json" base= rows=CONVT_WG_XP_ROWS=1
    python3 scripts/ab_summary.py "$OUT/xp-rows-$d.log" | tee -a "$SUMMARY"
  done
  step xp-rows-kb python3 scripts/env_ab.py --cases kb57 --dtype fp32,bf16 --rounds 2 \
    --gpu-time --json "$OUT/xp-rows-kb.json" base= rows=CONVT_WG_XP_ROWS=1
  tail -n 5 "$OUT/xp-rows-kb.log" | tee -a "$SUMMARY"
fi
if has xp-even-ab; then
  # The layout without pair alignment where it transposes the input in the kernel and the
  # aligned one copies it (CONVT_WG_XP_OVER_EVEN=1) against the default: the fuzzed layers
  # whose plan it changes (scripts/suites/xp_over_even_fuzz.json, checked against PyTorch
  # first) and kb70, float32 (TF32) and bfloat16, GPU time.
  draw_ab xp-even scripts/suites/xp_over_even_fuzz.json fp32,bf16 CONVT_WG_XP_OVER_EVEN=1
  step xp-even-kb python3 scripts/env_ab.py --cases kb70 --dtype bf16 --rounds 2 --gpu-time \
    --json "$OUT/xp-even-kb.json" base= xe=CONVT_WG_XP_OVER_EVEN=1
  tail -n 3 "$OUT/xp-even-kb.log" | tee -a "$SUMMARY"
fi
if has sc-segs-ab; then
  # Scattered W taps in segments of long rows within the default staging area
  # (CONVT_WG_SC_SEGS=1) against the default (=0 before 2026-11-28: those layers left the
  # wgmma kernel for the TMA kernel; =2 since), and against the wgmma kernel without
  # scattering (CONVT_WG_SCATTER=0): its tests and sanitizers, then the
  # fuzzed layers it changes (scripts/suites/sc_segs_fuzz.json, checked against PyTorch
  # first), float32 (TF32) and bfloat16, GPU time.
  if [ -x "$BUILD/tests/cpp/convt_test_cuda" ]; then
    step sc-segs-test "$BUILD/tests/cpp/convt_test_cuda" \
      --gtest_filter='*WgmmaScatterSegs*:*WgmmaScatter.*'
    grep -E "PASSED|FAILED" "$OUT/sc-segs-test.log" | tail -3 | tee -a "$SUMMARY"
    for tool in memcheck racecheck initcheck; do
      step "sc-segs-$tool" env CONVT_TEST_QUICK=1 compute-sanitizer --tool "$tool" \
        --error-exitcode 1 "$BUILD/tests/cpp/convt_test_cuda" --gtest_filter='*WgmmaScatterSegs*'
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/sc-segs-$tool.log" | tail -3 | tee -a "$SUMMARY"
    done
  fi
  draw_ab sc-segs scripts/suites/sc_segs_fuzz.json fp32,bf16 CONVT_WG_SC_SEGS=1 \
    nosc=CONVT_WG_SCATTER=0
fi
if has sc-segs2-ab; then
  # Scattered W taps with a staging area grown up to twice the default, taken from the
  # stages (CONVT_WG_SC_SEGS=2, the default since 2026-11-28; measured as an opt-in against
  # =0): long rows in segments of a whole tile, and more rows a tile. Its tests and
  # sanitizers (the scatter tests under it too), then the fuzzed layers whose plan it changes
  # (scripts/suites/sc_segs2_fuzz.json, checked against PyTorch first) against the default
  # and =1, and the earlier draw (sc_segs_fuzz.json) under both, float32 (TF32) and
  # bfloat16, GPU time. (With =2 the default, run it with CONVT_WG_SC_SEGS=0 exported.)
  if [ -x "$BUILD/tests/cpp/convt_test_cuda" ]; then
    step sc-segs2-test env CONVT_WG_SC_SEGS=2 "$BUILD/tests/cpp/convt_test_cuda" \
      --gtest_filter='*WgmmaScatterSegs*:*WgmmaScatter.*'
    grep -E "PASSED|FAILED" "$OUT/sc-segs2-test.log" | tail -3 | tee -a "$SUMMARY"
    step sc-segs2-planner "$BUILD/tests/cpp/convt_test_cuda_planner" --gtest_filter='*Scatter*'
    grep -E "PASSED|FAILED" "$OUT/sc-segs2-planner.log" | tail -3 | tee -a "$SUMMARY"
    for tool in memcheck racecheck initcheck; do
      step "sc-segs2-$tool" env CONVT_TEST_QUICK=1 CONVT_WG_SC_SEGS=2 compute-sanitizer \
        --tool "$tool" --error-exitcode 1 "$BUILD/tests/cpp/convt_test_cuda" \
        --gtest_filter='*WgmmaScatterSegs*:*WgmmaScatter.*'
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/sc-segs2-$tool.log" | tail -3 | tee -a "$SUMMARY"
    done
  fi
  draw_ab sc-segs2 scripts/suites/sc_segs2_fuzz.json fp32,bf16 CONVT_WG_SC_SEGS=2 \
    s1=CONVT_WG_SC_SEGS=1
  step sc-segs2-old python3 scripts/env_ab.py --suite scripts/suites/sc_segs_fuzz.json \
    --dtype fp32,bf16 --rounds 2 --gpu-time --json "$OUT/sc-segs2-old.json" base= \
    s2=CONVT_WG_SC_SEGS=2
  python3 scripts/ab_summary.py "$OUT/sc-segs2-old.log" | tee -a "$SUMMARY"
fi
if has wup-ab; then
  # Zeros inserted along W against the plans without them (CONVT_WG_WUP=0): fuzzed layers
  # planned with the zeros, drawn by s x input elements / output elements
  # (scripts/suites/wup_fuzz.json, checked against PyTorch first), float32 (TF32) and
  # bfloat16, GPU time.
  draw_ab wup scripts/suites/wup_fuzz.json fp32,bf16 CONVT_WG_WUP=0
fi
if has sc-wup-ab; then
  # The scattered W taps' grown staging area and the limits on zeros along W (the defaults)
  # against both as before (CONVT_WG_SC_SEGS=0,CONVT_WG_WUP=2): the held-out fuzzed layers
  # whose plan they change (scripts/suites/sc_wup_heldout.json, checked against PyTorch
  # first) and the model suites, float32 (TF32) and bfloat16, GPU time.
  step sc-wup-check python3 -m convt bench --suite scripts/suites/sc_wup_heldout.json \
    --dtype fp32,bf16 --reps 1 --warmup 1 -q
  grep -E "geomean|error|mismatch" "$OUT/sc-wup-check.log" | tail -4 | tee -a "$SUMMARY"
  step sc-wup-heldout python3 scripts/env_ab.py --suite scripts/suites/sc_wup_heldout.json \
    --dtype fp32,bf16 --rounds 2 --gpu-time --json "$OUT/sc-wup-heldout.json" base= \
    prev=CONVT_WG_SC_SEGS=0,CONVT_WG_WUP=2
  python3 scripts/ab_summary.py "$OUT/sc-wup-heldout.log" | tee -a "$SUMMARY"
  model_suites_ab sc-wup prev=CONVT_WG_SC_SEGS=0,CONVT_WG_WUP=2
fi
if has sc-xp-ab; then
  # The W phase pairs transposed in the kernel taken over scattered W taps on the copy
  # whatever their boxes (CONVT_WG_SC_XP=1) against the default: the fuzzed layers where the
  # pairs can take over (scripts/suites/sc_xp_fuzz.json, drawn when the default was the
  # scattered taps everywhere; bfloat16 only, checked against PyTorch first), GPU time.
  draw_ab sc-xp scripts/suites/sc_xp_fuzz.json bf16 CONVT_WG_SC_XP=1
fi
if has sc-xp-held-ab; then
  # The W phase pairs transposed in the kernel taken over scattered W taps where their boxes
  # hold at most 4x the input's bytes (the default) against the scattered taps
  # (CONVT_WG_SC_XP=0), on layers drawn after that rule was set
  # (scripts/suites/sc_xp_heldout.json, bfloat16).
  held_ab sc-xp-held scripts/suites/sc_xp_heldout.json bf16 scattered=CONVT_WG_SC_XP=0
fi
if has volume-sparse-ab; then
  # 3-D layers the dispatch gives another kernel because the wgmma tile would compute few of
  # its positions for outputs (scripts/suites/volume_sparse_fuzz.json), against the wgmma
  # kernel forced: checked against PyTorch on it, then GPU time, float32 (TF32) and bfloat16.
  draw_ab volume-sparse scripts/suites/volume_sparse_fuzz.json fp32,bf16 \
    CONVT_FORWARD_KERNEL=implicit_gemm_wgmma
fi
if has volume-held-ab; then
  # Volumes on the wgmma kernel down to tiles of 18% used and whatever one stacked plane
  # fills (the default) against the rules of planes (CONVT_WG_VOLUME_USED=0), on layers
  # drawn after that rule was set (scripts/suites/volume_sparse_heldout.json), float32
  # (TF32) and bfloat16.
  held_ab volume-held scripts/suites/volume_sparse_heldout.json fp32,bf16 \
    planes=CONVT_WG_VOLUME_USED=0
fi
if has f32-rows-held-ab; then
  # Strided 1-D float32 (TF32) layers on the wgmma kernel where output channels per group x
  # W taps are at least R times the input channels per group (the default, R = 2.5; the draw
  # was made and measured with R = 1.5) against the reduction rules (CONVT_WG_F32_1D=0), on
  # scripts/suites/f32_rows_heldout.json; then HiFi-GAN's layers of the models suite.
  held_ab f32-rows-held scripts/suites/f32_rows_heldout.json fp32 reduction=CONVT_WG_F32_1D=0
  step f32-rows-models python3 scripts/env_ab.py --suite models \
    --cases hifigan_up1,hifigan_up2,hifigan_up3,hifigan_up4 --dtype fp32 --rounds 3 \
    --gpu-time --json "$OUT/f32-rows-models.json" base= reduction=CONVT_WG_F32_1D=0
  python3 scripts/ab_summary.py "$OUT/f32-rows-models.log" | tee -a "$SUMMARY"
fi
if has f32-rows-held2-ab; then
  # The same rule, its bound of 2.5 checked on a draw made after it was set
  # (scripts/suites/f32_rows_heldout2.json).
  held_ab f32-rows-held2 scripts/suites/f32_rows_heldout2.json fp32 reduction=CONVT_WG_F32_1D=0
fi
if has wtap1-ab; then
  # Layers of one W tap and a W stride (scripts/suites/wtap1_fuzz.json), as dispatched
  # against the TMA kernel forced: checked against PyTorch on it, then GPU time, float32
  # (TF32) and bfloat16; also without zeros inserted along W (which the dispatch takes on
  # many of them: s times the MMAs for a single tap).
  draw_ab wtap1 scripts/suites/wtap1_fuzz.json fp32,bf16 CONVT_FORWARD_KERNEL=implicit_gemm_tma \
    nozeros=CONVT_WG_WUP=0
fi
if has wprobe; then
  # What the traffic from L2 costs the wgmma kernel: the KernelBench cases timed as they
  # run and under the measuring probes CONVT_WG_WREUSE=2 (no stage copies its weight tiles
  # twice), CONVT_WG_BOXPROBE=1 (nor its box) and both (wrong results, timing only: upper
  # bounds of what resident weights or fewer box bytes could give), float32 (TF32) and
  # bfloat16, GPU time.
  step wprobe python3 scripts/env_ab.py --suite kernelbench --dtype fp32,bf16 --rounds 2 \
    --gpu-time --json "$OUT/wprobe.json" base= probe=CONVT_WG_WREUSE=2 \
    box=CONVT_WG_BOXPROBE=1 both=CONVT_WG_WREUSE=2,CONVT_WG_BOXPROBE=1
  python3 scripts/ab_summary.py "$OUT/wprobe.log" | tee -a "$SUMMARY"
fi
if has xp-hfull16-ab; then
  # The H-complete K step transposed in the kernel in 16-bit types too (CONVT_WG_XP_HFULL=2,
  # the default) against float32 only (=1): the fuzzed layers it changes
  # (scripts/suites/xp_hfull16_fuzz.json, and xp_hfull16_fuzz2.json drawn after it was
  # measured; each checked against PyTorch first), KernelBench and the models suites,
  # bfloat16 and float16, GPU time.
  for d in xp_hfull16_fuzz xp_hfull16_fuzz2; do
    step "$d-check" python3 -m convt bench --suite "scripts/suites/$d.json" --dtype bf16,fp16 \
      --reps 1 --warmup 1 --json "$OUT/$d-check.json" -q
    grep -E "geomean|error|mismatch" "$OUT/$d-check.log" | tail -4 | tee -a "$SUMMARY"
  done
  for s in fuzz:scripts/suites/xp_hfull16_fuzz.json fuzz2:scripts/suites/xp_hfull16_fuzz2.json \
           kb:kernelbench models:models more:scripts/suites/more_models.json; do
    step "xp-hfull16-${s%%:*}" python3 scripts/env_ab.py --suite "${s#*:}" --dtype bf16,fp16 \
      --rounds 2 --gpu-time base= f32only=CONVT_WG_XP_HFULL=1
    python3 scripts/ab_summary.py "$OUT/xp-hfull16-${s%%:*}.log" | tee -a "$SUMMARY"
  done
fi
if has xp-ring-ab; then
  # The supply of the in-kernel transposition: the pieces loaded ahead of the stages (the
  # default) against after them (CONVT_WG_XP_EARLY=0), and deeper rings of pieces
  # (CONVT_WG_XP_RING=P: up to P pieces, stages given up for them): the KernelBench cases that
  # transpose in the kernel and the held-out fuzzed layers, GPU time. Correctness first:
  # WG_FILTER='*WgmmaXp*:*WgmmaPath*' WG_TEST_ENV="CONVT_WG_XP_EARLY=0 CONVT_WG_XP_RING=16"
  # ... build wg-test wg-sanitize.
  step xp-ring-kb python3 scripts/env_ab.py --cases kb57,kb64,kb71,kb74,kb78 --dtype bf16,fp32 \
    --rounds 2 --gpu-time base= late=CONVT_WG_XP_EARLY=0 r16=CONVT_WG_XP_RING=16 \
    r12=CONVT_WG_XP_RING=12
  python3 scripts/ab_summary.py "$OUT/xp-ring-kb.log" | tee -a "$SUMMARY"
  step xp-ring-fuzz python3 scripts/env_ab.py --suite scripts/suites/even_layouts_fuzz.json \
    --dtype bf16 --rounds 2 --gpu-time base= late=CONVT_WG_XP_EARLY=0 r16=CONVT_WG_XP_RING=16
  python3 scripts/ab_summary.py "$OUT/xp-ring-fuzz.log" | tee -a "$SUMMARY"
fi
if has pairs-ab; then
  # The W phase pairs against the dispatch without them (GPU time, one build): on channel-major
  # tiles (CONVT_WG_CMPAIRS=0 / =1) over the model suites, and every pair
  # (CONVT_WG_WMERGE=0) on the layers of kernel 2, stride 2 of scripts/suites/one_tap.json.
  model_suites_ab pairs nocm=CONVT_WG_CMPAIRS=0 cm1=CONVT_WG_CMPAIRS=1
  step pairs-one_tap python3 scripts/env_ab.py --suite scripts/suites/one_tap.json \
    --dtype fp32,bf16 --rounds 2 --gpu-time base= nopairs=CONVT_WG_WMERGE=0
  grep -E "geomean" "$OUT/pairs-one_tap.log" | tee -a "$SUMMARY"
  # (Channels_last inputs, whose outputs are channels_last where PyTorch's are: the
  # channel-major pairs store such outputs element by element.)
  step pairs-one_tap-cl python3 scripts/env_ab.py --suite scripts/suites/one_tap.json \
    --dtype fp32,bf16 --rounds 2 --gpu-time --channels-last base= nocm=CONVT_WG_CMPAIRS=0
  grep -E "geomean" "$OUT/pairs-one_tap-cl.log" | tee -a "$SUMMARY"
fi
if has splitk-models; then
  # Split K forced on every plan of the model suites (S parts a tile, where it has that many
  # K steps) against the default (which splits only plans of fewer tiles than
  # multiprocessors): for a rule on the layers of one or two partial waves of tiles.
  model_suites_ab splitk s2=CONVT_WG_SPLIT_K=2 s4=CONVT_WG_SPLIT_K=4
  # Float32 3-D layers of kernel 2, stride 2 (which keep the zeros along W): without them on
  # the wgmma kernel and on the TMA kernel.
  for sc in "models unet3d_up3" "scripts/suites/more_models.json unet3d_320,unet3d_64" \
    "scripts/suites/short_rows.json sr3d_k2"; do
    set -- $sc
    step "wup3d-$(basename "$1" .json)" python3 scripts/env_ab.py --suite "$1" --cases "$2" \
      --dtype fp32 --rounds 2 --gpu-time base= nowup=CONVT_WG_WUP=0 \
      nowupwg=CONVT_WG_WUP=0,CONVT_FORWARD_KERNEL=implicit_gemm_wgmma
  done
  grep -E "geomean" "$OUT"/wup3d-*.log | tee -a "$SUMMARY"
fi
if has small-ab; then
  # The models suite's small layers under the wgmma planner's knobs (K steps of fewer
  # channels: more stages; fewer positions a tile: more tiles), the GPU's time alone.
  step small-ab python3 scripts/env_ab.py --suite models --dtype fp32,bf16 --rounds 2 \
    --gpu-time base= bk32=CONVT_WG_BK=32 bk16=CONVT_WG_BK=16 n128=CONVT_WG_N=128
  grep -E "geomean" "$OUT/small-ab.log" | tee -a "$SUMMARY"
fi
if has wg-bench; then
  # fp32 (TF32) and bf16 forward, 10 runs a side: the wgmma kernel on every case
  # (CONVT_FORWARD_KERNEL=implicit_gemm_wgmma) against the TMA kernel, case by case.
  step wg-bench env CONVT_FORWARD_KERNEL=implicit_gemm_wgmma python3 -m convt bench \
    --dtype fp32,bf16 --math default --reps 10 --json "$OUT/bench-wg.json" -q
  step wg-bench-tma env CONVT_FORWARD_KERNEL=implicit_gemm_tma python3 -m convt bench \
    --dtype fp32,bf16 --math default --reps 10 --json "$OUT/bench-tma.json" -q
  if [ -n "${WG_BENCH_ENV:-}" ]; then  # the wgmma kernel again with one more setting
    step wg-bench-env env CONVT_FORWARD_KERNEL=implicit_gemm_wgmma $WG_BENCH_ENV python3 -m convt \
      bench --dtype fp32,bf16 --math default --reps 10 --json "$OUT/bench-wg-env.json" -q
  fi
  grep -E "geomean" "$OUT"/wg-bench*.log | tee -a "$SUMMARY"
  python3 scripts/bench_compare.py "$OUT/bench-tma.json" "$OUT/bench-wg.json" \
    ${WG_BENCH_ENV:+"$OUT/bench-wg-env.json"} | tee -a "$SUMMARY"
fi
if has wg-strict; then
  # Strict float32 forward, 10 runs a side: split TF32 on the wgmma kernel on every case
  # against split TF32 on the TMA kernel, case by case.
  step wg-strict env CONVT_FORWARD_KERNEL=implicit_gemm_wgmma python3 -m convt bench \
    --dtype fp32 --math strict --reps 10 --json "$OUT/bench-wg-strict.json" -q
  step wg-strict-tma env CONVT_FORWARD_KERNEL=implicit_gemm_tma python3 -m convt bench \
    --dtype fp32 --math strict --reps 10 --json "$OUT/bench-tma-strict.json" -q
  grep -E "geomean" "$OUT"/wg-strict*.log | tee -a "$SUMMARY"
  python3 scripts/bench_compare.py "$OUT/bench-tma-strict.json" "$OUT/bench-wg-strict.json" |
    tee -a "$SUMMARY"
fi
if has wg-steps; then
  # The wgmma kernel with every K step (channels x H taps) it can take, against the
  # planner's choice (WG_STEPS_CASES: case ids, default every case it runs well on).
  step wg-steps python3 scripts/wg_step_sweep.py --dtype fp32,bf16 \
    --case "${WG_STEPS_CASES:-kb57,kb58,kb61,kb64,kb65,kb68,kb69,kb70,kb71,kb72,kb74,kb75,kb77,kb78}" \
    --json "$OUT/wg-steps.json"
  grep -E "default" "$OUT/wg-steps.log" | tee -a "$SUMMARY"
fi
if has wup; then
  # Zeros inserted along W (CONVT_WG_WUP=1, the wgmma kernel wherever W is strided) against
  # none (CONVT_WG_WUP=0, the dispatch before it), 10 runs a side, in fp32 (TF32 and
  # strict) and bf16: the suite's strided cases (WUP_CASES), then layers of published
  # models with strided W (WUP_SHAPES, ';'-separated), compute-bound ones among them.
  WUP_CASES=${WUP_CASES:-kb72,kb73,kb75,kb77,kb79,kb81}
  WUP_SHAPES=${WUP_SHAPES:-"2d N=8 C=256->128 in=64x64 k=4 s=2 p=1;2d N=16 C=64->3 in=128x128 k=4 s=2 p=1;1d N=16 C=512->256 in=8192 k=16 s=8 p=4;1d N=16 C=128->64 in=32768 k=4 s=2 p=1;3d N=2 C=64->32 in=16x32x32 k=3 s=2 p=1 op=1;2d N=4 C=64->64 in=128x128 k=3 s=2 p=1 op=1"}
  IFS=';' read -ra WUP_LIST <<<"$WUP_SHAPES"
  SHAPE_ARGS=()
  for sh in "${WUP_LIST[@]}"; do SHAPE_ARGS+=(--shape "$sh"); done
  for v in 0 1; do
    step "wup-$v" env CONVT_WG_WUP=$v python3 -m convt bench --case "$WUP_CASES" \
      --dtype fp32,bf16 --math default,strict --reps 10 --json "$OUT/bench-wup-$v.json" -q
    step "wup-shapes-$v" env CONVT_WG_WUP=$v python3 -m convt bench "${SHAPE_ARGS[@]}" \
      --dtype fp32,bf16 --math default,strict --reps 10 --json "$OUT/bench-wup-shapes-$v.json" -q
  done
  python3 scripts/bench_compare.py "$OUT/bench-wup-0.json" "$OUT/bench-wup-1.json" | tee -a "$SUMMARY"
  python3 scripts/bench_compare.py "$OUT/bench-wup-shapes-0.json" "$OUT/bench-wup-shapes-1.json" |
    tee -a "$SUMMARY"
fi
if has xp; then
  # The input transposed in the kernel (16-bit types and TF32) against the input copy
  # (CONVT_WG_XP=0): XP_CASES of the suite with scripts/time_cases.py, XP_DTYPES (default
  # bf16; fp32 runs as TF32), each of XP_MODES (CONVT_WG_XP values, d: unset; default
  # "0 d") twice, interleaved; then layers of published models (XP_SHAPES) with convt
  # bench in the same types.
  XP_CASES=${XP_CASES:-kb57,kb58,kb61,kb64,kb65,kb68,kb69,kb70,kb71,kb72,kb73,kb74,kb78}
  for dt in ${XP_DTYPES:-bf16}; do
    for r in 1 2; do
      for v in ${XP_MODES:-0 d}; do
        if [ "$v" = d ]; then xenv=(env -u CONVT_WG_XP); else xenv=(env CONVT_WG_XP=$v); fi
        step "xp-$dt-$v-$r" "${xenv[@]}" python3 scripts/time_cases.py "$dt" "$XP_CASES"
        grep -E "^kb" "$OUT/xp-$dt-$v-$r.log" | sed "s/^/$v: /" | tee -a "$SUMMARY"
      done
    done
  done
  XP_SHAPES=${XP_SHAPES:-"2d N=8 C=256->128 in=64x64 k=4 s=2 p=1;2d N=4 C=128->64 in=128x128 k=3 p=1;3d N=2 C=64->32 in=16x32x32 k=3 s=2 p=1 op=1;1d N=16 C=128->64 in=32768 k=4 s=2 p=1;2d N=8 C=512->256 in=32x32 k=4 s=2 p=1"}
  IFS=';' read -ra XP_LIST <<<"$XP_SHAPES"
  XP_SHAPE_ARGS=()
  for sh in "${XP_LIST[@]}"; do XP_SHAPE_ARGS+=(--shape "$sh"); done
  XP_BENCH_DTYPES=$(echo ${XP_DTYPES:-bf16} | tr ' ' ,)
  for v in ${XP_MODES:-0 d}; do
    if [ "$v" = d ]; then xenv=(env -u CONVT_WG_XP); else xenv=(env CONVT_WG_XP=$v); fi
    step "xp-shapes-$v" "${xenv[@]}" python3 -m convt bench "${XP_SHAPE_ARGS[@]}" \
      --dtype "$XP_BENCH_DTYPES" --reps 10 --json "$OUT/bench-xp-shapes-$v.json" -q
  done
fi
if has raw; then
  # The wgmma kernel reading the input in place (CONVT_WG_RAW=1, wherever it can run)
  # against the dispatch without it (CONVT_WG_RAW=0), fp32 with TF32, 10 runs a side: the
  # suite (RAW_CASES, default all), then layers of published models (RAW_SHAPES).
  RAW_CASES=${RAW_CASES:-}
  RAW_SHAPES=${RAW_SHAPES:-"2d N=8 C=256->128 in=64x64 k=4 s=2 p=1;2d N=16 C=64->3 in=128x128 k=4 s=2 p=1;2d N=4 C=128->64 in=128x128 k=3 p=1;3d N=2 C=64->32 in=16x32x32 k=3 s=2 p=1 op=1;1d N=16 C=128->64 in=32768 k=4 s=2 p=1;2d N=8 C=512->256 in=32x32 k=4 s=2 p=1"}
  IFS=';' read -ra RAW_LIST <<<"$RAW_SHAPES"
  RAW_SHAPE_ARGS=()
  for sh in "${RAW_LIST[@]}"; do RAW_SHAPE_ARGS+=(--shape "$sh"); done
  for v in 0 1; do
    step "raw-$v" env CONVT_WG_RAW=$v python3 -m convt bench ${RAW_CASES:+--case "$RAW_CASES"} \
      --dtype fp32 --math default --reps 10 --json "$OUT/bench-raw-$v.json" -q
    step "raw-shapes-$v" env CONVT_WG_RAW=$v python3 -m convt bench "${RAW_SHAPE_ARGS[@]}" \
      --dtype fp32 --math default --reps 10 --json "$OUT/bench-raw-shapes-$v.json" -q
  done
  python3 scripts/bench_compare.py "$OUT/bench-raw-0.json" "$OUT/bench-raw-1.json" | tee -a "$SUMMARY"
  python3 scripts/bench_compare.py "$OUT/bench-raw-shapes-0.json" "$OUT/bench-raw-shapes-1.json" |
    tee -a "$SUMMARY"
fi
if has mfold; then
  # W taps stacked in M (CONVT_WG_MFOLD=1, set by the tests themselves): their tests, the
  # planner's, and the three sanitizers on them.
  step mfold-test "$BUILD/tests/cpp/convt_test_cuda" --gtest_filter='*WgmmaMfold*'
  grep -E "PASSED|FAILED" "$OUT/mfold-test.log" | tail -12 | tee -a "$SUMMARY"
  step mfold-planner "$BUILD/tests/cpp/convt_test_cuda_planner" \
    --gtest_filter='CudaPlanner.WTapsStackedInM*'
  grep -E "PASSED|FAILED" "$OUT/mfold-planner.log" | tail -3 | tee -a "$SUMMARY"
  for tool in ${MFOLD_SANITIZERS:-memcheck racecheck initcheck}; do
    step "mfold-sanitize-$tool" env CONVT_TEST_QUICK=1 compute-sanitizer --tool "$tool" \
      --error-exitcode 1 "$BUILD/tests/cpp/convt_test_cuda" --gtest_filter='*WgmmaMfold*'
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/mfold-sanitize-$tool.log" | tail -3 | tee -a "$SUMMARY"
  done
fi
if has mfold-ab; then
  # W taps stacked in M: settings MFOLD_AB (default: the planner's rule against none,
  # CONVT_WG_MFOLD=0; add all=CONVT_WG_MFOLD=1 for wherever it can run), GPU time, two
  # rounds: the KernelBench cases of narrow groups (MFOLD_CASES), the models suite and the
  # held-out draw scripts/suites/mfold_fuzz.json, each writing its times as JSON.
  MFOLD_CASES=${MFOLD_CASES:-kb58,kb70,kb71,kb72,kb73,kb75,kb77,kb78}
  MFOLD_AB=${MFOLD_AB:-"base= nomf=CONVT_WG_MFOLD=0"}
  # shellcheck disable=SC2086
  step mfold-ab-kb python3 scripts/env_ab.py --dtype fp32,bf16 --rounds 2 --gpu-time \
    --cases "$MFOLD_CASES" --json "$OUT/mfold-ab-kb.json" $MFOLD_AB
  tail -n 24 "$OUT/mfold-ab-kb.log" | tee -a "$SUMMARY"
  if [ -z "${MFOLD_SKIP_MODELS:-}" ]; then
    # shellcheck disable=SC2086
    step mfold-ab-models python3 scripts/env_ab.py --suite models --dtype fp32,bf16 --rounds 2 \
      --gpu-time --json "$OUT/mfold-ab-models.json" $MFOLD_AB
    grep -E "geomean" "$OUT/mfold-ab-models.log" | tee -a "$SUMMARY"
    # shellcheck disable=SC2086
    step mfold-ab-fuzz python3 scripts/env_ab.py --suite scripts/suites/mfold_fuzz.json \
      --dtype fp32,bf16 --rounds 2 --gpu-time --json "$OUT/mfold-ab-fuzz.json" $MFOLD_AB
    grep -E "geomean" "$OUT/mfold-ab-fuzz.log" | tee -a "$SUMMARY"
  fi
fi
if has odd-ab; then
  # The epilogue's stores by runs of adjacent outputs (where a warp's pairs of outputs are
  # not aligned for one store: odd channel strides, rows of an odd width): this build
  # against an earlier tree (ODD_AB, default the tree in ./ab built by install-old), GPU
  # time, two rounds, every KernelBench case and the draw scripts/suites/odd_layout_fuzz.json.
  # (ODD_CASES narrows the KernelBench cases.)
  ODD_AB=${ODD_AB:-"base= old=PYTHONPATH=/tmp/old"}
  # shellcheck disable=SC2086
  step odd-ab-kb python3 scripts/env_ab.py --dtype fp32,bf16 --rounds 2 --gpu-time \
    ${ODD_CASES:+--cases $ODD_CASES} --json "$OUT/odd-ab-kb.json" $ODD_AB
  tail -n 40 "$OUT/odd-ab-kb.log" | tee -a "$SUMMARY"
  # shellcheck disable=SC2086
  step odd-ab-fuzz python3 scripts/env_ab.py --suite scripts/suites/odd_layout_fuzz.json \
    --dtype fp32,bf16 --rounds 2 --gpu-time --json "$OUT/odd-ab-fuzz.json" $ODD_AB
  grep -E "geomean" "$OUT/odd-ab-fuzz.log" | tee -a "$SUMMARY"
fi
if has xp-more-ab; then
  # Plans that transpose the input in the kernel where the default rules keep the copy
  # (GPU time, two rounds): kb70 in bfloat16 with the transposition asked for (the rule
  # rejects boxes filling under 3/4 of their pieces' columns), and float32 K steps of
  # 8 channels x every H tap, transposed, on kb78 (the H-complete rule rejects steps that
  # give up a stage) and kb71 (which takes them by default: the reference).
  step xp-more-ab-bf16 python3 scripts/env_ab.py --dtype bf16 --rounds 2 --gpu-time \
    --cases kb70,kb57 --json "$OUT/xp-more-ab-bf16.json" base= xp=CONVT_WG_XP=1
  tail -n 8 "$OUT/xp-more-ab-bf16.log" | tee -a "$SUMMARY"
  step xp-more-ab-fp32 python3 scripts/env_ab.py --dtype fp32 --rounds 2 --gpu-time \
    --cases kb78,kb71,kb58 --json "$OUT/xp-more-ab-fp32.json" base= \
    xp8=CONVT_WG_XP=1,CONVT_WG_BK=8,CONVT_WG_HB=3
  tail -n 8 "$OUT/xp-more-ab-fp32.log" | tee -a "$SUMMARY"
fi
if has fold; then
  # The W taps folded into N wherever the tile can (CONVT_WG_FOLD=1) against unfolded tiles
  # (CONVT_WG_FOLD=0), fp32 with TF32 and bf16, 10 runs a side: the suite's narrow-group
  # cases (FOLD_CASES), the wgmma kernel asked for on those the dispatch gives the TMA
  # kernel in fp32, and layers of published models with narrow outputs (FOLD_SHAPES).
  FOLD_CASES=${FOLD_CASES:-kb58,kb70,kb71,kb72,kb73,kb75,kb78}
  FOLD_SHAPES=${FOLD_SHAPES:-"2d N=16 C=64->3 in=128x128 k=4 s=2 p=1;2d N=8 C=32->16 in=256x256 k=3 p=1;1d N=16 C=64->32 in=16384 k=7 p=3;3d N=2 C=64->32 in=16x32x32 k=3 s=2 p=1 op=1;2d N=8 C=64->32 in=128x128 k=5 p=2"}
  IFS=';' read -ra FOLD_LIST <<<"$FOLD_SHAPES"
  FOLD_SHAPE_ARGS=()
  for sh in "${FOLD_LIST[@]}"; do FOLD_SHAPE_ARGS+=(--shape "$sh"); done
  for v in 0 1; do
    step "fold-$v" env CONVT_WG_FOLD=$v python3 -m convt bench --case "$FOLD_CASES" \
      --dtype fp32,bf16 --math default --reps 10 --json "$OUT/bench-fold-$v.json" -q
    step "fold-wg-$v" env CONVT_WG_FOLD=$v CONVT_FORWARD_KERNEL=implicit_gemm_wgmma python3 -m \
      convt bench --case "$FOLD_CASES" --dtype fp32 --math default --reps 10 \
      --json "$OUT/bench-fold-wg-$v.json" -q
    step "fold-shapes-$v" env CONVT_WG_FOLD=$v python3 -m convt bench "${FOLD_SHAPE_ARGS[@]}" \
      --dtype fp32,bf16 --math default --reps 10 --json "$OUT/bench-fold-shapes-$v.json" -q
  done
  for f in fold fold-wg fold-shapes; do
    python3 scripts/bench_compare.py "$OUT/bench-$f-0.json" "$OUT/bench-$f-1.json" | tee -a "$SUMMARY"
  done
fi
if has scatter; then
  # The W taps scattered (CONVT_WG_SCATTER=1, wherever they can run) against the dispatch
  # without them (0), fp32 with TF32 and bf16, 10 runs a side, after a throw-away run: the
  # suite's narrow strided cases (SCATTER_CASES), then layers of published models with
  # narrow strided outputs (SCATTER_SHAPES).
  SCATTER_CASES=${SCATTER_CASES:-kb72,kb75}
  SCATTER_SHAPES=${SCATTER_SHAPES:-"2d N=16 C=64->3 in=128x128 k=4 s=2 p=1;2d N=8 C=128->16 in=64x64 k=4 s=2 p=1;1d N=16 C=64->16 in=8192 k=7 s=4 p=3 op=3;3d N=2 C=32->8 in=16x32x32 k=3 s=2 p=1 op=1"}
  IFS=';' read -ra SC_LIST <<<"$SCATTER_SHAPES"
  SC_SHAPE_ARGS=()
  for sh in "${SC_LIST[@]}"; do SC_SHAPE_ARGS+=(--shape "$sh"); done
  python3 -m convt bench --case "$SCATTER_CASES" --dtype fp32,bf16 --reps 3 -q >/dev/null 2>&1
  for v in 0 1; do
    step "scatter-$v" env CONVT_WG_SCATTER=$v python3 -m convt bench --case "$SCATTER_CASES" \
      --dtype fp32,bf16 --math default --reps 10 --json "$OUT/bench-scatter-$v.json" -q
    step "scatter-shapes-$v" env CONVT_WG_SCATTER=$v python3 -m convt bench \
      "${SC_SHAPE_ARGS[@]}" --dtype fp32,bf16 --math default --reps 10 \
      --json "$OUT/bench-scatter-shapes-$v.json" -q
  done
  for f in scatter scatter-shapes; do
    python3 scripts/bench_compare.py "$OUT/bench-$f-0.json" "$OUT/bench-$f-1.json" | tee -a "$SUMMARY"
  done
fi
if has merge; then
  # W phases merged (CONVT_WG_WMERGE=1, wherever W is strided) against the dispatch without
  # them (0), fp32 with TF32 and bf16, 10 runs a side, after a throw-away run: the suite's
  # strided cases (MERGE_CASES), then layers of published models with W strides
  # (MERGE_SHAPES).
  MERGE_CASES=${MERGE_CASES:-kb72,kb73,kb75,kb77,kb79,kb81}
  MERGE_SHAPES=${MERGE_SHAPES:-"2d N=16 C=64->3 in=128x128 k=4 s=2 p=1;2d N=8 C=256->128 in=64x64 k=4 s=2 p=1;1d N=16 C=128->64 in=32768 k=4 s=2 p=1;3d N=2 C=64->32 in=16x32x32 k=3 s=2 p=1 op=1;2d N=4 C=64->64 in=128x128 k=3 s=2 p=1 op=1"}
  IFS=';' read -ra WM_LIST <<<"$MERGE_SHAPES"
  WM_SHAPE_ARGS=()
  for sh in "${WM_LIST[@]}"; do WM_SHAPE_ARGS+=(--shape "$sh"); done
  python3 -m convt bench --case "$MERGE_CASES" --dtype fp32,bf16 --reps 3 -q >/dev/null 2>&1
  for v in 0 1; do
    step "merge-$v" env CONVT_WG_WMERGE=$v python3 -m convt bench --case "$MERGE_CASES" \
      --dtype fp32,bf16 --math default --reps 10 --json "$OUT/bench-merge-$v.json" -q
    step "merge-shapes-$v" env CONVT_WG_WMERGE=$v python3 -m convt bench \
      "${WM_SHAPE_ARGS[@]}" --dtype fp32,bf16 --math default --reps 10 \
      --json "$OUT/bench-merge-shapes-$v.json" -q
  done
  for f in merge merge-shapes; do
    python3 scripts/bench_compare.py "$OUT/bench-$f-0.json" "$OUT/bench-$f-1.json" | tee -a "$SUMMARY"
  done
fi
if has owners; then
  # Every W phase running (the default) against tap-less W phases written by their owners
  # (CONVT_TMA_W_OWNERS=1), fp32 (TF32) and bf16 forward.
  step owners-bench-off python3 -m convt bench --dtype fp32,bf16 \
    --math default --json "$OUT/bench-owners-off.json" -q
  step owners-bench env CONVT_TMA_W_OWNERS=1 python3 -m convt bench --dtype fp32,bf16 \
    --math default --json "$OUT/bench-owners.json" -q
  grep -E "geomean" "$OUT/owners-bench-off.log" "$OUT/owners-bench.log" | tee -a "$SUMMARY"
fi
if has bench; then
  step bench python3 -m convt bench --dtype fp32,bf16 --math default,strict \
    --json "$OUT/bench.json" --plot "$OUT/bench.png"
fi
if has bench-models; then
  # The layers of published models (convt bench --suite models), after a throw-away run.
  python3 -m convt bench --suite models --dtype fp32 --reps 3 -q >/dev/null 2>&1
  step bench-models python3 -m convt bench --suite models --dtype fp32,bf16 \
    --math default,strict --json "$OUT/models.json"
  grep -E "geomean" "$OUT/bench-models.log" | tee -a "$SUMMARY"
fi
if has host-time; then
  # Host time per call on the models suite's layers, convt's C++ entry points apart
  # (HOST_TIME_DTYPE, default bf16).
  step host-time python3 scripts/host_time.py "${HOST_TIME_DTYPE:-bf16}" all --suite models --breakdown
  # The benchmark's interleaving: convt's host steps after convt, PyTorch and a sleep.
  step host-time-interleaved python3 scripts/host_time.py fp32 kb72,kb74 --interleaved
fi
if has tsplit-test; then
  # Taps split (CONVT_WG_TSPLIT): its tests, the wgmma path's cases with it forced, and the
  # sanitizers on its tests (quick mode).
  step tsplit-test "$BUILD/tests/cpp/convt_test_cuda" --gtest_filter='*TapsSplit*'
  grep -E "PASSED|FAILED" "$OUT/tsplit-test.log" | tail -5 | tee -a "$SUMMARY"
  step tsplit-test-path env CONVT_WG_TSPLIT=1 "$BUILD/tests/cpp/convt_test_cuda" \
    --gtest_filter='CudaWgmmaPath*:*WgmmaStack*:*WgmmaCoop.*:*SplitK*'
  grep -E "PASSED|FAILED" "$OUT/tsplit-test-path.log" | tail -5 | tee -a "$SUMMARY"
  # (racecheck, the slowest by far, on three of the cases: 8 x 8 planes stacked, 3-D with D
  # planes stacked, two warpgroups; TSPLIT_SANITIZERS picks the tools.)
  for tool in ${TSPLIT_SANITIZERS:-memcheck racecheck initcheck}; do
    filter='*TapsSplit*'
    [ "$tool" = racecheck ] &&
      filter='*TapsSplit*/case_001:*TapsSplit*/case_006:*TapsSplit*/case_010'
    step "tsplit-sanitize-$tool" env CONVT_TEST_QUICK=1 compute-sanitizer --tool "$tool" \
      --error-exitcode 1 "$BUILD/tests/cpp/convt_test_cuda" --gtest_filter="$filter"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/tsplit-sanitize-$tool.log" | tail -3 | tee -a "$SUMMARY"
  done
fi
if has tsplit-ab; then
  # Taps split where the rule takes it (=2) and wherever it plans (=1) against none: the
  # GPU's time on the models suites, the fuzzed layers it changes, and KernelBench.
  # (TSPLIT_AB_SUITES: the suites, by default all four; each suite's times in
  # tsplit-ab-SUITE.json, for fitting a rule over the fuzzed layers.)
  for s in ${TSPLIT_AB_SUITES:-models scripts/suites/more_models.json scripts/suites/tsplit_fuzz.json kernelbench}; do
    n=$(basename "$s" .json)
    step "tsplit-ab-$n" python3 scripts/env_ab.py --suite "$s" --dtype fp32,bf16 --rounds 2 \
      --gpu-time --json "$OUT/tsplit-ab-$n.json" base= auto=CONVT_WG_TSPLIT=2 all=CONVT_WG_TSPLIT=1
    grep -E "geomean|against" "$OUT/tsplit-ab-$n.log" | tail -8 | tee -a "$SUMMARY"
  done
fi
if has xp-coop-test; then
  # Two warpgroups over the input transposed in the kernel (CONVT_WG_XP_COOP=1): their
  # tests, the wgmma kernel's path cases and two-warpgroup cases with the setting (where it
  # plans, the two warpgroups then transpose), and the sanitizers on its tests (quick mode;
  # racecheck on three cases).
  step xp-coop-test "$BUILD/tests/cpp/convt_test_cuda" --gtest_filter='*WgmmaXpCoop*'
  grep -E "PASSED|FAILED" "$OUT/xp-coop-test.log" | tail -5 | tee -a "$SUMMARY"
  step xp-coop-test-path env CONVT_WG_XP_COOP=1 "$BUILD/tests/cpp/convt_test_cuda" \
    --gtest_filter='CudaWgmmaPath*:*WgmmaCoop.*'
  grep -E "PASSED|FAILED" "$OUT/xp-coop-test-path.log" | tail -5 | tee -a "$SUMMARY"
fi
if has xp-coop-test || has xp-coop-sanitize; then
  # (xp-coop-sanitize alone: the sanitizers without the tests above, for a call of its own.)
  for tool in ${XP_COOP_SANITIZERS:-memcheck racecheck initcheck}; do
    filter='*WgmmaXpCoop*'
    [ "$tool" = racecheck ] &&
      filter='*WgmmaXpCoop*/case_000:*WgmmaXpCoop*/case_002:*WgmmaXpCoop*/case_004'
    step "xp-coop-sanitize-$tool" env CONVT_TEST_QUICK=1 compute-sanitizer --tool "$tool" \
      --error-exitcode 1 "$BUILD/tests/cpp/convt_test_cuda" --gtest_filter="$filter"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/xp-coop-sanitize-$tool.log" | tail -3 | tee -a "$SUMMARY"
  done
fi
if has xp-coop-ab; then
  # The same setting against the default: KernelBench and the fuzzed layers whose plan it
  # changes (scripts/suites/xp_coop_fuzz.json) checked against PyTorch with it first, then
  # the GPU's time on those (XP_COOP_AB_SUITES; of KernelBench only kb64 changes, the others
  # stand as the control; no layer of the model suites changes), float32 (TF32) and
  # bfloat16, two rounds; also with a ring of 16 raw pieces (CONVT_WG_XP_RING=16: stages
  # given up for it), whether the transposer is starved.
  step xp-coop-check env CONVT_WG_XP_COOP=1 python3 -m convt bench --dtype fp32,bf16 \
    --reps 1 --warmup 1 --json "$OUT/xp-coop-check.json" -q
  grep -E "geomean|error|mismatch" "$OUT/xp-coop-check.log" | tail -4 | tee -a "$SUMMARY"
  step xp-coop-fuzz-check env CONVT_WG_XP_COOP=1 python3 -m convt bench \
    --suite scripts/suites/xp_coop_fuzz.json --dtype fp32,bf16 --reps 1 --warmup 1 \
    --json "$OUT/xp-coop-fuzz-check.json" -q
  grep -E "geomean|error|mismatch" "$OUT/xp-coop-fuzz-check.log" | tail -4 | tee -a "$SUMMARY"
  for s in ${XP_COOP_AB_SUITES:-kernelbench scripts/suites/xp_coop_fuzz.json}; do
    n=$(basename "$s" .json)
    step "xp-coop-ab-$n" python3 scripts/env_ab.py --suite "$s" --dtype fp32,bf16 --rounds 2 \
      --gpu-time --json "$OUT/xp-coop-ab-$n.json" base= xpcoop=CONVT_WG_XP_COOP=1 \
      xpring=CONVT_WG_XP_COOP=1,CONVT_WG_XP_RING=16
    python3 scripts/ab_summary.py "$OUT/xp-coop-ab-$n.log" | tee -a "$SUMMARY"
  done
fi
if has xp-coop-held-ab; then
  # The default rule for two warpgroups over the input transposed in the kernel
  # (xp_coop_mode in src/cuda/fprop_implicit_gemm.cu) on layers drawn for checking it
  # (scripts/suites/xp_coop_heldout.json, pool 4921): checked against PyTorch by default
  # first, then the GPU's time without the form (=0), by default and wherever it can run (=1).
  step xp-coop-held-check python3 -m convt bench --suite scripts/suites/xp_coop_heldout.json \
    --dtype fp32,bf16 --reps 1 --warmup 1 --json "$OUT/xp-coop-held-check.json" -q
  grep -E "geomean|error|mismatch" "$OUT/xp-coop-held-check.log" | tail -4 | tee -a "$SUMMARY"
  step xp-coop-held-ab python3 scripts/env_ab.py --suite scripts/suites/xp_coop_heldout.json \
    --dtype fp32,bf16 --rounds 2 --gpu-time --json "$OUT/xp-coop-held-ab.json" \
    off=CONVT_WG_XP_COOP=0 rule= all=CONVT_WG_XP_COOP=1
  python3 scripts/ab_summary.py "$OUT/xp-coop-held-ab.log" | tee -a "$SUMMARY"
fi
if has xp-coop-macs-ab; then
  # Two warpgroups over the input transposed in the kernel past one warpgroup's bound of 768
  # multiply-adds per input element (CONVT_WG_XP_COOP_MACS): the layers whose plan a bound of
  # 4096 changes (scripts/suites/xp_coop_macs_fuzz.json, pool 4930; XP_COOP_MACS_SUITE for
  # the held-out draw, xp_coop_macs_heldout.json) checked against PyTorch with it first,
  # then the GPU's time at 768 (16-bit types' default; the first setting, so the others are
  # compared with it), 1536, 2304 (float32's default) and 4096, and KernelBench's kb69
  # (1920) with it.
  ms=${XP_COOP_MACS_SUITE:-scripts/suites/xp_coop_macs_fuzz.json}
  step xp-coop-macs-check env CONVT_WG_XP_COOP_MACS=4096 python3 -m convt bench --suite "$ms" \
    --dtype fp32,bf16 --reps 1 --warmup 1 --json "$OUT/xp-coop-macs-check.json" -q
  grep -E "geomean|error|mismatch" "$OUT/xp-coop-macs-check.log" | tail -4 | tee -a "$SUMMARY"
  step xp-coop-macs-ab python3 scripts/env_ab.py --suite "$ms" --dtype fp32,bf16 --rounds 2 \
    --gpu-time --json "$OUT/xp-coop-macs-ab.json" m768=CONVT_WG_XP_COOP_MACS=768 \
    m1536=CONVT_WG_XP_COOP_MACS=1536 m2304=CONVT_WG_XP_COOP_MACS=2304 \
    m4096=CONVT_WG_XP_COOP_MACS=4096
  python3 scripts/ab_summary.py "$OUT/xp-coop-macs-ab.log" | tee -a "$SUMMARY"
  step xp-coop-macs-kb python3 scripts/env_ab.py --cases kb69 --dtype bf16 --rounds 2 \
    --gpu-time m768=CONVT_WG_XP_COOP_MACS=768 m4096=CONVT_WG_XP_COOP_MACS=4096
  tail -3 "$OUT/xp-coop-macs-kb.log" | tee -a "$SUMMARY"
fi
if has xp-w2-test; then
  # Two transposer warps (the default; CONVT_WG_XP_WARPS=1 for one): their test (two warps
  # and one), the two-warpgroup transposition's and the transposition's tests and the
  # dispatch rules' layers with one warp, and the sanitizers on their test (quick mode;
  # racecheck on it too).
  step xp-w2-test "$BUILD/tests/cpp/convt_test_cuda" --gtest_filter='*XpWarps*'
  grep -E "PASSED|FAILED" "$OUT/xp-w2-test.log" | tail -5 | tee -a "$SUMMARY"
  step xp-w2-test-xp env CONVT_WG_XP_WARPS=1 "$BUILD/tests/cpp/convt_test_cuda" \
    --gtest_filter='*WgmmaXpCoop*:*CudaWgmmaXp.*:CudaDispatchRules.*'
  grep -E "PASSED|FAILED" "$OUT/xp-w2-test-xp.log" | tail -5 | tee -a "$SUMMARY"
  for tool in ${XP_W2_SANITIZERS:-memcheck racecheck initcheck}; do
    step "xp-w2-sanitize-$tool" env CONVT_TEST_QUICK=1 compute-sanitizer --tool "$tool" \
      --error-exitcode 1 "$BUILD/tests/cpp/convt_test_cuda" --gtest_filter='*XpWarps*'
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/xp-w2-sanitize-$tool.log" | tail -3 | tee -a "$SUMMARY"
  done
fi
if has rules-test; then
  # The layers the dispatch rules move (CudaDispatchRules: each rule's layers in every
  # precision against the float64 oracle, as dispatched) and the two-warpgroup transposition's
  # tests, under the defaults.
  step rules-test "$BUILD/tests/cpp/convt_test_cuda" \
    --gtest_filter='CudaDispatchRules.*:*WgmmaXpCoop*:*XpWarps*'
  grep -E "PASSED|FAILED" "$OUT/rules-test.log" | tail -5 | tee -a "$SUMMARY"
fi
if has few-out-ab; then
  # Few output channels (1-4 a group, 8-512 input channels: the last layers of generators
  # and decoders), which the dispatch gives position-major wgmma tiles of 8 channels: the
  # draw (scripts/suites/few_outputs_fuzz.json; FEW_OUT_SUITE=scripts/suites/
  # few_outputs_heldout.json for the held-out one) checked against PyTorch and timed end to
  # end, then the GPU's time of the default against the direct kernel and the TMA kernel
  # forced, float32 (TF32) and bfloat16, two rounds; the same for the published layers of
  # this kind (more_models: pix2pix's, WaveGAN's, Conv-TasNet's, FSRCNN's last layers;
  # models: DCGAN's).
  fs=${FEW_OUT_SUITE:-scripts/suites/few_outputs_fuzz.json}
  step few-out-check python3 -m convt bench --suite "$fs" --dtype fp32,bf16 --reps 5 \
    --warmup 2 --json "$OUT/few-out-check.json" -q
  grep -E "geomean|error|mismatch" "$OUT/few-out-check.log" | tail -4 | tee -a "$SUMMARY"
  step few-out-ab python3 scripts/env_ab.py --suite "$fs" --dtype fp32,bf16 --rounds 2 \
    --gpu-time --json "$OUT/few-out-ab.json" base= direct=CONVT_FORWARD_KERNEL=direct \
    tma=CONVT_FORWARD_KERNEL=implicit_gemm_tma
  python3 scripts/ab_summary.py "$OUT/few-out-ab.log" | tee -a "$SUMMARY"
  step few-out-models python3 scripts/env_ab.py --suite scripts/suites/more_models.json \
    --cases pix2pix_out,wavegan_out,convtasnet_dec,fsrcnn_x3 --dtype fp32,fp32s,bf16 --rounds 2 \
    --gpu-time base= direct=CONVT_FORWARD_KERNEL=direct tma=CONVT_FORWARD_KERNEL=implicit_gemm_tma
  tail -12 "$OUT/few-out-models.log" | tee -a "$SUMMARY"
  step few-out-dcgan python3 scripts/env_ab.py --suite models --cases dcgan_g5 \
    --dtype fp32,bf16 --rounds 2 --gpu-time base= direct=CONVT_FORWARD_KERNEL=direct \
    tma=CONVT_FORWARD_KERNEL=implicit_gemm_tma
  tail -6 "$OUT/few-out-dcgan.log" | tee -a "$SUMMARY"
fi
if has fold-test; then
  # GEMM and fold: its tests (every precision against the float64 oracle, forced), the
  # tensor-core kernels' sweep and strict float32's long reductions (which ask for it too),
  # then the sanitizers on its tests (quick mode).
  step fold-test "$BUILD/tests/cpp/convt_test_cuda" \
    --gtest_filter='*GemmFold*:*CudaFastPath*:CudaStrictFloat32.*'
  grep -E "PASSED|FAILED" "$OUT/fold-test.log" | tail -5 | tee -a "$SUMMARY"
  for tool in ${FOLD_SANITIZERS:-memcheck racecheck initcheck}; do
    step "fold-sanitize-$tool" env CONVT_TEST_QUICK=1 compute-sanitizer --tool "$tool" \
      --error-exitcode 1 "$BUILD/tests/cpp/convt_test_cuda" --gtest_filter='*GemmFold*'
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/fold-sanitize-$tool.log" | tail -3 | tee -a "$SUMMARY"
  done
fi
if has fold-ab; then
  # GEMM and fold on few output channels: its Python tests (tests/python/test_gemm_fold.py:
  # every form, every precision, against float64), then on FEW_OUT_SUITE (default the fuzzed
  # draw few_outputs_fuzz.json): checked against PyTorch with it forced (its GEMM on cp.async
  # tiles and the fold in that GEMM's epilogue where they run); the GPU's time, two rounds,
  # float32 (TF32) and bfloat16, of the default against it off (CONVT_GEMM_FOLD=0), forced
  # wherever it runs (=1), forced with the cp.async GEMM (CONVT_GEMM_FOLD_PIPE=1) and with
  # the fold fused into it (CONVT_GEMM_FOLD_FUSED=1); strict float32, which the rules leave
  # to the other kernels, against it forced. (fold-models: the published layers.)
  fs=${FEW_OUT_SUITE:-scripts/suites/few_outputs_fuzz.json}
  step fold-py python3 -m pytest -q tests/python/test_gemm_fold.py
  tail -2 "$OUT/fold-py.log" | tee -a "$SUMMARY"
  step fold-check env CONVT_GEMM_FOLD=1 CONVT_GEMM_FOLD_PIPE=1 CONVT_GEMM_FOLD_FUSED=1 \
    python3 -m convt bench \
    --suite "$fs" --dtype fp32,bf16,fp16 --math default,strict --reps 3 --warmup 1 \
    --json "$OUT/fold-check.json" -q
  grep -E "geomean|error|mismatch" "$OUT/fold-check.log" | tail -8 | tee -a "$SUMMARY"
  step fold-ab python3 scripts/env_ab.py --suite "$fs" --dtype fp32,bf16 --rounds 2 \
    --gpu-time --json "$OUT/fold-ab.json" base= off=CONVT_GEMM_FOLD=0 on=CONVT_GEMM_FOLD=1 \
    onpipe=CONVT_GEMM_FOLD=1,CONVT_GEMM_FOLD_PIPE=1 \
    onfused=CONVT_GEMM_FOLD=1,CONVT_GEMM_FOLD_PIPE=1,CONVT_GEMM_FOLD_FUSED=1
  python3 scripts/ab_summary.py "$OUT/fold-ab.log" | tee -a "$SUMMARY"
  step fold-strict-ab python3 scripts/env_ab.py --suite "$fs" --dtype fp32s --rounds 2 \
    --gpu-time --json "$OUT/fold-strict-ab.json" base= on=CONVT_GEMM_FOLD=1
  python3 scripts/ab_summary.py "$OUT/fold-strict-ab.log" | tee -a "$SUMMARY"
fi
if has fold-draws; then
  # GEMM and fold on the few-output draws (FOLD_SUITES, default the fuzzed, held-out and
  # third draws): its Python tests and the planner's first, then the GPU's time, two rounds,
  # float32 (TF32), strict float32, bfloat16 and float16, of the default against it off
  # (CONVT_GEMM_FOLD=0) and forced wherever it runs (=1).
  step fold-py python3 -m pytest -q tests/python/test_gemm_fold.py
  tail -2 "$OUT/fold-py.log" | tee -a "$SUMMARY"
  if [ -x "$BUILD/tests/cpp/convt_test_cuda_planner" ]; then
    step fold-planner "$BUILD/tests/cpp/convt_test_cuda_planner"
    grep -E "PASSED|FAILED" "$OUT/fold-planner.log" | tail -8 | tee -a "$SUMMARY"
  fi
  for fs in ${FOLD_SUITES:-scripts/suites/few_outputs_fuzz.json scripts/suites/few_outputs_heldout.json scripts/suites/few_outputs_third.json}; do
    name=$(basename "$fs" .json)
    step "fold-draw-$name" python3 scripts/env_ab.py --suite "$fs" --dtype fp32,fp32s,bf16,fp16 \
      --rounds 2 --gpu-time --json "$OUT/fold-draw-$name.json" base= off=CONVT_GEMM_FOLD=0 \
      on=CONVT_GEMM_FOLD=1
    python3 scripts/ab_summary.py "$OUT/fold-draw-$name.log" | tee -a "$SUMMARY"
  done
fi
if has store4-test; then
  # The wgmma epilogues storing four outputs a lane (CONVT_WG_STORE4=1): the wgmma sweep with
  # it (CudaWgmmaStore4), then compute-sanitizer's memcheck and racecheck on it (quick mode).
  step store4-test "$BUILD/tests/cpp/convt_test_cuda" --gtest_filter='*WgmmaStore4*'
  grep -E "PASSED|FAILED" "$OUT/store4-test.log" | tail -5 | tee -a "$SUMMARY"
  for tool in memcheck racecheck; do
    step "store4-sanitize-$tool" env CONVT_TEST_QUICK=1 compute-sanitizer --tool "$tool" \
      --error-exitcode 1 "$BUILD/tests/cpp/convt_test_cuda" --gtest_filter='*WgmmaStore4*'
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/store4-sanitize-$tool.log" | tail -3 | tee -a "$SUMMARY"
  done
fi
if has store4-ab; then
  # The same against the default, GPU time, two rounds: KernelBench and the models suite,
  # float32 (TF32) and bfloat16; also with the planner's pair-aligned layouts off
  # (CONVT_WG_EVEN=0: four outputs a lane align each run themselves).
  for s in kernelbench models; do
    step "store4-ab-$s" python3 scripts/env_ab.py --suite "$s" --dtype fp32,bf16 --rounds 2 \
      --gpu-time --json "$OUT/store4-ab-$s.json" base= store4=CONVT_WG_STORE4=1 \
      store4odd=CONVT_WG_STORE4=1,CONVT_WG_EVEN=0
    python3 scripts/ab_summary.py "$OUT/store4-ab-$s.log" | tee -a "$SUMMARY"
  done
fi
if has fold-models; then
  # GEMM and fold on published last layers (more_models: pix2pix's, WaveGAN's, Conv-TasNet's,
  # FSRCNN's; models: DCGAN's): the default against it off and forced, GPU time.
  step fold-models python3 scripts/env_ab.py --suite scripts/suites/more_models.json \
    --cases pix2pix_out,wavegan_out,convtasnet_dec,fsrcnn_x3 --dtype fp32,fp32s,bf16 --rounds 2 \
    --gpu-time base= off=CONVT_GEMM_FOLD=0 on=CONVT_GEMM_FOLD=1
  tail -18 "$OUT/fold-models.log" | tee -a "$SUMMARY"
  step fold-dcgan python3 scripts/env_ab.py --suite models --cases dcgan_g5 \
    --dtype fp32,fp32s,bf16 --rounds 2 --gpu-time base= off=CONVT_GEMM_FOLD=0 on=CONVT_GEMM_FOLD=1
  tail -8 "$OUT/fold-dcgan.log" | tee -a "$SUMMARY"
fi
if has xp-w2-ab || has xp-w2-held-ab; then
  # Two transposer warps (the default) against one (CONVT_WG_XP_WARPS=1), float32 (TF32)
  # and bfloat16, GPU time, two rounds: xp-w2-ab on KernelBench (also with the
  # transposition asked for wherever it can run, CONVT_WG_XP=1) and the two-warpgroup draw
  # (scripts/suites/xp_coop_fuzz.json); xp-w2-held-ab on the held-out two-warpgroup draw
  # (xp_coop_heldout.json). Then position-major tiles of 16-32 channels with the
  # transposition forced (xp_w2_pos_fuzz.json, or xp_w2_pos_heldout.json for
  # xp-w2-held-ab; XP_W2_POS_SUITE for another), checked against PyTorch first.
  if has xp-w2-ab; then
    step xp-w2-ab-kb python3 scripts/env_ab.py --suite kernelbench --dtype fp32,bf16 --rounds 2 \
      --gpu-time --json "$OUT/xp-w2-ab-kb.json" base= w1=CONVT_WG_XP_WARPS=1 \
      xp=CONVT_WG_XP=1 xpw1=CONVT_WG_XP=1,CONVT_WG_XP_WARPS=1
    python3 scripts/ab_summary.py "$OUT/xp-w2-ab-kb.log" | tee -a "$SUMMARY"
    cs=scripts/suites/xp_coop_fuzz.json
    ps=${XP_W2_POS_SUITE:-scripts/suites/xp_w2_pos_fuzz.json}
  else
    cs=scripts/suites/xp_coop_heldout.json
    ps=${XP_W2_POS_SUITE:-scripts/suites/xp_w2_pos_heldout.json}
  fi
  step xp-w2-ab-coop python3 scripts/env_ab.py --suite "$cs" \
    --dtype fp32,bf16 --rounds 2 --gpu-time --json "$OUT/xp-w2-ab-coop.json" base= \
    w1=CONVT_WG_XP_WARPS=1
  python3 scripts/ab_summary.py "$OUT/xp-w2-ab-coop.log" | tee -a "$SUMMARY"
  step xp-w2-pos-check env CONVT_WG_XP=1 python3 -m convt bench \
    --suite "$ps" --dtype fp32,bf16 --reps 1 --warmup 1 --json "$OUT/xp-w2-pos-check.json" -q
  grep -E "geomean|error|mismatch" "$OUT/xp-w2-pos-check.log" | tail -4 | tee -a "$SUMMARY"
  step xp-w2-ab-pos python3 scripts/env_ab.py --suite "$ps" --dtype fp32,bf16 --rounds 2 \
    --gpu-time --json "$OUT/xp-w2-ab-pos.json" xp=CONVT_WG_XP=1 \
    xpw1=CONVT_WG_XP=1,CONVT_WG_XP_WARPS=1
  python3 scripts/ab_summary.py "$OUT/xp-w2-ab-pos.log" | tee -a "$SUMMARY"
fi
if has export-time; then
  # An exported KernelBench solution's first build (load_inline, all cores) and check:
  # EXPORT_CASE (default kb64) through kernelbench-check, forward only, one trial.
  ec=${EXPORT_CASE:-kb64}
  python3 -m convt export-kernelbench --from-suite kernelbench --case "$ec" -o "$OUT/kbprob" -q
  python3 -m convt export-kernelbench "$(ls "$OUT"/kbprob/*.py | head -1)" -o "$OUT/kbsol.py" -q
  step export-time python3 -m convt kernelbench-check "$(ls "$OUT"/kbprob/*.py | head -1)" \
    "$OUT/kbsol.py" --trials 1 --reps 5 --no-backward --math default
  rm -rf "$OUT/kbprob" "$OUT/kbsol.py"
fi
if has kernel-times; then
  # The GPU's time alone, convt against PyTorch, case by case, with each side's kernels
  # (scripts/kernel_times.py): the KernelBench suite and the models suite.
  step kernel-times-kb python3 scripts/kernel_times.py --dtype fp32,bf16 --kernels \
    --json "$OUT/kernel-times-kb.json"
  step kernel-times-models python3 scripts/kernel_times.py --suite models --dtype fp32,bf16 \
    --kernels --json "$OUT/kernel-times-models.json"
fi
if has overhead; then
  step overhead python3 scripts/host_overhead.py
fi
echo "==== summary"
cat "$SUMMARY"
# PACK_LOGS=1: the step logs go into one archive, $OUT/logs.tar.gz, for tools that bring
# back only a few files from $OUT (JSON, CSV and the summary stay as they are).
if [ "${PACK_LOGS:-0}" = 1 ] && ls "$OUT"/*.log >/dev/null 2>&1; then
  (cd "$OUT" && tar czf logs.tar.gz ./*.log && rm -f ./*.log)
fi
