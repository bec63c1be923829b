# GPU call 1 (session 40): the folded chunk scan and the prefill chain's PDL, checked and timed.
# OUT=$OUT bash docs/experiments/session40/call1.sh   (after the wheel install line)
set -x
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv
python3 -m pytest -m gpu -q -p no:cacheprovider test/test_wkv_kernels.py 2>&1 | tail -5 > $OUT/wkv_tests.log
python3 -m server.bench.wkv --check > $OUT/wkv_check.log 2>&1; tail -3 $OUT/wkv_check.log
python3 -m server.bench.wkv --only prefill --shapes 1x160,1x4096 --graph > $OUT/wkv_prefill.log 2>&1
for v in "0 0" "1 0" "0 1" "1 1" "1 1" "0 0"; do
  python3 docs/experiments/session40/pass_ab.py $v 2>&1 | grep -v "| INFO" >> $OUT/pass_ab.log
done
