#!/usr/bin/env bash
# Session 58, GPU call 2 (any card): issue 7's chat bench over HTTP (2.9B, two servers, raw
# client) with longer replies, so that the 10-turn chat reaches ~2,000 tokens with shorter user
# messages (server/bench/conversation.py: per_turn = (2000 - 150) / 10 - reply - 8 tokens):
# --max-tokens 64 and 128 (user messages of ~113 and ~49 tokens), then 32 again (the
# recorded configuration, ~145-token messages) on the same machine; on an H200 also decode at
# batch 1 / 256 / 1,024 (fp16 state). Last, the cached turn's time line (`http_stages --demo 2.9b
# --timeline`) at 2ca3edd (.whl/ab_old) and at HEAD on the same machine: the first pulse's host
# time before its first parameter write, before and after session 57's change, served.
# (REPLIES="64 128" TIMELINES=0: the sweep's two new lengths alone.)
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a "$OUT/gpu.txt"
for n in ${REPLIES:-64 128 32}; do
  timeout 120 python3 -m server.bench.chat --demo 2.9b --repeat 2 --client raw --max-tokens $n \
    > "$OUT/chat_reply$n.log" 2>&1
  echo "reply $n rc=$?: $(grep -E 'turns 2\+ of all|last turn' "$OUT/chat_reply$n.log" | tr '\n' ' ')"
done
if grep -q H200 "$OUT/gpu.txt"; then  # on the issues' card: issue 5's decode too
  timeout 90 python3 -m server.bench decode --preset 2.9b --batch 1,256,1024 --state-dtype fp16 \
    --pulses 3 > "$OUT/decode.log" 2>&1
  echo "decode rc=$?"; grep -E "^\|" "$OUT/decode.log"
fi
for side in $([ "${TIMELINES:-1}" = 1 ] && echo old new); do
  dir=$PWD; [ $side = old ] && dir=$PWD/.whl/ab_old
  (cd "$dir" && PYTHONPATH=/tmp/site:. timeout 120 python3 -m server.bench.http_stages --demo 2.9b \
    --timeline) > "$OUT/timeline_$side.log" 2>&1
  echo "timeline $side rc=$?"
  grep -A 36 "request 19 on" "$OUT/timeline_$side.log" | grep -E "engine.pulse|write_params|graphed|first token"
  grep -A 30 "request 20 on" "$OUT/timeline_$side.log" | grep -E "engine.pulse|write_params|first token"
done
