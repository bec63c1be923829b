#!/usr/bin/env bash
# Probes run.py's start-up with bad CLI arguments / RWKV_* values (item 7) and a bad task
# database (item 6): each case should exit 2 with a one-line message naming the setting.
# Run from the repository root: bash docs/experiments/session66/qa/cli_probe.sh
# Scratch files go under /tmp/qa66/. Each case is given 60 s; prints exit status and the last lines.
set -u
S=/tmp/qa66; mkdir -p $S
run() {  # name, then env assignments / args
  local name=$1; shift
  echo "=== $name"
  ( env RWKV_TASK_DB_PATH=${DB:-$S/cli_$name.db} "$@" ) >$S/cli_$name.log 2>&1 </dev/null
  echo "rc=$?  lines=$(wc -l <$S/cli_$name.log)"
  grep -v '^\s*$' $S/cli_$name.log | tail -n 4 | cut -c1-300
}
P="timeout 60 uv run python run.py --port 8899"
run bs0        RWKV_MAX_BATCH_SIZE=0 $P --demo tiny
run bs3        RWKV_MAX_BATCH_SIZE=3 timeout 25 uv run python run.py --port 8898 --demo tiny
run bsneg      RWKV_MAX_BATCH_SIZE=-4 $P --demo tiny
run bsstr      RWKV_MAX_BATCH_SIZE=abc $P --demo tiny
run buf_neg    RWKV_BUFFER_SIZE=-1 $P --demo tiny
run buf0       RWKV_BUFFER_SIZE=0 $P --demo tiny
run two_bad    RWKV_BUFFER_SIZE=-1 RWKV_MAX_QUEUE=-5 $P --demo tiny
run nomodel    $P --model /tmp/qa66/nonexistent.pth
run dirmodel   $P --model /tmp/qa66/dir.pth
run txtmodel   $P --model /work/main/README.md
run badpreset  $P --demo huge
run badport    timeout 60 uv run python run.py --port 99999 --demo tiny
run portstr    timeout 60 uv run python run.py --port abc --demo tiny
run demo_and_model RWKV_DEMO=tiny RWKV_MODEL_PATH=/tmp/x.pth timeout 60 uv run python run.py --port 8899
run baddevice  RWKV_DEVICE=tpu $P --demo tiny
run cuda_nogpu RWKV_DEVICE=cuda $P --demo tiny
run baddtype   RWKV_DTYPE=fp8 $P --demo tiny
run prefill_chunk_small RWKV_PREFILL_CHUNK=5 $P --demo tiny
run verbose_bad RWKV_VERBOSE=maybe $P --demo tiny
run temp_neg   RWKV_DEFAULT_TEMPERATURE=-1 $P --demo tiny
run topp_big   RWKV_DEFAULT_TOP_P=5 $P --demo tiny
run vocab_missing RWKV_VOCAB_PATH=/tmp/qa66/novocab.txt $P --demo tiny
run cache_neg  RWKV_STATE_CACHE_MB=-1 $P --demo tiny
run maxtok0    RWKV_MAX_TOKENS_CAP=0 $P --demo tiny
# task database
DB=/tmp/qa66/missing_dir/sub/x.db run db_missing_dir $P --demo tiny
mkdir -p $S/rodir; rm -f $S/rodir/*; chmod 555 $S/rodir
DB=$S/rodir/x.db run db_ro_dir $P --demo tiny
printf 'this is not a sqlite database at all, just garbage bytes %.0s' {1..200} > $S/corrupt.db
DB=$S/corrupt.db run db_garbage $P --demo tiny
DB=$S/dir.pth run db_is_dir $P --demo tiny
