"""Training the paper's architectures here (gtbook.studies.pretrained.training): data, masking, the unigram
baseline, the schedule, and the cache (a second call loads the same weights without training)."""

from __future__ import annotations

import collections
import math

import numpy as np
import pytest

from gtbook.studies.pretrained import training as tr
from gtbook.studies.pretrained import training_data as data
from gtbook.studies.pretrained.side_by_side import train_side_by_side


def test_digits_split_is_stratified_disjoint_and_standardised():
    from sklearn.datasets import load_digits

    xtr, ytr, xte, yte = data.digits_split(0)
    assert xtr.shape[1:] == (1, 8, 8) and len(ytr) + len(yte) == 1797
    counts = np.bincount(load_digits().target)
    np.testing.assert_array_equal(np.bincount(yte), np.round(0.2 * counts).astype(int))
    assert abs(xtr.mean()) < 1e-5 and abs(xtr.std() - 1) < 1e-5
    rows = {r.tobytes() for r in xtr.reshape(len(xtr), -1)}
    # duplicated images exist in the digits; the split is disjoint in indices, so at most a few coincide
    assert sum(r.tobytes() in rows for r in xte.reshape(len(xte), -1)) < 5


def test_corpus_vocabulary_and_held_out_topics():
    train, held, vocab = data.pydoc_corpus()
    assert vocab[: len(data.SPECIALS)] == list(data.SPECIALS)
    assert set(train) == set(vocab[len(data.SPECIALS) :])
    assert 0.09 < len(held) / (len(train) + len(held)) < 0.13
    from pydoc_data.topics import topics

    assert sum(map(len, topics.values())) <= len(train) + len(held) < sum(map(len, topics.values())) + 4 * len(topics)


def test_mask_tokens_rates():
    import torch

    V = 60
    ids = torch.randint(len(data.SPECIALS), V, (400, 250), generator=torch.Generator().manual_seed(0))
    ids[:, 0] = data.SPECIALS.index("[CLS]")
    inputs, labels = data.mask_tokens(ids, V, torch.Generator().manual_seed(1))
    chosen = labels != -100
    assert not chosen[:, 0].any()  # specials are never chosen
    assert chosen[:, 1:].float().mean().item() == pytest.approx(0.15, abs=0.005)
    mask = inputs[chosen] == data.SPECIALS.index("[MASK]")
    kept = inputs[chosen] == ids[chosen]
    assert mask.float().mean().item() == pytest.approx(0.8, abs=0.01)
    # 10% kept, plus the random replacements that happen to draw the same character (1/55 of 10%)
    assert kept.float().mean().item() == pytest.approx(0.1 + 0.1 / (V - len(data.SPECIALS)), abs=0.01)
    assert torch.equal(labels[chosen], ids[chosen])


def test_unigram_cross_entropy_by_counting():
    train = np.array([5, 5, 6, 7, 7, 7])
    targets = np.array([5, 7, 8])
    V = 9
    c = collections.Counter(train.tolist())
    p = {k: (c.get(k, 0) + 1) / (len(train) + V - len(data.SPECIALS)) for k in range(len(data.SPECIALS), V)}
    want = -np.mean([math.log(p[t]) for t in targets])
    assert data.unigram_cross_entropy(train, targets, V) == pytest.approx(want, rel=1e-12)


def test_schedule_learning_rate_and_validation():
    s = tr.Schedule(steps=110, batch_size=4, learning_rate=1e-3, warmup=10)
    assert s.lr_factor(0) == pytest.approx(0.1) and s.lr_factor(9) == pytest.approx(1.0)
    assert s.lr_factor(10) == pytest.approx(1.0) and s.lr_factor(60) == pytest.approx(0.5)
    assert s.lr_factor(110) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="warmup"):
        tr.Schedule(steps=5, batch_size=4, learning_rate=1e-3, warmup=5)
    with pytest.raises(ValueError, match="batch_size"):
        tr.Schedule(steps=5, batch_size=0, learning_rate=1e-3, warmup=1)


@pytest.mark.slow
def test_training_is_cached_and_deterministic(tmp_path, monkeypatch):
    import torch

    monkeypatch.setenv("GTBOOK_CACHE", str(tmp_path))
    monkeypatch.delenv("GTBOOK_NO_CACHE", raising=False)
    s = tr.Schedule(steps=3, batch_size=16, learning_rate=1e-3, warmup=1, eval_every=3)
    first = tr.train_vit_digits(s)
    assert not first.record.loaded_from_cache and "trained here" in first.model.name
    assert len(list(tmp_path.rglob("model.safetensors"))) == 1
    again = tr.train_vit_digits(s)
    assert again.record.loaded_from_cache and again.record.key == first.record.key
    for (n, a), (_, b) in zip(
        first.model.model.state_dict().items(), again.model.model.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), n
    # the initial weights are those training started from: they differ from the trained ones
    w0 = dict(again.initial.model.named_parameters())["embeddings.patch_embeddings.projection.weight"]
    w1 = dict(again.model.model.named_parameters())["embeddings.patch_embeddings.projection.weight"]
    assert not torch.equal(w0, w1)
    # and they are the library's initialisation under torch.manual_seed(schedule.seed)
    from transformers import ViTForImageClassification

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(s.seed)
        fresh = ViTForImageClassification(data.vit_digits_config())
    assert torch.equal(fresh.vit.embeddings.patch_embeddings.projection.weight, w0)
    # retrained from scratch in a fresh cache: bitwise the same weights (seeded, fixed thread count)
    monkeypatch.setenv("GTBOOK_CACHE", str(tmp_path / "other"))
    third = tr.train_vit_digits(s)
    assert not third.record.loaded_from_cache and third.record.held_out == first.record.held_out
    for (n, a), (_, b) in zip(
        first.model.model.state_dict().items(), third.model.model.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), n
    # another schedule is another key
    other = tr.Schedule(steps=3, batch_size=16, learning_rate=2e-3, warmup=1, eval_every=3)
    assert tr.training_key("vit-digits", data.vit_digits_config(), other, b"") != tr.training_key(
        "vit-digits", data.vit_digits_config(), s, b""
    )


@pytest.mark.slow
def test_side_by_side_training_gives_the_weights_of_training_in_turn(monkeypatch):
    """The ModernBERT trained in a child process beside the ViT: bitwise the weights, training curve and
    held-out metric of the same schedule trained in this process (cache off, so both really train)."""
    import torch

    monkeypatch.setenv("GTBOOK_NO_CACHE", "1")
    sv = tr.Schedule(steps=3, batch_size=16, learning_rate=1e-3, warmup=1, eval_every=3, seed=4)
    sm = tr.Schedule(steps=3, batch_size=4, learning_rate=2e-3, warmup=1, eval_every=3, seed=4)
    vit, mlm = train_side_by_side(sv, sm)
    assert "trained here" in vit.model.name  # the ViT trains in this process, as train_vit_digits does
    want = tr.train_modernbert_mlm(sm)
    np.testing.assert_array_equal(mlm.record.held_out, want.record.held_out)  # (a NaN where no loss yet)
    np.testing.assert_array_equal(mlm.record.train_loss, want.record.train_loss)
    for which in ("model", "initial"):
        a, b = getattr(mlm, which).model.state_dict(), getattr(want, which).model.state_dict()
        assert a.keys() == b.keys()
        for n in a:
            assert torch.equal(a[n], b[n]), (which, n)
    assert mlm.model.name == want.model.name


@pytest.mark.slow
def test_side_by_side_training_stops_its_child_when_the_other_training_fails(monkeypatch, no_child_left):
    """A failure (or Ctrl-C) in this process's training must not wait for the child's: the ModernBERT's
    schedule here would train for many minutes, the call must raise within a minute and leave no child."""
    import multiprocessing
    import time

    monkeypatch.setenv("GTBOOK_NO_CACHE", "1")

    def broken(schedule, progress=False):
        time.sleep(3)  # the child is starting or training by now
        raise RuntimeError("the ViT's training failed")

    monkeypatch.setattr(tr, "train_vit_digits", broken)
    long = tr.Schedule(steps=100_000, batch_size=16, learning_rate=2e-3, warmup=1, eval_every=100_000, seed=1)
    t0 = time.perf_counter()
    with pytest.raises(RuntimeError, match="ViT's training failed"):
        train_side_by_side(tr.vit_schedule(2, 1), long)
    assert time.perf_counter() - t0 < 60
    assert multiprocessing.active_children() == []


LONG = tr.Schedule(steps=100_000, batch_size=16, learning_rate=2e-3, warmup=1, eval_every=100_000, seed=1)


@pytest.fixture
def no_child_left():
    """Kills any child a failed test leaves (a long training would run on for the rest of the suite)."""
    import multiprocessing

    yield
    for child in multiprocessing.active_children():
        child.kill()
        child.join()


def _in_thread(fn, seconds):
    """``fn()`` run in a daemon thread: ("returned" | "raised", value), or None when it still runs after
    ``seconds`` (a hang fails the test instead of stopping the suite)."""
    import threading

    out = []

    def target():
        try:
            out.append(("returned", fn()))
        except BaseException as exc:  # noqa: BLE001
            out.append(("raised", exc))

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    return out[0] if out else None


@pytest.mark.slow
def test_side_by_side_training_raises_when_its_child_dies(monkeypatch, no_child_left):
    """A child killed mid-training (``kill -9``, the out-of-memory killer) makes the call raise once the
    ViT's training is done, where a process pool would wait for its lost task for ever."""
    import multiprocessing
    import os
    import signal
    import time

    monkeypatch.setenv("GTBOOK_NO_CACHE", "1")

    def vit_then_kill_the_child(schedule, progress=False):
        (child,) = multiprocessing.active_children()
        time.sleep(2)
        os.kill(child.pid, signal.SIGKILL)
        return "the ViT"

    monkeypatch.setattr(tr, "train_vit_digits", vit_then_kill_the_child)
    got = _in_thread(lambda: train_side_by_side(tr.vit_schedule(2, 1), LONG), 120)
    assert got is not None, "the call still waits 120 s after its child was killed"
    how, value = got
    assert how == "raised" and isinstance(value, RuntimeError), got
    assert "died (exit code -9)" in str(value)
    assert multiprocessing.active_children() == []


@pytest.mark.slow
def test_side_by_side_training_raises_the_childs_exception(tmp_path):
    """A training that fails in the child is raised here, with the child's traceback as its cause.

    The spawned child runs the script's top level again, so its ModernBERT "training" is the stand-in
    that raises (no torch: the test takes seconds)."""
    import subprocess
    import sys

    script = tmp_path / "parent.py"
    script.write_text(
        "from gtbook.studies.pretrained import training as tr\n"
        "from gtbook.studies.pretrained.side_by_side import train_side_by_side\n"
        "def broken_mlm(schedule, progress=False):\n"
        "    raise ValueError(f'no corpus for {schedule.steps} steps')\n"
        "tr.train_vit_digits = lambda schedule, progress=False: 'the ViT'\n"
        "tr.train_modernbert_mlm = broken_mlm\n"
        "if __name__ == '__main__':\n"
        "    try:\n"
        "        train_side_by_side(tr.vit_schedule(2, 1), tr.mlm_schedule(7, 1))\n"
        "    except ValueError as exc:\n"
        "        print('raised', repr(exc))\n"
        "        print(exc.__cause__)\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "raised ValueError('no corpus for 7 steps')" in out.stdout
    assert "in the ModernBERT's training process" in out.stdout and "in broken_mlm" in out.stdout


@pytest.mark.slow
def test_a_kill_9_of_the_parent_kills_the_child(tmp_path):
    """The child gets the parent-death signal: a ``kill -9`` of the kernel leaves no training running.

    The spawned child runs the script's top level again, so the stand-in trainings below are the
    child's too: its "training" says when it runs (the signal is armed by then), then sleeps."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from gtbook.processes import pid_alive

    ready = tmp_path / "child-ready"
    script = tmp_path / "parent.py"
    script.write_text(
        "import multiprocessing, os, sys, time\n"
        "from pathlib import Path\n"
        "from gtbook.studies.pretrained import training as tr\n"
        "from gtbook.studies.pretrained.side_by_side import train_side_by_side\n"
        "def vit(schedule, progress=False):\n"
        "    time.sleep(600)\n"
        "def mlm(schedule, progress=False):\n"
        f"    Path({str(ready)!r}).write_text(str(os.getpid()))\n"
        "    time.sleep(600)\n"
        "tr.train_vit_digits, tr.train_modernbert_mlm = vit, mlm\n"
        "if __name__ == '__main__':\n"
        "    train_side_by_side(tr.vit_schedule(2, 1), tr.mlm_schedule(2, 1))\n"
    )
    parent = subprocess.Popen([sys.executable, str(script)])
    child = None
    try:
        deadline = time.time() + 120
        while not (ready.exists() and ready.read_text()) and time.time() < deadline:
            time.sleep(0.1)
        assert ready.exists(), "the child did not start within 120 s"
        child = int(ready.read_text())
        assert pid_alive(child)
        parent.kill()
        parent.wait()
        deadline = time.time() + 30
        while pid_alive(child) and time.time() < deadline:
            time.sleep(0.1)
        assert not pid_alive(child), "the child runs on after its parent was killed"
    finally:
        parent.kill()
        parent.wait()
        if child is not None and pid_alive(child):
            os.kill(child, signal.SIGKILL)


class _Unloadable(Exception):
    pass


def _refuse(text):
    raise TypeError(f"cannot rebuild {text!r}")


def test_an_exception_that_does_not_unpickle_is_sent_as_its_text(monkeypatch):
    """Some exceptions pickle but do not unpickle (an ``__init__`` with two arguments, in a process that
    has not imported ``distributed``, whose ``tblib`` registers reducers for every exception class): the
    child sends their text, so the parent does not fail on the message itself. The reducer is set here,
    so the test does not depend on what this process imported."""
    import copyreg
    import pickle

    from gtbook.studies.pretrained.side_by_side import _sendable

    monkeypatch.setitem(copyreg.dispatch_table, _Unloadable, lambda e: (_refuse, (str(e),)))
    exc = _Unloadable("saving: disk full")
    data = pickle.dumps(exc)
    with pytest.raises(TypeError):
        pickle.loads(data)
    sent = _sendable(exc)
    assert isinstance(sent, RuntimeError) and "disk full" in str(pickle.loads(pickle.dumps(sent)))
    plain = ValueError("x")
    assert _sendable(plain) is plain
