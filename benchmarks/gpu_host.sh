#!/usr/bin/env bash
# The GPU proof on a host with no package index (README: GPU proof): install the carried wheels, then
# run the steps named as arguments, in order, each logged to $OUT/<step>.log (or ./gpu_out/).
#
#   benchmarks/gpu_host.sh tests tune bench          # all of it
#   WORKLOADS="gemm4096:150 conv:200" TUNE="--trials 800" benchmarks/gpu_host.sh tune
#
# Steps: smoke (16 tuning trials of gemm 1024 on a scratch log), cuda-tests (the gpu-marked tests), tests (the whole suite),
# tune (benchmarks/tune_cuda.py $TUNE for each of $WORKLOADS, NAME:SECONDS caps its time), bench
# (benchmarks/gemm_cuda.py $GEMM and conv2d_cuda.py $CONV, deploying from the logs).
# The tuning logs are packed into $OUT/logs.tar after each tuning step.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1 && ! PYTHONPATH=/tmp/site python3 -c "import islpy, optuna" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
export TILETUNE_CACHE_DIR=${TILETUNE_CACHE_DIR:-/tmp/tiletune_cache}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
status=0
for step in "$@"; do
    echo "== $step ($(date +%T))"
    case $step in
        smoke) python3 benchmarks/tune_cuda.py --workloads gemm1024 --trials 16 --batch 8 \
                   --log-dir /tmp/smoke_logs 2>&1 | tee "$OUT/smoke.log" || status=1
               grep -q "best none valid" "$OUT/smoke.log" && { echo "smoke failed"; exit 1; } ;;
        cuda-tests) python3 -m pytest -q -x -m gpu tests --durations=10 2>&1 | tee "$OUT/cuda-tests.log" || status=1 ;;
        tests) timeout "${TESTS_TIMEOUT:-1200}" python3 -m pytest -q -n 8 --durations=15 tests 2>&1 | tee "$OUT/tests.log" || status=1 ;;
        tune) for spec in ${WORKLOADS:-gemm4096 gemm2048 gemm1024 conv}; do     # NAME or NAME:SECONDS
                  w=${spec%%:*}; sec=${spec#"$w"}; sec=${sec#:}
                  python3 benchmarks/tune_cuda.py --workloads "$w" ${sec:+--max-seconds $sec} ${TUNE:-} 2>&1 | tee -a "$OUT/tune.log" || status=1
                  tar cf "$OUT/logs.tar" --exclude='*.study.db' tuning_logs/cuda-*
              done ;;
        bench) { python3 benchmarks/gemm_cuda.py ${GEMM:-}; python3 benchmarks/conv2d_cuda.py ${CONV:-}; } 2>&1 \
                   | tee "$OUT/bench.log" || status=1 ;;
        *) echo "unknown step $step"; exit 2 ;;
    esac
done
exit $status
