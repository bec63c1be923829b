#!/usr/bin/env bash
# Session 55, GPU call 3: test_prefix_cache_gpu.py on 68fa8c9 (the mutation review's new CUDA
# case, test_logits_live_on_their_entrys_tier, not run on CUDA before), then that case against
# three mutants of prefix_cache.py, each undone after (expected: each fails):
#   G2 a host entry gaining logits keeps them on the device (line 256)
#   G3 a promoted entry's logits stay on the host (line 326)
#   G4 an entry moved to the host keeps its logits on the device (line 358)
set -u
OUT=${OUT:-/tmp/out}
F=server/scheduler/prefix_cache.py
T="python3 -m pytest -o addopts= -m gpu -q -p no:cacheprovider test/test_prefix_cache_gpu.py"
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
$T > "$OUT/prefix_cache_gpu.log" 2>&1; echo "all: rc=$?"; tail -2 "$OUT/prefix_cache_gpu.log"
cp $F /tmp/pc.py
mutate() {  # NAME SED-EXPR
  cp /tmp/pc.py $F; sed -i "$2" $F
  if cmp -s /tmp/pc.py $F; then echo "$1: the edit did not apply"; return; fi
  $T -k entrys_tier > "$OUT/mutant_$1.log" 2>&1; echo "$1: rc=$? (1 = killed)"
  tail -1 "$OUT/mutant_$1.log"
}
mutate G2 '256s/entry.logits = logits if entry.hot else _host_copy(logits)/entry.logits = logits/'
mutate G3 '326s/entry.logits = entry.logits.to(self.device, non_blocking=True)/pass/'
mutate G4 '358s/else _host_copy(entry.logits)/else entry.logits/'
cp /tmp/pc.py $F
