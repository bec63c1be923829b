#!/usr/bin/env bash
# Issue 7 over HTTP with uvicorn's event loop as served (asyncio: uvloop is not installed, so
# uvicorn's loop="auto" takes asyncio) against uvloop (loop="auto" takes it when importable),
# alternating, each a fresh `server.bench.chat --demo 2.9b --repeat 3 --client raw` (two new
# servers). GPU machine, with the uvloop wheel in .whl_uvloop/ (git-ignored; fetched with
# `pip download --only-binary=:all: --no-deps --python-version 3.12 --implementation cp
# --platform manylinux2014_x86_64 -d .whl_uvloop uvloop==0.22.1`):
#   OUT=$OUT bash docs/experiments/session35/uvloop_chat.sh [ROUNDS]
set -u
OUT=${OUT:-/tmp/uvloop-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/uvl .whl_uvloop/*.whl || exit 1
PYTHONPATH=/tmp/uvl:${PYTHONPATH:-} python3 -c "import uvloop; print('uvloop', uvloop.__version__)"
for round in $(seq 1 "${1:-2}"); do
  for loop in asyncio uvloop; do
    extra=""
    [ "$loop" = uvloop ] && extra=/tmp/uvl:
    log="$OUT/chat_${loop}_${round}.log"
    PYTHONPATH=$extra${PYTHONPATH:-} timeout 240 python3 -m server.bench.chat --demo 2.9b \
      --repeat 3 --client raw >"$log" 2>&1
    echo "== $loop round $round (rc $?)"
    grep -E "^turns 2\+|^last turn" "$log"
  done
done
