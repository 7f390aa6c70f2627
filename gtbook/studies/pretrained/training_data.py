r"""The data and configurations of the two models trained here (:mod:`gtbook.studies.pretrained.training`).

* :func:`digits_split`: scikit-learn's bundled 8x8 digits, standardised, split per class;
* :func:`pydoc_corpus`: the standard library's ``pydoc_data`` topics as a character corpus, its vocabulary
  (:data:`SPECIALS` first) and BERT's masking (:func:`mask_tokens`), with the unigram baseline
  (:func:`unigram_cross_entropy`);
* :func:`vit_digits_config` and :func:`modernbert_small_config`: the two architectures.

The training cache key (:func:`gtbook.studies.pretrained.training.training_key`) hashes this module's
source with the trainer's, so an edit here retrains.
"""

from __future__ import annotations

from typing import Any

import numpy as np


# ============================================================================================ data
def digits_split(seed: int = 0, held_out: float = 0.2) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    r"""scikit-learn's bundled digits, standardised, split per class (stratified) into train and held-out.

    Returns ``x_train (n, 1, 8, 8) float32, y_train (n,) int64, x_test, y_test``; pixels
    :math:`(p/16 - m)/s` with the training images' mean :math:`m` and standard deviation :math:`s`.
    """
    from sklearn.datasets import load_digits

    data = load_digits()
    x = data.images.astype(np.float64) / 16.0
    y = data.target.astype(np.int64)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 101]))
    test = np.zeros(len(y), dtype=bool)
    for k in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == k))
        test[idx[: round(held_out * len(idx))]] = True
    m, s = x[~test].mean(), x[~test].std()
    x = ((x - m) / s).astype(np.float32)[:, None]
    return x[~test], y[~test], x[test], y[test]


#: special tokens of the character vocabulary, in id order
SPECIALS = ("[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]")


def pydoc_corpus(held_out: float = 0.1) -> tuple[str, str, list[str]]:
    r"""The standard library's ``pydoc_data`` topics as a character corpus.

    Each topic (in sorted order) is cut at the line break nearest to ``1 - held_out`` of its length: the
    first part goes to the training text, the rest to the held-out text (topics differ a lot in length,
    so holding out whole topics would hold out a share that depends on which ones). Returns
    ``(train_text, held_out_text, vocabulary)``, the vocabulary being :data:`SPECIALS` followed by the
    training text's characters in sorted order (a held-out character never seen in training is
    ``[UNK]``).
    """
    from pydoc_data.topics import topics

    if not 0 < held_out < 1:
        raise ValueError(f"held_out must lie in (0, 1), got {held_out!r}")
    train, held = [], []
    for key in sorted(topics):
        text = topics[key]
        cut = round((1 - held_out) * len(text))
        nl = text.rfind("\n", 0, cut)
        cut = nl + 1 if nl > 0 else cut
        train.append(text[:cut])
        held.append(text[cut:])
    train_text, held_text = "\n\n".join(train), "\n\n".join(h for h in held if h)
    return train_text, held_text, list(SPECIALS) + sorted(set(train_text))


def _encode(text: str, vocab: list[str]) -> np.ndarray:
    index = {ch: i for i, ch in enumerate(vocab)}
    unk = SPECIALS.index("[UNK]")
    return np.array([index.get(ch, unk) for ch in text], dtype=np.int64)


def mask_tokens(ids: Any, vocab_size: int, generator: Any, rate: float = 0.15):
    r"""BERT's masking: each non-special position is chosen with probability ``rate``; a chosen one
    becomes ``[MASK]`` (80%), a random character (10%) or stays (10%). Returns ``(inputs, labels)``,
    labels ``-100`` at positions not chosen."""
    import torch

    ids = torch.as_tensor(ids)
    chosen = torch.rand(ids.shape, generator=generator) < rate
    chosen &= ids >= len(SPECIALS)
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    u = torch.rand(ids.shape, generator=generator)
    inputs = ids.clone()
    inputs[chosen & (u < 0.8)] = SPECIALS.index("[MASK]")
    rand = chosen & (u >= 0.8) & (u < 0.9)
    inputs[rand] = torch.randint(len(SPECIALS), vocab_size, ids.shape, generator=generator)[rand]
    return inputs, labels


# ================================================================================= configurations
def vit_digits_config():
    """DeiT-tiny's width, depth, heads and MLP ratio on 8x8 one-channel images in 2x2 patches."""
    from transformers import ViTConfig

    # transformers 5 takes num_labels and attn_implementation through **kwargs: one typed dict, same order
    vit: dict[str, Any] = dict(
        hidden_size=192,
        num_hidden_layers=12,
        num_attention_heads=3,
        intermediate_size=768,
        image_size=8,
        patch_size=2,
        num_channels=1,
        num_labels=10,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        attn_implementation="sdpa",
    )
    return ViTConfig(**vit)


def modernbert_small_config(vocab_size: int):
    """A small ModernBERT: width 128, 6 layers, 4 heads, GLU width 192, global attention every 3rd layer,
    local window 128, RoPE; the character vocabulary of :func:`pydoc_corpus`."""
    from transformers import ModernBertConfig

    ids = {name.strip("[]").lower() + "_token_id": i for i, name in enumerate(SPECIALS[:3])}
    # transformers 5 takes global_attn_every_n_layers and attn_implementation through **kwargs: one typed
    # dict, the keywords in the same order
    modern: dict[str, Any] = dict(
        vocab_size=int(vocab_size),
        hidden_size=128,
        num_hidden_layers=6,
        num_attention_heads=4,
        intermediate_size=192,
        global_attn_every_n_layers=3,
        local_attention=128,
        max_position_embeddings=1024,
        bos_token_id=ids["cls_token_id"],
        eos_token_id=ids["sep_token_id"],
        **ids,
        attn_implementation="sdpa",
    )
    return ModernBertConfig(**modern)


def unigram_cross_entropy(train_ids: np.ndarray, targets: np.ndarray, vocab_size: int) -> float:
    r"""Cross-entropy (nats) of ``targets`` under the training text's unigram frequencies,
    add-one smoothed over the non-special characters: :math:`-\frac1m\sum_j \log p(t_j)`."""
    counts = np.bincount(train_ids, minlength=vocab_size).astype(np.float64)[len(SPECIALS) :] + 1.0
    logp = np.log(counts / counts.sum())
    return float(-np.mean(logp[np.asarray(targets) - len(SPECIALS)]))


__all__ = [
    "SPECIALS",
    "digits_split",
    "mask_tokens",
    "modernbert_small_config",
    "pydoc_corpus",
    "unigram_cross_entropy",
    "vit_digits_config",
]
