#!/usr/bin/env bash
# The GPU's clocks and power while a command runs (NVIDIA, nvidia-smi):
#   bash server/bench/with_clocks.sh python3 -m server.bench decode --preset 2.9b --batch 1024
# Samples every 100 ms (or as fast as nvidia-smi answers) into $CLOCKS_CSV (default a temporary
# file), runs the command (its output as is, its exit status returned), then prints for the
# samples taken with the GPU busy (utilization >= $BUSY %, default 50): the SM clock (min,
# median, max), the power drawn (median, max) against its limit, and how many samples had each
# clock-event reason bit set (0x1 idle, 0x4 the software power cap, 0x20/0x40 thermal slowdown).
set -u
CSV=${CLOCKS_CSV:-$(mktemp /tmp/clocks.XXXXXX.csv)}
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.limit,clocks_event_reasons.active,utilization.gpu \
  --format=csv,noheader,nounits -lms 100 >"$CSV" &
SAMPLER=$!
trap 'kill $SAMPLER 2>/dev/null' EXIT
"$@"
rc=$?
kill $SAMPLER 2>/dev/null
wait $SAMPLER 2>/dev/null
python3 - "$CSV" "${BUSY:-50}" <<'PY'
import sys
path, busy = sys.argv[1], float(sys.argv[2])
rows = [[f.strip() for f in line.split(",")] for line in open(path) if line.count(",") >= 5]
sel = [r for r in rows if r[5].replace(".", "", 1).isdigit() and float(r[5]) >= busy]
if not sel:
    print(f"clocks: no sample with the GPU >= {busy:g} % busy ({len(rows)} samples)")
    raise SystemExit
sm = sorted(float(r[1]) for r in sel)
pw = sorted(float(r[2]) for r in sel)
bits = {}
for r in sel:
    v = int(r[4], 16)
    for b in range(16):
        if v >> b & 1:
            bits[hex(1 << b)] = bits.get(hex(1 << b), 0) + 1
print(f"clocks: {len(sel)} of {len(rows)} samples with the GPU >= {busy:g} % busy: SM MHz "
      f"{sm[0]:.0f} / {sm[len(sm) // 2]:.0f} / {sm[-1]:.0f} (min / median / max); power "
      f"{pw[len(pw) // 2]:.0f} / {pw[-1]:.0f} W (median / max) of a {sel[0][3]} W limit; "
      f"clock-event reasons (samples): {bits or 'none'}")
PY
exit $rc
