#!/usr/bin/env bash
# tests/gpu/device-run.sh BUNDLE: the GPU checks, on the lent GPU machine
# (one prepared run, about 5 minutes; give the device tool timeout_s 600), from the repository root of the copy
# the device tool makes. BUNDLE is a ferry build for Python 3.12 with the
# libraries it needs and their loader: BUNDLE/run NAME runs a binary,
# BUNDLE/pyenv prints PYTHONPATH and LD_LIBRARY_PATH (docs/python.md, "GPUs").
#   0. tests/python/test_arrays.py: the extension's arrays, element by
#      element, under that Python's numpy (2.x there, 1.x here)
#   1. tests/python/test_gpu.py: EmbeddingBag and Embedding on CUDA inputs
#      equal to the CPU within 1e-5 (and the arena registered with CUDA)
#   2. examples/python/gpu_train.py: ferry.ps vs torch.distributed.rpc vs
#      tables on the GPU, 1 and 8 trainers, with $FERRYD_ARGS passed to ferryd
#   3. when the bundled ferryd knows --engines: the ferry runs again with
#      each of $ENGINES_ARMS (default "1 auto")
#   4. tests/perf/engines-scaling.sh on the bundle: ferry-ps bench throughput
#      and pull latency as workers grow, per-process TCP, engines 1 and auto,
#      and the binaries from before the engines when $OLD_BUNDLE names them
# Writes under $OUT (default ./gpu-out): test_arrays.log, test_gpu.log, gpu_train*.log and
# .json (the benchmark's JSON line), nvidia-smi.txt, summary.txt. Exits 1 if
# the array checks, the equality test or the main benchmark failed.
# Environment: FERRY_GPU_PYTHON (default /opt/torch/.venv/bin/python3),
# DEVICE (default cuda; cpu for a dry run elsewhere), STEPS (default 300),
# TRAINERS (default "1 8"), FERRYD_ARGS (default none), ENGINES_ARMS,
# OLD_BUNDLE, SCALING_WORKERS (default "1 2 4 8 16"), SCALING_ENGINES (default
# "1 auto"); the time limits of the
# steps in seconds: LIMIT_TEST (150), LIMIT_BENCH (240), LIMIT_ENGINES (120
# each), LIMIT_SCALING (150).
set -uo pipefail
bundle=$(cd "${1:?usage: device-run.sh BUNDLE}" && pwd)
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out/bin"
py=${FERRY_GPU_PYTHON:-/opt/torch/.venv/bin/python3}
device=${DEVICE:-cuda}
steps=${STEPS:-300}
read -r -a trainers <<<"${TRAINERS:-1 8}"
eval "$("$bundle/pyenv")"  # PYTHONPATH to the bundled package, LD_LIBRARY_PATH to ferry's libraries
export PYTHONPATH LD_LIBRARY_PATH OMP_NUM_THREADS=1
# ferryd through the bundled loader, as a command the tests and the benchmark can exec.
printf '#!/bin/bash\nexec %q ferryd "$@"\n' "$bundle/run" >"$out/bin/ferryd"
chmod +x "$out/bin/ferryd"
export FERRYD=$out/bin/ferryd
summary=$out/summary.txt
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }

{ nvidia-smi || true; "$py" -c 'import torch, sys; print(sys.version, torch.__version__, torch.cuda.is_available())'
  "$FERRYD" --version; } >"$out/nvidia-smi.txt" 2>&1
note "python $("$py" -c 'import sys; print(sys.version.split()[0])'), device $device, steps $steps, trainers ${trainers[*]}"

t=$SECONDS
timeout 60 "$py" tests/python/test_arrays.py >"$out/test_arrays.log" 2>&1
rc_arrays=$?
note "test_arrays: rc $rc_arrays ($((SECONDS - t)) s), numpy $("$py" -c 'import numpy; print(numpy.__version__)'): $(grep -E '^(PASS|FAIL)' "$out/test_arrays.log" | tr '\n' ';')"

t=$SECONDS
timeout "${LIMIT_TEST:-150}" "$py" tests/python/test_gpu.py >"$out/test_gpu.log" 2>&1
rc_test=$?
note "test_gpu: rc $rc_test ($((SECONDS - t)) s): $(grep -E '^(PASS|SKIP|FAIL)' "$out/test_gpu.log" | tr '\n' ';')"

bench() {  # bench SECONDS NAME FERRYD_ARGS [MORE ARGS...]
  local limit=$1 name=$2 fargs=$3 t=$SECONDS rc
  shift 3
  timeout "$limit" "$py" examples/python/gpu_train.py --device "$device" --trainers "${trainers[@]}" --steps "$steps" \
    --ferryd "$FERRYD" --ferryd-args "$fargs" --out "$out/$name" --json "$@" >"$out/$name.log" 2>&1
  rc=$?
  tail -n 1 "$out/$name.log" >"$out/$name.json"
  note "$name: rc $rc ($((SECONDS - t)) s), ferryd ${fargs:-(defaults)}"
  grep -E '^(ferry|torch-rpc|gpu) +x|^x[0-9]' "$out/$name.log" | tee -a "$summary"
  return $rc
}
bench "${LIMIT_BENCH:-240}" gpu_train "${FERRYD_ARGS:-}"
rc_bench=$?
if "$FERRYD" --help 2>&1 | grep -q -- '--engines'; then
  for e in ${ENGINES_ARMS:-1 auto}; do
    bench "${LIMIT_ENGINES:-120}" "gpu_train-engines-$e" "--engines $e" --systems ferry || true
  done
  t=$SECONDS
  export PATH="$(dirname "$py"):$PATH"  # the scaling script's helpers run python3
  old_arm=()
  [[ -n ${OLD_BUNDLE:-} ]] && old_arm=(--old "$(cd "$OLD_BUNDLE" && pwd)")
  timeout "${LIMIT_SCALING:-150}" bash tests/perf/engines-scaling.sh --bundle "$bundle" "${old_arm[@]}" \
    --workers "${SCALING_WORKERS:-1 2 4 8 16}" --engines "${SCALING_ENGINES:-1 auto}" --out "$out/scaling" >"$out/scaling.log" 2>&1
  note "engines-scaling: rc $? ($((SECONDS - t)) s)"
  sed -n '/^arm /,/^engines-scaling: points/p' "$out/scaling.log" | tee -a "$summary"
else
  note "engines: this ferryd has no --engines flag (skipped)"
fi
[[ $rc_arrays -eq 0 && $rc_test -eq 0 && $rc_bench -eq 0 ]]
