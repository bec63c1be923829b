# Session 41, GPU call 1: the pulse cut (071c5c2) against its parent (1bef54c, in .whl/ab_old from
# `git archive 1bef54c server run.py few_shot.txt eof_v20230424.txt pyproject.toml`), new first.
set -x
S=docs/experiments/session41/long_prompt_gpu.py
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv
for tree in new old new old; do
  if [ $tree = new ]; then d=.; else d=.whl/ab_old; fi
  echo "## tree $tree"
  (cd $d && PYTHONPATH=/tmp/site:. python3 $OLDPWD/$S --preset 2.9b --ndec 64,255 --lengths 16384,65536 --rounds 1 2>&1 | grep -v "DEBUG\|INFO")
done
