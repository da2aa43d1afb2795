#!/bin/bash
# The 20-minute tune of mtcnn-onet on this host (2 cores, pinned, 2 kernel threads, 2 build processes),
# then gap.py on the deployed log, the best records and the plot.  OUT: where the logs go (default /tmp/est/z).
cd "$(dirname "$0")/../../../.."
export TILETUNE_NUM_THREADS=2 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
PY=${PY:-/work/main/.venv/bin/python}
O=${OUT:-/tmp/est/z}; mkdir -p $O
M=~/.cache/tiletune-zoo/mtcnn-onet/onet.onnx
echo "start $(date -u +%T) $(uptime)"
timeout 1800 taskset -c 0,1 $PY -m autotune.cli tune-model $M --shape input_3=1,48,48,3 --trials 1000000 \
  --time-budget 20m --log $O/mtcnn-onet.jsonl --n-parallel 2 2>&1 | tr '\r' '\n' | grep -v "trial/s\|s/trial" > $O/tune_mtcnn-onet.txt
echo "tuned $(date -u +%T) $(uptime)"
taskset -c 0,1 $PY tuning_logs/llvm-znver4/zoo/scripts/gap.py $M $O/mtcnn-onet.jsonl input_3=1,48,48,3 > $O/gap_mtcnn-onet.txt 2>&1
$PY -m autotune.cli logs best $O/mtcnn-onet.jsonl -o $O/best/mtcnn-onet.jsonl
$PY -m autotune.cli logs plot $O/mtcnn-onet.jsonl -o $O/mtcnn-onet.png --title "mtcnn-onet, Zen 4 2 cores, 20 min"
echo "done $(date -u +%T) $(uptime)"
