r"""Layer-by-layer forward passes of a loaded Transformer fed Gaussian tokens (the two input modes of
:mod:`gtcore.models`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gtcore._progress import progress as progress_bar
from gtcore.models.loading import LoadedTransformer, _as_loaded, _blocks

#: input modes (see :mod:`gtcore.models`)
MODES = ("embedding", "pure")


# ====================================================================== layer-by-layer forward
def _n_special(lt: LoadedTransformer, mode: str) -> int:
    if mode == "pure":
        return 0
    return {"deit": 2, "vit": 1}.get(lt.family, 0)


def _check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return mode


def max_tokens(lt: LoadedTransformer, mode: str) -> int | None:
    """The largest sequence length ``mode`` accepts for this model (``None``: no limit).

    Parameters
    ----------
    lt : LoadedTransformer
        The model.
    mode : {"embedding", "pure"}
        The input mode (:mod:`gtcore.models`).

    Returns
    -------
    int or None
        The size of the position table of BERT and ModernBERT in mode ``"embedding"``; None otherwise.

    Raises
    ------
    ValueError
        An unknown ``mode``.
    """
    _check_mode(mode)
    if mode == "pure":
        return None
    if lt.family in ("bert", "modernbert"):
        return int(lt.model.config.max_position_embeddings)
    return None


def _check_tokens(lt: LoadedTransformer, tokens: int, mode: str) -> None:
    limit = max_tokens(lt, mode)
    if limit is not None and tokens > limit:
        raise ValueError(
            f"tokens must be <= {limit} in mode 'embedding' for {lt.name} "
            f"(its position table), got {tokens}; use mode='pure' for longer "
            "sequences"
        )
    if mode == "embedding" and lt.family in ("deit", "vit") and patch_grid(tokens)[0] < 2:
        raise ValueError(
            f"tokens must factor as a k x m patch grid with 2 <= k <= m in mode "
            f"'embedding' for {lt.family}, got {tokens}"
        )


def patch_grid(tokens: int) -> tuple[int, int]:
    r"""The most nearly square patch grid ``(k, m)``, ``k <= m``, ``k m = tokens`` (a vision model's
    embedding mode: ``k x k`` for a perfect square, e.g. ``16 x 32`` for 512).

    Parameters
    ----------
    tokens : int
        The number of patches :math:`T \ge 1`.

    Returns
    -------
    tuple of int
        ``(k, m)`` with ``k`` the largest divisor of ``tokens`` not above :math:`\sqrt{T}` (``k = 1`` for a
        prime: no grid with two rows).
    """
    k = max(j for j in range(1, math.isqrt(int(tokens)) + 1) if tokens % j == 0)
    return k, int(tokens) // k


def _embed(lt: LoadedTransformer, x, mode: str):
    """What the first block sees, and the per-layer context (masks, rotary tables)."""
    import torch

    m, fam = lt.model, lt.family
    B, T, _ = x.shape
    ctx: dict[str, Any] = {}
    if fam == "bert":
        h = m.embeddings(inputs_embeds=x) if mode == "embedding" else x
    elif fam == "modernbert":
        if mode == "embedding":
            from transformers.masking_utils import (
                create_bidirectional_mask,
                create_bidirectional_sliding_window_mask,
            )

            h = m.embeddings(inputs_embeds=x)
            pos = torch.arange(T, device=x.device).unsqueeze(0)
            ctx["mask"] = {
                "full_attention": create_bidirectional_mask(config=m.config, inputs_embeds=h, attention_mask=None),
                "sliding_attention": create_bidirectional_sliding_window_mask(
                    config=m.config, inputs_embeds=h, attention_mask=None
                ),
            }
        else:
            h = x
            pos = torch.zeros((1, T), dtype=torch.long, device=x.device)  # RoPE angle 0
            ctx["mask"] = {t: None for t in set(m.config.layer_types)}  # no sliding window
        ctx["rope"] = {t: m.rotary_emb(h, pos, t) for t in set(m.config.layer_types)}
    else:  # deit / vit
        if mode == "embedding":
            emb = m.embeddings
            special = [emb.cls_token.expand(B, -1, -1)]
            if fam == "deit":
                special.append(emb.distillation_token.expand(B, -1, -1))
            h = torch.cat([*special, x], dim=1)
            rows, cols = patch_grid(T)
            if T == emb.position_embeddings.shape[1] - len(special) and rows == cols:
                h = h + emb.position_embeddings
            else:  # bicubic interpolation of the position table to the rows x cols grid
                h = h + emb.interpolate_pos_encoding(h, rows * emb.patch_size, cols * emb.patch_size)
        else:
            h = x
    return h, ctx


def _step(lt: LoadedTransformer, layer, h, ctx):
    if lt.family == "modernbert":
        t = layer.attention_type
        return layer(h, attention_mask=ctx["mask"][t], position_embeddings=ctx["rope"][t])
    return layer(h, None)


def _batch_size(lt: LoadedTransformer, T: int) -> int:
    heads = int(lt.model.config.num_attention_heads)
    budget = 2**26  # attention-score elements per batch (256 MiB in float32)
    return max(1, budget // max(1, heads * (T + 2) ** 2))


def iter_layers(model: LoadedTransformer, x: Any, mode: str = "pure", *, progress: bool = False):
    r"""Yield ``(layer, tokens)``, :math:`\ell = 0..L`: what block 1 sees, then each block's output.

    Parameters
    ----------
    model : LoadedTransformer, str or path
        The model, or a name or directory for :func:`~gtcore.models.load_transformer`.
    x : (S, T, d) array or tensor
        ``S`` sequences of ``T`` input vectors (the Gaussian tokens).
    mode : {"embedding", "pure"}
        See the module docstring.
    progress : bool
        A tqdm bar over the layers.

    Yields
    ------
    layer : int
        :math:`\ell`, 0 for what block 1 sees.
    tokens : (S, T, d) float32 torch tensor on the model's device
        The Gaussian-token positions only (special tokens dropped).

    Raises
    ------
    ValueError
        An unknown ``mode``, ``x`` of the wrong shape, or a sequence length the mode does not accept.

    Notes
    -----
    Runs under ``torch.no_grad`` in eval mode (dropout off), all sequences advanced one block at
    a time in batches, so memory holds one layer's activations.
    """
    import torch

    lt = _as_loaded(model)
    _check_mode(mode)
    x = torch.as_tensor(np.ascontiguousarray(x) if not torch.is_tensor(x) else x.detach(), dtype=torch.float32)
    if x.ndim != 3 or x.shape[-1] != lt.d:
        raise ValueError(f"x must have shape (sequences, tokens, {lt.d}), got {tuple(x.shape)}")
    S, T, _ = x.shape
    _check_tokens(lt, T, mode)
    x = x.to(lt.device)
    k = _n_special(lt, mode)
    bs = _batch_size(lt, T)
    blocks = _blocks(lt)
    it = progress_bar(range(len(blocks)), lt.name, enabled=progress)
    hs, ctxs = [], []
    with torch.no_grad():  # never held across a yield: the caller's grad mode is untouched
        for start in range(0, S, bs):
            h, ctx = _embed(lt, x[start : start + bs], mode)
            hs.append(h)
            ctxs.append(ctx)
        out = torch.cat(hs)[:, k:]
    yield 0, out
    for i in it:
        with torch.no_grad():
            hs = [_step(lt, blocks[i], h, ctx) for h, ctx in zip(hs, ctxs, strict=True)]
            out = torch.cat(hs)[:, k:]
        yield i + 1, out


def hidden_states(model: LoadedTransformer, x: Any, mode: str = "pure") -> list:
    r"""All of :func:`iter_layers` as a list of ``L + 1`` tensors of shape (S, T, d).

    Parameters
    ----------
    model : LoadedTransformer, str or path
        The model, or a name or directory for :func:`~gtcore.models.load_transformer`.
    x : (S, T, d) array or tensor
        ``S`` sequences of ``T`` input vectors.
    mode : {"embedding", "pure"}
        The input mode.

    Returns
    -------
    list of torch.Tensor
        The tokens after each layer :math:`\ell = 0..L`, each (S, T, d), float32.
    """
    return [h for _, h in iter_layers(model, x, mode)]
