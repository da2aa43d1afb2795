#!/bin/bash
# The short runs (issue 26 estimate): fresh logs of mtcnn-onet 3m, mtcnn-pnet 3m and ppocr-cls 8m (--per-round 4,
# so that its 62 tasks are all measured in time), each followed by gap.py.  The "before" runs used the same
# tune-model command at 05d32c9 (git archive): onet into onet.jsonl, pnet into pnet_old.jsonl.
cd "$(dirname "$0")/../../../.."
export TILETUNE_NUM_THREADS=2 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
PY=${PY:-/work/main/.venv/bin/python}
Z=~/.cache/tiletune-zoo
S=${SUFFIX:-new}   # the logs: NAME_$S.jsonl
run() { # name model shape budget extra...
  n=$1 m=$2 sh=$3 b=$4; shift 4
  echo "== $n start $(date -u +%T) $(uptime)"
  timeout 1500 taskset -c 0,1 $PY -m autotune.cli tune-model $m --shape $sh --trials 1000000 --time-budget $b \
     --log ${OUT:-/tmp/est}/${n}_${S}.jsonl --n-parallel 2 "$@" 2>&1 | tr '\r' '\n' | grep -v "trial/s\|s/trial" > ${OUT:-/tmp/est}/tune_${n}_${S}.txt
  echo "== $n gap $(date -u +%T) $(uptime)"
  timeout 600 taskset -c 0,1 $PY tuning_logs/llvm-znver4/zoo/scripts/gap.py $m ${OUT:-/tmp/est}/${n}_${S}.jsonl $sh > ${OUT:-/tmp/est}/gap_${n}_${S}.txt 2>&1
}
run onet $Z/mtcnn-onet/onet.onnx input_3=1,48,48,3 3m
run pnet $Z/mtcnn-pnet/pnet.onnx input_1=1,64,64,3 3m
run cls $Z/ppocr-cls/ch_ppocr_mobile_v2.0_cls_infer.onnx x=1,3,48,192 8m --per-round 4
echo "== done $(date -u +%T)"
