"""``python -m server.bench.load``: its table, with the finite-weight check on and off."""

from server.bench.load import main


def test_load_bench_prints_a_row_per_dtype_and_check(capsys):
    main(["--preset", "tiny", "--dtype", "fp32", "--check", "1,0", "--repeat", "1"])
    rows = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| fp32 |")]
    assert [r.split("|")[2].strip() for r in rows] == ["on", "off"]
    assert all(float(r.split("|")[3]) > 0 and float(r.split("|")[4]) > 0 for r in rows)
