#!/bin/bash
# state_templates export: relative db, :memory:, file: URI, demo+model, existing OUT/dir, --force
R=/tmp/qa43/review2/repo; PY="$R/.venv/bin/python"; export PYTHONPATH=$R
W=/tmp/qa43/review2/st; rm -rf $W; mkdir -p $W; cd $W
$PY -m server.model.random tiny.pth --preset tiny >/dev/null
$PY -c "
import sys; sys.path.insert(0, '$R/test')
from test_state_files import tuning_file
from server.model.random import preset_config
open('tune.pth','wb').write(tuning_file(preset_config('tiny')))"
S="$PY -m server.task.state_templates"
run() { echo "== $1"; shift; "$@" 2>&1 | grep -v "^\s*$" | tail -3; echo "rc=${PIPESTATUS[0]}"; }
export RWKV_MODEL_PATH=tiny.pth
run "import into relative db" env RWKV_TASK_DB_PATH=rel.db $S import tune.pth --name t
run "export from relative db" env RWKV_TASK_DB_PATH=rel.db $S export _t out.st
run "export again (exists)" env RWKV_TASK_DB_PATH=rel.db $S export _t out.st
run "export --force" env RWKV_TASK_DB_PATH=rel.db $S export _t out.st --force
run "export to a dir, --force" env RWKV_TASK_DB_PATH=rel.db $S export _t $W --force
run "export :memory:" env RWKV_TASK_DB_PATH=:memory: $S export _t o2.st
run "export file:rel.db" env RWKV_TASK_DB_PATH=file:rel.db $S export _t o3.st
run "export ./rel.db" env RWKV_TASK_DB_PATH=./rel.db $S export _t o4.st
run "export missing db and existing OUT (which is named first?)" env RWKV_TASK_DB_PATH=nope.db $S export _t out.st
run "export demo only" env -u RWKV_MODEL_PATH RWKV_DEMO=tiny RWKV_TASK_DB_PATH=rel.db $S export _t o5.st
run "export demo + model path" env RWKV_DEMO=tiny RWKV_TASK_DB_PATH=rel.db $S export _t o6.st
run "export demo unknown preset" env -u RWKV_MODEL_PATH RWKV_DEMO=huge RWKV_TASK_DB_PATH=rel.db $S export _t o7.st
run "import into a missing db (made?)" env RWKV_TASK_DB_PATH=new.db $S import tune.pth --name u
cmp out.st o4.st && echo "o4 same"; cmp out.st o5.st && echo "o5 same"; ls
