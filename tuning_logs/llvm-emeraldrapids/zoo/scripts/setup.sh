# run from the repo root on the device: unpack zoo, regenerate int8-bert, restore logs
set -e
mkdir -p /tmp/site && xz -dc diag/cputune-c/site312.tar.xz | tar xf - -C /tmp/site
export PYTHONPATH=/tmp/site:$PWD
mkdir -p diag/cputune/logs diag/cputune/zoo/int8-bert
cp diag/cputune-c/tune.sh diag/cputune/
xz -dc diag/cputune-c/zoo.tar.xz | tar xf - -C diag/cputune
python3 diag/cputune-c/shuf.py -d diag/cputune/zoo/*/*.onnx
python3 -c "
import sys; sys.path.insert(0,'benchmarks'); from quantized_cpu import bert_dynamic; import onnx
m,_=bert_dynamic(); onnx.save(m,'diag/cputune/zoo/int8-bert/bert_int8.onnx')" 2>/dev/null
md5sum diag/cputune/zoo/int8-bert/bert_int8.onnx
if [ -f diag/cputune-c/logs.tar.xz ]; then xz -dc diag/cputune-c/logs.tar.xz | tar xf - -C diag/cputune; fi
ls diag/cputune/zoo/* diag/cputune/logs | head -40
