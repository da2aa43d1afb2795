#!/bin/bash
# A 20-minute tune of one zoo model on this host (2 cores, pinned, 2 kernel threads, 2 build processes),
# then gap.py on the deployed log, the best records and the plot.  OUT: where the logs go (default /tmp/est/z).
# Usage: tune20.sh [NAME FILE SHAPE [tune-model options]]  (default: mtcnn-onet onet.onnx input_3=1,48,48,3;
# the mtcnn-pnet runs: tune20.sh mtcnn-pnet pnet.onnx input_1=1,64,64,3 [--remeasure], each with its own OUT)
cd "$(dirname "$0")/../../../.."
export TILETUNE_NUM_THREADS=2 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
PY=${PY:-/work/main/.venv/bin/python}
O=${OUT:-/tmp/est/z}; mkdir -p $O
N=${1:-mtcnn-onet}; M=~/.cache/tiletune-zoo/$N/${2:-onet.onnx}; S=${3:-input_3=1,48,48,3}
echo "start $(date -u +%T) $(uptime)"
timeout 1800 taskset -c 0,1 $PY -m autotune.cli tune-model $M --shape $S --trials 1000000 \
  --time-budget 20m --log $O/$N.jsonl --n-parallel 2 "${@:4}" 2>&1 | tr '\r' '\n' | grep -v "trial/s\|s/trial" > $O/tune_$N.txt
echo "tuned $(date -u +%T) $(uptime)"
taskset -c 0,1 $PY tuning_logs/llvm-znver4/zoo/scripts/gap.py $M $O/$N.jsonl $S > $O/gap_$N.txt 2>&1
$PY -m autotune.cli logs best $O/$N.jsonl -o $O/best/$N.jsonl
$PY -m autotune.cli logs plot $O/$N.jsonl -o $O/$N.png --title "$N, Zen 4 2 cores, 20 min"
echo "done $(date -u +%T) $(uptime)"
