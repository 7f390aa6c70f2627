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


# ------------------------------------------------------------------ faults: wrong tables, hangs, tracebacks
import json  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from gtbook import cli  # noqa: E402
from gtbook.studies.atlas import sweep as atlas_sweep  # noqa: E402

ONE = ensemble_draws([2], 1, attentions=["dot"])
SMALL = ensemble_draws([2, 3], 2, attentions=["dot", "l2"])
ROOT = Path(__file__).resolve().parents[2]


def _cli(capsys, *args):
    code = cli.main(["atlas", *args])
    return code, capsys.readouterr().err.strip().splitlines()


def test_a_dimension_given_twice_is_refused_not_counted_twice(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"^ds lists d = 2 more than once"):
        atlas_sweep.atlas(tmp_path / "a", ds=[2, 2], draws=2)
    code, err = _cli(capsys, "--ds", "2", "2", "--draws", "2", "--out", str(tmp_path / "b"))
    assert code == 2 and len(err) == 1 and err[0].startswith("gtbook: error: ds lists d = 2 more than once")
    with pytest.raises(ValueError, match="twice"):  # the same draw twice in a sweep
        run_sweep(ONE + ONE, None, lanes=4, horizon=5.0, show_progress=False)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()  # refused before anything ran


@pytest.mark.parametrize(
    "args, message",
    [
        (["--workers", "0"], "workers must be an integer >= 1, got 0"),
        (["--workers", "-1", "--scheduler", "local"], "workers must be an integer >= 1, got -1"),
        (["--seed", "-1"], "seed must be an integer >= 0, got -1"),
        (["--draws", "0"], "draws must be an integer >= 1, got 0"),
    ],
)
def test_bad_atlas_arguments_are_one_line_before_any_work(tmp_path, capsys, monkeypatch, args, message):
    """(Before, ``--workers -1 --scheduler local`` never returned: the alarm turns that hang into a failure.)"""
    import signal

    def hang(*_):
        raise TimeoutError(f"gtbook atlas {' '.join(args)} still running after 60 s")

    monkeypatch.setattr(atlas_sweep, "run_chunk", lambda ch: pytest.fail("a chunk ran"))
    old = signal.signal(signal.SIGALRM, hang)
    signal.alarm(60)
    try:
        code, err = _cli(capsys, "--ds", "2", "--draws", "1", *args, "--out", str(tmp_path / "o"))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert code == 2 and err == [f"gtbook: error: {message}"]
    with pytest.raises(ValueError, match="workers must be"):
        run_sweep(ONE, None, workers=0, show_progress=False)


def _copy_packages(dest: Path) -> dict[str, Path]:
    roots = {}
    for name in ("gtcore", "gtbook"):
        roots[name] = dest / name
        shutil.copytree(ROOT / name, roots[name], ignore=shutil.ignore_patterns("__pycache__"))
    return roots


def test_a_sweep_after_the_classifier_changes_reuses_no_chunk(tmp_path, monkeypatch):
    """The chunk digest hashes the code a chunk runs (the import closure of the sweep, through the classifier
    to gtcore): an edit of outcomes.py, or of the moment ODE the lanes integrate, makes every chunk new."""
    from gtbook import imports

    first = run_sweep(SMALL, tmp_path / "out", lanes=2, horizon=5.0, show_progress=False)
    assert first.computed == 4 and first.reused == 0
    again = run_sweep(SMALL, tmp_path / "out", lanes=2, horizon=5.0, show_progress=False)
    assert again.reused == 4 and again.computed == 0
    for edited in ("gtbook/studies/atlas/outcomes.py", "gtcore/moments/lanes.py"):
        roots = _copy_packages(tmp_path / edited.replace("/", "_"))
        path = roots[edited.split("/")[0]].parent / edited
        path.write_text(path.read_text() + "\n# an edit\n")
        monkeypatch.setattr(imports, "package_dirs", lambda roots=roots: dict(roots))
        changed = run_sweep(SMALL, tmp_path / "out", lanes=2, horizon=5.0, show_progress=False)
        assert changed.reused == 0 and changed.computed == 4, edited
        monkeypatch.undo()


def _zero(path: Path, offset: int, n: int = 16) -> None:
    data = bytearray(path.read_bytes())
    data[offset : offset + n] = bytes(len(data[offset : offset + n]))
    path.write_bytes(bytes(data))


def test_a_damaged_chunk_is_recomputed_and_named(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = tmp_path / "out"
    whole = run_sweep(SMALL, out, lanes=2, horizon=5.0, show_progress=False)
    files = sorted(out.glob("chunk-*.parquet"))
    # a valid parquet file with one row less (before: read back silently, n = 1 instead of 2)
    table = pq.read_table(files[0])
    pq.write_table(pa.table(table.slice(1).to_pydict()), files[0])
    # another chunk's rows under this chunk's name
    shutil.copy(files[2], files[1])
    _zero(files[3], files[3].stat().st_size // 3)  # 16 zero bytes inside the data
    lines = []
    again = run_sweep(SMALL, out, lanes=2, horizon=5.0, show_progress=False, log=lines.append)
    assert again.computed == 3 and again.reused == 1
    assert [line.split()[1] for line in lines] == [str(f) for f in files[:2]] + [str(files[3])]
    assert all(line.endswith("recomputing it") for line in lines)
    assert tables_identical(whole.table, again.table)
    assert [
        read_chunk_ok(f, ch)
        for f, ch in zip(files, make_chunks(SMALL, 2, horizon=5.0, code=atlas_sweep.sweep_code()), strict=True)
    ] == [True] * 4


def read_chunk_ok(path, chunk):
    return isinstance(atlas_sweep.read_chunk(path, chunk), dict)


def test_zeroed_bytes_anywhere_in_a_chunk_never_give_other_rows(tmp_path):
    """16 zero bytes at every 16th offset of a chunk file: each read gives the chunk's own rows or a reason,
    never other rows and never an exception (before: 7 silent changes of the table out of 928 offsets)."""
    out = tmp_path / "out"
    two = ensemble_draws([2], 2, attentions=["dot"])
    run_sweep(two, out, lanes=2, horizon=5.0, show_progress=False)
    chunk = make_chunks(two, 2, horizon=5.0, code=atlas_sweep.sweep_code())[0]
    path = out / chunk.filename
    good = atlas_sweep.read_chunk(path, chunk)
    assert isinstance(good, dict)
    original = path.read_bytes()
    reasons = set()
    for offset in range(0, len(original), 16):
        path.write_bytes(original)
        _zero(path, offset)
        got = atlas_sweep.read_chunk(path, chunk)
        if isinstance(got, dict):
            assert json.dumps(got) == json.dumps(good), offset
        else:
            reasons.add(got.split(":")[0])
    assert reasons and reasons <= {
        "unreadable",
        "no checksum",
        "another chunk's draws",
        "rows do not match its draws",
        "checksum mismatch",
    }


def test_memory_is_estimated_before_anything_is_allocated(tmp_path, capsys, monkeypatch):
    import tracemalloc

    monkeypatch.setattr(atlas_sweep, "run_chunk", lambda ch: pytest.fail("a chunk ran"))
    code, err = _cli(capsys, "--ds", "100000", "--draws", "1", "--out", str(tmp_path / "o"))
    assert code == 2 and len(err) == 1
    assert err[0].startswith("gtbook: error: a chunk of 1 draw at d = 100000 needs about") and "GiB" in err[0]
    monkeypatch.undo()
    # the estimate bounds the measured peak of a real chunk, and not by orders of magnitude
    chunk = make_chunks(ensemble_draws([6], 16, attentions=["dot"]), 16, horizon=5.0)[0]
    tracemalloc.start()
    run_chunk(chunk)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak <= atlas_sweep.chunk_bytes(chunk) <= 10 * peak
    # a machine with little memory left refuses the chunks that do not fit it, before running any
    monkeypatch.setattr(atlas_sweep, "_available_bytes", lambda: atlas_sweep.chunk_bytes(chunk) - 1)
    monkeypatch.setattr(atlas_sweep, "run_chunk", lambda ch: pytest.fail("a chunk ran"))
    with pytest.raises(ValueError, match="d = 6 needs about"):
        run_sweep(chunk.draws, tmp_path / "m", lanes=16, horizon=5.0, show_progress=False)


def _silent_server():
    """A TCP server that accepts connections and never answers (the hang of a wrong --scheduler port)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held = []

    def accept():
        while True:
            try:
                held.append(srv.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    return srv, f"tcp://127.0.0.1:{srv.getsockname()[1]}"


def test_a_scheduler_that_never_answers_is_one_line_within_the_timeout(tmp_path):
    pytest.importorskip("distributed")
    srv, addr = _silent_server()
    try:
        start = time.monotonic()
        with pytest.raises(atlas_sweep.SchedulerError, match=rf"^the scheduler at {addr}: no answer within 2 s"):
            run_sweep(ONE, tmp_path / "o", scheduler=addr, timeout=2, show_progress=False)
        assert time.monotonic() - start < 15
        env = {**__import__("os").environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "gtbook",
                "atlas",
                "--scheduler",
                addr,
                "--timeout",
                "2",
                "--ds",
                "2",
                "--draws",
                "1",
                "--out",
                str(tmp_path / "c"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip() == f"gtbook: error: the scheduler at {addr}: no answer within 2 s"
    finally:
        srv.close()


@pytest.mark.slow
def test_a_scheduler_lost_mid_sweep_keeps_the_finished_chunks_and_says_how_to_resume(tmp_path, capfd):
    """A scheduler and a worker in their own processes; the scheduler is killed once two chunks are written."""
    pytest.importorskip("distributed")
    env = {**__import__("os").environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    file = tmp_path / "scheduler.json"
    sched = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dask",
            "scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--no-dashboard",
            "--scheduler-file",
            str(file),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    worker = None
    try:
        deadline = time.monotonic() + 60
        while not (file.exists() and file.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.1)
        addr = json.loads(file.read_text())["address"]
        worker = subprocess.Popen(
            [sys.executable, "-m", "dask", "worker", addr, "--nthreads", "1", "--nworkers", "1", "--no-dashboard"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        out = tmp_path / "out"

        def kill_after_two():
            while len(list(out.glob("chunk-*.parquet"))) < 2 and time.monotonic() < deadline + 120:
                time.sleep(0.05)
            sched.kill()

        threading.Thread(target=kill_after_two, daemon=True).start()
        with pytest.raises(atlas_sweep.SchedulerError) as info:
            run_sweep(SMALL, out, lanes=1, horizon=5.0, scheduler=addr, timeout=10, show_progress=False)
    finally:
        for proc in (sched, worker):
            if proc is not None:
                proc.kill()
                proc.wait()
    kept = len(list(out.glob("chunk-*.parquet")))
    message = str(info.value)
    assert message.startswith(f"lost the scheduler at {addr}") and "\n" not in message
    assert f"{kept} of 8 chunks were finished and are kept in {out}: run the same sweep again to resume" in message
    assert "Traceback" not in capfd.readouterr().err  # the client's own tracebacks are not printed
    resumed = run_sweep(SMALL, out, lanes=1, horizon=5.0, show_progress=False)
    assert resumed.reused == kept >= 2 and resumed.computed == 8 - kept
    assert tables_identical(resumed.table, run_sweep(SMALL, None, lanes=1, horizon=5.0, show_progress=False).table)
