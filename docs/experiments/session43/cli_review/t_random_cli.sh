#!/bin/bash
# server.model.random CLI: --force, directory, unwritable, relative OUT, leftovers, verify on result
cd /tmp/qa43/review2/repo
W=/tmp/qa43/review2/rnd; rm -rf $W; mkdir -p $W
R="uv run python -m server.model.random"
echo "== new file"; $R $W/a.pth --preset tiny; echo rc=$?
echo "== exists"; $R $W/a.pth --preset tiny; echo rc=$?
echo "== --force"; $R $W/a.pth --preset tiny --force; echo rc=$?
echo "== verify"; uv run python -m server.model.verify $W/a.pth; echo rc=$?
echo "== dir"; $R $W --preset tiny; echo rc=$?
echo "== relative"; (cd $W && uv run --project /tmp/qa43/review2/repo python -m server.model.random rel.pth --preset tiny; echo rc=$?; ls -la $W)
echo "== parent is a file"; $R $W/a.pth/x.pth --preset tiny; echo rc=$?
echo "== unwritable dir (as nobody-equivalent via chmod; root?)"; id -u; mkdir -p $W/ro; chmod 555 $W/ro; $R $W/ro/x.pth --preset tiny; echo rc=$?
echo "== /proc path"; $R /proc/x.pth --preset tiny; echo rc=$?
echo "== nonexistent deep parent"; $R $W/deep/er/x.pth --preset tiny; echo rc=$?
echo "== dangling symlink OUT"; ln -s $W/nowhere.pth $W/link.pth; $R $W/link.pth --preset tiny; echo rc=$?; ls -la $W/link.pth $W/nowhere.pth 2>&1
echo "== symlink to existing with --force"; ln -s $W/a.pth $W/link2.pth; $R $W/link2.pth --preset tiny --force --seed 3; echo rc=$?; ls -la $W/link2.pth $W/a.pth
echo "== mode kept on --force?"; chmod 600 $W/a.pth; $R $W/a.pth --preset tiny --force; stat -c '%a %n' $W/a.pth
echo "== archive root name"; uv run python -c "import zipfile;print(zipfile.ZipFile('$W/a.pth').namelist()[:3])"
echo "== leftovers"; ls -la $W
