"""The atlas sweep: a 2-worker LocalCluster gives the in-process table bit for bit; chunks resume from parquet."""

import numpy as np
import pytest

from gtbook.studies.atlas.ensembles import ensemble_draws, peer_draws
from gtbook.studies.atlas.sweep import make_chunks, run_chunk, run_sweep, tables_identical

DRAWS = ensemble_draws([2, 3], 5, attentions=["dot", "l2"]) + peer_draws([3], 3)[:3]


def _same(a, b):
    assert a.table.column_names == b.table.column_names
    for name in a.table.column_names:
        x, y = a.table.column(name).to_pylist(), b.table.column(name).to_pylist()
        np.testing.assert_array_equal(np.array(x), np.array(y), err_msg=name)  # NaN == NaN here, bits otherwise


def test_local_cluster_equals_in_process_bit_for_bit(tmp_path):
    distributed = pytest.importorskip("distributed")
    here = run_sweep(DRAWS, tmp_path / "here", lanes=4, horizon=20.0, show_progress=False)
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        there = run_sweep(DRAWS, tmp_path / "there", lanes=4, horizon=20.0, client=client, show_progress=False)
        assert len(client.scheduler_info()["workers"]) == 2
    finally:
        client.close()
        cluster.close()
    assert here.where == "in-process" and there.where.startswith("tcp://")
    assert here.table.num_rows == len(DRAWS) and here.column("key").tolist() == [d.key for d in DRAWS]
    _same(here, there)  # floats compared exactly
    assert tables_identical(here.table, there.table)


def test_an_interrupted_sweep_resumes(tmp_path):
    chunks = make_chunks(DRAWS, 4, horizon=20.0)
    whole = run_sweep(DRAWS, tmp_path / "a", lanes=4, horizon=20.0, show_progress=False)
    assert whole.computed == len(chunks) and whole.reused == 0
    files = sorted((tmp_path / "a").glob("chunk-*.parquet"))
    assert len(files) == len(chunks)
    for f in files[1::2]:  # as if the sweep had stopped before these chunks
        f.unlink()
    again = run_sweep(DRAWS, tmp_path / "a", lanes=4, horizon=20.0, show_progress=False)
    assert again.reused == len(chunks) - len(files[1::2]) and again.computed == len(files[1::2])
    _same(whole, again)
    assert tables_identical(whole.table, again.table)
    assert not tables_identical(whole.table, whole.table.slice(1))
    # a changed sweep (another horizon) does not reuse the files: their digests differ
    other = run_sweep(DRAWS, tmp_path / "a", lanes=4, horizon=30.0, show_progress=False)
    assert other.reused == 0


def test_chunks_group_one_dimension_and_type():
    chunks = make_chunks(DRAWS, 3)
    for ch in chunks:
        assert len({(d.ensemble, d.attention, d.d) for d in ch.draws}) == 1 and len(ch.draws) <= 3
    assert sum(len(ch.draws) for ch in chunks) == len(DRAWS)
    cols = run_chunk(chunks[0])
    assert len(cols["outcome"]) == len(chunks[0].draws)
    with pytest.raises(ValueError, match="lanes must be a positive integer"):
        make_chunks(DRAWS, 0)
