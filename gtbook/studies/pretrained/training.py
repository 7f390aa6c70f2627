r"""The paper's two architectures, trained here: offline, deterministic on CPU, seeded, cached.

These are **trained here, not the paper's pretrained checkpoints**: the same architectures at toy
scale of data, so that chapter 5 can run its criterion on learned attention.

* :func:`train_vit_digits`: a ``transformers`` ViT with DeiT-tiny's width 192, depth 12, 3 heads and MLP
  ratio 4 (``ViTForImageClassification``), on scikit-learn's bundled 8x8 digits (1797 images, 10
  classes). The images are **not upsampled**: each is cut into a 4x4 grid of 2x2-pixel patches, so a
  patch token carries 4 pixels (upsampling would add interpolated pixels and tokens, no information).
  Held-out metric: accuracy on a stratified 20% split, against chance (the most frequent class).
* :func:`train_modernbert_mlm`: a small ModernBERT (``ModernBertForMaskedLM``; width 128, 6 layers, 4
  heads, GLU width 1.5 x the width as in ModernBERT-base, global attention every 3rd layer, local
  window 128, RoPE) trained by masked-language modelling on characters of the standard library's
  ``pydoc_data`` topics (every Python install ships it). Held-out metric: the masked-token
  cross-entropy (nats) on the held-out last 10% of every topic, against a unigram model fitted to the
  training text.

Training is full-batch-free SGD (AdamW, linear warm-up then cosine decay, gradient clipping at 1),
seeded through ``torch.manual_seed`` (initialisation) and dedicated generators (data order,
masking), on CPU with a fixed number of threads. The weights (initial and trained) are saved as
safetensors under ``<cache>/trained/<name>-<key>/`` (``gtbook.cache.cache_dir``), with the
training record; the key hashes, like a chapter's, the source of this module, the configuration,
the schedule, the data and the versions of Python, numpy, torch, transformers and scikit-learn,
so a second build loads the weights instead of retraining and any change retrains.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from gtbook.studies.pretrained import training_data
from gtbook.studies.pretrained.training_data import (
    _encode,
    digits_split,
    mask_tokens,
    modernbert_small_config,
    pydoc_corpus,
    unigram_cross_entropy,
    vit_digits_config,
)
from gtcore._progress import progress as progress_bar

#: the label every trained-here model carries, everywhere it is shown
TRAINED_HERE = "trained here, not the paper's pretrained checkpoints"
#: threads used for training: results are bitwise reproducible at a fixed thread count, and one thread
#: is also the fastest on a shared 2-core machine (two threads ran 2-4x slower there)
TRAIN_THREADS = 1
_VERSION_PACKAGES = ("numpy", "torch", "transformers", "scikit-learn", "safetensors")


@dataclass(frozen=True)
class Schedule:
    r"""A training schedule.

    Attributes
    ----------
    steps : int
        Optimiser steps.
    batch_size : int
        Images (ViT) or text windows (MLM) per step.
    learning_rate : float
        Peak learning rate of AdamW.
    warmup : int
        Linear warm-up steps; then cosine decay to 0 at ``steps``.
    weight_decay : float
    eval_every : int
        Steps between two evaluations of the held-out metric (and the last step).
    seed : int
        Seed of the initialisation, the data order and the masking.
    """

    steps: int
    batch_size: int
    learning_rate: float
    warmup: int
    weight_decay: float = 0.05
    eval_every: int = 50
    seed: int = 0

    def __post_init__(self):
        for name in ("steps", "batch_size", "eval_every"):
            v = getattr(self, name)
            if isinstance(v, bool) or int(v) != v or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if not 0 <= self.warmup < self.steps:
            raise ValueError(f"warmup must lie in [0, steps), got {self.warmup!r}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate!r}")

    def lr_factor(self, step: int) -> float:
        r"""Learning-rate factor at ``step`` (0-based): :math:`(s+1)/w` while warming up, then
        :math:`\tfrac12(1 + \cos(\pi (s - w)/(S - w)))`."""
        if step < self.warmup:
            return (step + 1) / self.warmup
        return 0.5 * (1.0 + math.cos(math.pi * (step - self.warmup) / max(1, self.steps - self.warmup)))


@dataclass
class TrainingRecord:
    r"""What training did, and the held-out metric against its trivial baseline.

    Attributes
    ----------
    name, task : str
    metric, baseline_name : str
        What the held-out metric is (``"accuracy"`` or ``"masked-token cross-entropy (nats)"``) and the
        trivial baseline it is compared with.
    steps : list of int
        Steps at which the held-out metric was evaluated (0: before training).
    train_loss : list of float
        Mean training loss over the steps since the previous evaluation (NaN at step 0).
    held_out : list of float
        The held-out metric at ``steps``.
    baseline : float
        The baseline's value of the metric on the same held-out data.
    seconds : float
        Wall time of the (cold) training.
    threads : int
    schedule : dict
    key : str
    n_train, n_held_out : int
        Training and held-out examples (images, or characters).
    higher_is_better : bool
    """

    name: str
    task: str
    metric: str
    baseline_name: str
    steps: list
    train_loss: list
    held_out: list
    baseline: float
    seconds: float
    threads: int
    schedule: dict
    key: str
    n_train: int
    n_held_out: int
    higher_is_better: bool
    loaded_from_cache: bool = field(default=False)

    @property
    def final(self) -> float:
        """The held-out metric after the last step."""
        return float(self.held_out[-1])

    @property
    def beats_baseline_by(self) -> float:
        """How much better than the baseline (accuracy points, or nats)."""
        return self.final - self.baseline if self.higher_is_better else self.baseline - self.final

    def __repr__(self) -> str:
        return (
            f"TrainingRecord({self.name!r}: {self.metric} {self.final:.4g} vs {self.baseline_name} "
            f"{self.baseline:.4g} after {self.steps[-1]} steps, {self.seconds:.0f} s cold"
            f"{', loaded from cache' if self.loaded_from_cache else ''})"
        )


@dataclass
class TrainedModel:
    """A trained-here model and its random initialisation, ready for :mod:`gtcore.models`.

    Attributes
    ----------
    model : gtcore.models.LoadedTransformer
        The trained base model (its ``name`` says "trained here").
    initial : gtcore.models.LoadedTransformer
        The same architecture with the weights training started from.
    record : TrainingRecord
    path : str
        The cache folder holding the safetensors.
    """

    model: Any
    initial: Any
    record: TrainingRecord
    path: str

    def __repr__(self) -> str:
        return f"TrainedModel({self.model.name!r}, {self.record!r})"


def vit_schedule(steps: int, seed: int) -> Schedule:
    """The ViT's schedule: batches of 64 images, AdamW at 5e-4 (30 warm-up steps), weight decay 0.05,
    held-out accuracy every 25 steps."""
    return Schedule(
        steps=int(steps),
        batch_size=64,
        learning_rate=5e-4,
        warmup=min(30, int(steps) - 1),
        weight_decay=0.05,
        eval_every=25,
        seed=int(seed),
    )


def mlm_schedule(steps: int, seed: int) -> Schedule:
    """ModernBERT's schedule: batches of 16 windows of 256 characters, AdamW at 2e-3 (30 warm-up steps),
    weight decay 0.01, held-out loss every 50 steps."""
    return Schedule(
        steps=int(steps),
        batch_size=16,
        learning_rate=2e-3,
        warmup=min(30, int(steps) - 1),
        weight_decay=0.01,
        eval_every=50,
        seed=int(seed),
    )


# ================================================================================= cache and keys
def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for p in _VERSION_PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = "absent"
    return out


def training_key(name: str, config: Any, schedule: Schedule, data: bytes) -> str:
    """The cache key of one training run (see the module docstring): 16 hex digits."""
    h = hashlib.sha256()
    for part in (
        Path(__file__).read_bytes(),
        Path(training_data.__file__).read_bytes(),
        name.encode(),
        json.dumps(config.to_dict(), sort_keys=True, default=repr).encode(),
        json.dumps(asdict(schedule), sort_keys=True).encode(),
        hashlib.sha256(data).digest(),
        json.dumps(_versions(), sort_keys=True).encode(),
        str(TRAIN_THREADS).encode(),
    ):
        h.update(part + b"\0")
    return h.hexdigest()[:16]


def _folder(name: str, key: str) -> Path:
    from gtbook.cache import cache_dir

    return cache_dir() / "trained" / f"{name}-{key}"


def _cache_off() -> bool:
    from gtbook.cache import OFF_ENV

    return bool(os.environ.get(OFF_ENV))


def _save(folder: Path, initial, trained, config, record: TrainingRecord) -> None:
    """Write the weights and the record into a temporary folder beside ``folder``, then rename it."""
    from safetensors.torch import save_file

    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        save_file({k: v.contiguous() for k, v in initial.items()}, str(tmp / "initial.safetensors"))
        save_file({k: v.contiguous() for k, v in trained.items()}, str(tmp / "model.safetensors"))
        (tmp / "config.json").write_text(config.to_json_string())
        (tmp / "record.json").write_text(json.dumps(asdict(record), indent=1))
        os.replace(tmp, folder)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not folder.is_dir():  # a concurrent build may have published it first
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _load(folder: Path):
    from safetensors.torch import load_file

    record = TrainingRecord(**json.loads((folder / "record.json").read_text()))
    record.loaded_from_cache = True
    return load_file(str(folder / "initial.safetensors")), load_file(str(folder / "model.safetensors")), record


# ================================================================================== training loop
class _Threads:
    """Run with a fixed torch thread count (restored after)."""

    def __init__(self, n: int):
        self.n = n

    def __enter__(self):
        import torch

        self.old = torch.get_num_threads()
        torch.set_num_threads(self.n)

    def __exit__(self, *exc):
        import torch

        torch.set_num_threads(self.old)


def _train(model, schedule: Schedule, batch_fn, evaluate, desc: str, progress: bool):
    """AdamW with warm-up and cosine decay; returns (steps, train_loss, held_out)."""
    import torch

    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "norm" not in n.lower()]
    rest = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "norm" not in n.lower())]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": schedule.weight_decay}, {"params": rest, "weight_decay": 0.0}],
        lr=schedule.learning_rate,
        betas=(0.9, 0.98),
        eps=1e-8,
    )
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule.lr_factor)
    steps, losses, held = [0], [math.nan], [evaluate(model)]
    running = []
    for step in progress_bar(range(schedule.steps), desc, enabled=progress):
        model.train()
        loss = model(**batch_fn(step)).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        running.append(float(loss.detach()))
        if (step + 1) % schedule.eval_every == 0 or step + 1 == schedule.steps:
            steps.append(step + 1)
            losses.append(float(np.mean(running)))
            held.append(evaluate(model))
            running = []
    model.eval()
    return steps, losses, held


def _trained_model(
    name: str,
    label: str,
    family: str,
    config,
    model_cls,
    schedule: Schedule,
    data: bytes,
    run,
    base_attr: str,
    progress: bool,
) -> TrainedModel:
    import torch

    from gtcore.models import LoadedTransformer

    key = training_key(name, config, schedule, data)
    folder = _folder(name, key)
    if (folder / "record.json").is_file() and not _cache_off():
        initial, trained, record = _load(folder)
    else:
        with _Threads(TRAIN_THREADS), torch.random.fork_rng(devices=[]):
            torch.manual_seed(schedule.seed)
            model = model_cls(config)
            initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
            t0 = time.perf_counter()
            steps, losses, held, baseline, sizes = run(model, progress)
            seconds = time.perf_counter() - t0
        trained = {k: v.detach().clone() for k, v in model.state_dict().items()}
        record = TrainingRecord(
            name=name,
            task=label,
            steps=steps,
            train_loss=losses,
            held_out=held,
            seconds=seconds,
            threads=TRAIN_THREADS,
            schedule=asdict(schedule),
            key=key,
            **baseline,
            **sizes,
        )
        if not _cache_off():
            _save(folder, initial, trained, config, record)

    def loaded(state, suffix: str) -> LoadedTransformer:
        with torch.random.fork_rng(devices=[]):  # building draws random weights: keep the caller's stream
            m = model_cls(config)
        m.load_state_dict(state)
        base = getattr(m, base_attr).float().eval()
        return LoadedTransformer(base, family, f"{label} ({suffix})", str(folder), suffix == TRAINED_HERE)

    return TrainedModel(
        loaded(trained, TRAINED_HERE), loaded(initial, "its random initialisation"), record, str(folder)
    )


def train_vit_digits(schedule: Schedule, *, progress: bool = False) -> TrainedModel:
    r"""The DeiT-tiny-configured ViT trained on the digits (or loaded from the cache).

    Parameters
    ----------
    schedule : Schedule
    progress : bool
        A bar over the training steps.

    Returns
    -------
    TrainedModel
        ``record.held_out``: accuracy on the held-out 20%; ``record.baseline``: the most frequent class's
        share of it (chance).
    """
    import torch
    from transformers import ViTForImageClassification

    xtr, ytr, xte, yte = digits_split(schedule.seed)
    config = vit_digits_config()
    data = xtr.tobytes() + ytr.tobytes() + xte.tobytes() + yte.tobytes()

    def run(model, progress):
        gen = torch.Generator().manual_seed(int(np.random.SeedSequence([schedule.seed, 102]).generate_state(1)[0]))
        order: list[int] = []
        X, Y = torch.from_numpy(xtr), torch.from_numpy(ytr)
        Xt, Yt = torch.from_numpy(xte), torch.from_numpy(yte)

        def batch(step):
            nonlocal order
            while len(order) < schedule.batch_size:
                order += torch.randperm(len(Y), generator=gen).tolist()
            idx, order = order[: schedule.batch_size], order[schedule.batch_size :]
            return {"pixel_values": X[idx], "labels": Y[idx]}

        def accuracy(m):
            m.eval()
            with torch.no_grad():
                return float((m(pixel_values=Xt).logits.argmax(-1) == Yt).double().mean())

        steps, losses, held = _train(model, schedule, batch, accuracy, "ViT on digits", progress)
        chance = float(np.bincount(yte).max() / len(yte))
        return (
            steps,
            losses,
            held,
            {
                "metric": "accuracy",
                "baseline_name": "chance (most frequent class)",
                "baseline": chance,
                "higher_is_better": True,
            },
            {"n_train": len(ytr), "n_held_out": len(yte)},
        )

    return _trained_model(
        "vit-digits",
        "DeiT-tiny-configured ViT on digits",
        "vit",
        config,
        ViTForImageClassification,
        schedule,
        data,
        run,
        "vit",
        progress,
    )


def train_modernbert_mlm(schedule: Schedule, *, window: int = 256, progress: bool = False) -> TrainedModel:
    r"""The small ModernBERT trained by masked-language modelling on ``pydoc_data`` (or loaded from the cache).

    Each step draws ``batch_size`` windows of ``window`` characters at random offsets of the training text
    and masks them (:func:`~gtbook.studies.pretrained.training_data.mask_tokens`). The held-out metric is the mean
    cross-entropy over the masked positions of the held-out text cut into consecutive windows, with one fixed masking;
    the baseline is
    :func:`~gtbook.studies.pretrained.training_data.unigram_cross_entropy` on the same positions.

    Parameters
    ----------
    schedule : Schedule
    window : int
        Characters per training and evaluation window.
    progress : bool

    Returns
    -------
    TrainedModel
    """
    import torch
    from transformers import ModernBertForMaskedLM

    train_text, held_text, vocab = pydoc_corpus()
    tr, te = _encode(train_text, vocab), _encode(held_text, vocab)
    config = modernbert_small_config(len(vocab))
    data = tr.tobytes() + te.tobytes() + str(window).encode()
    V = len(vocab)

    def run(model, progress):
        ss = np.random.SeedSequence([schedule.seed, 103])
        gen_data, gen_eval = (torch.Generator().manual_seed(int(s)) for s in ss.generate_state(2))
        Tr = torch.from_numpy(tr)
        n_win = len(te) // window
        eval_in, eval_lab = mask_tokens(torch.from_numpy(te[: n_win * window]).view(n_win, window), V, gen_eval)
        chosen = eval_lab != -100
        baseline = unigram_cross_entropy(tr, eval_lab[chosen].numpy(), V)

        def batch(step):
            start = torch.randint(0, len(Tr) - window, (schedule.batch_size,), generator=gen_data)
            ids = torch.stack([Tr[s : s + window] for s in start.tolist()])
            inputs, labels = mask_tokens(ids, V, gen_data)
            return {"input_ids": inputs, "labels": labels}

        def held_out_loss(m):
            m.eval()
            total, count = 0.0, 0
            with torch.no_grad():
                for i in range(0, n_win, 32):
                    logits = m(input_ids=eval_in[i : i + 32]).logits
                    lab = eval_lab[i : i + 32]
                    total += float(
                        torch.nn.functional.cross_entropy(
                            logits.reshape(-1, V), lab.reshape(-1), ignore_index=-100, reduction="sum"
                        )
                    )
                    count += int((lab != -100).sum())
            return total / count

        steps, losses, held = _train(model, schedule, batch, held_out_loss, "ModernBERT MLM", progress)
        return (
            steps,
            losses,
            held,
            {
                "metric": "masked-token cross-entropy (nats)",
                "baseline_name": "unigram model",
                "baseline": baseline,
                "higher_is_better": False,
            },
            {"n_train": len(tr), "n_held_out": n_win * window},
        )

    return _trained_model(
        "modernbert-pydoc",
        "small ModernBERT, MLM on pydoc_data",
        "modernbert",
        config,
        ModernBertForMaskedLM,
        schedule,
        data,
        run,
        "model",
        progress,
    )


__all__ = [
    "TRAINED_HERE",
    "Schedule",
    "TrainedModel",
    "TrainingRecord",
    "mlm_schedule",
    "train_modernbert_mlm",
    "train_vit_digits",
    "training_key",
    "vit_schedule",
]
