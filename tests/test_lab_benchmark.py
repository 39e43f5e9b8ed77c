"""The stored full-size benchmark of the lab and the rows that pair its runs."""
import pytest

from mlsysim.lab.experiment import pair_rows, recorded_benchmark


def test_the_stored_benchmark_pairs_every_size_and_interval():
    b = recorded_benchmark()
    assert b["schema"] == "mlsysim.lab.benchmark/1" and b["date"] and b["machine"]
    rows = pair_rows(b["runs"])
    assert len(rows) == len(b["runs"]) // 2 == 9
    assert {(r["MB"], r["every"]) for r in rows} == {(m, e) for m in (64, 256, 1000) for e in (1, 5, 20)}
    s, c = b["runs"][0], b["runs"][1]
    assert rows[0]["conc/sync"] == round(c["stall_s"] / s["stall_s"], 2)


def test_runs_out_of_order_are_refused():
    runs = recorded_benchmark()["runs"]
    with pytest.raises(ValueError, match="alternate"):
        pair_rows(runs[1:])
