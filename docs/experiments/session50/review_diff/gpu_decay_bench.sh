#!/usr/bin/env bash
# Review: decode with every row's penalty_decay 0.996 (DummyTask's default is 1.0: the call-6
# bench never ran the decay pass), new (HEAD) / old (decay_in_update.diff reversed) / new.
set -u
OUT=${OUT:-/tmp/out}
sed -i 's/    penalty_decay: float = 1.0/    penalty_decay: float = 0.996/' server/bench/common.py
grep -n "penalty_decay" server/bench/common.py
D="docs/experiments/session50/decay_in_update.diff"
for v in new old new; do
  if [ $v = old ]; then patch -R -p1 < $D > /dev/null || exit 1; fi
  timeout 120 python3 -m server.bench decode --preset 2.9b --batch 1,256,1024 --state-dtype fp16 \
    --pulses 5 > "$OUT/decode_$v.log" 2>&1
  echo "== $v rc=$?"; grep -E "^\| [0-9]" "$OUT/decode_$v.log" | head -4
  cat "$OUT/decode_$v.log" >> "$OUT/decode_all.log"
  if [ $v = old ]; then patch -p1 < $D > /dev/null || exit 1; fi
done
