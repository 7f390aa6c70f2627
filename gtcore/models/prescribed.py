r"""Transformers with prescribed attention, built from the real Hugging Face ``transformers`` classes.

:func:`~gtcore.models.prescribed_transformer` builds a BERT, ViT (the DeiT/ViT encoder) or ModernBERT encoder
from a configuration only (no weights are downloaded) and overwrites every layer's weights so that
one block is the residual layer of the book's particle model (the conventions of :mod:`gtcore.controls`),

.. math::

    x_i \mapsto x_i + h \sum_{h'} V_{h'} \sum_{j=1}^N
        \frac{e^{x_j^\top B_{h'} x_i}}{\sum_k e^{x_k^\top B_{h'} x_i}}\, x_j
    \quad\text{(attention sub-layer)}, \qquad
    x \mapsto x + h(Ax + b) \quad\text{(feed-forward sub-layer)} .

**Attention.** Head :math:`h'` of the library computes the logits
:math:`(W_q x_i)^\top (W_k x_j)/\sqrt{d_{\text{head}}}` with :math:`W_q, W_k` of shape
:math:`(d_{\text{head}}, d)`. With the SVD :math:`B = U S R^\top` truncated to rank
:math:`d_{\text{head}}`, :math:`W_k = d_{\text{head}}^{1/4} S^{1/2} U^\top` and
:math:`W_q = d_{\text{head}}^{1/4} S^{1/2} R^\top` give :math:`W_k^\top W_q = \sqrt{d_{\text{head}}}\,B`,
so the library's logits (its :math:`1/\sqrt{d_{\text{head}}}` included) are exactly
:math:`x_j^\top B x_i`. The value :math:`W_v` (:math:`d_{\text{head}} \times d`) and the head's
block of the output projection :math:`W_o` (:math:`d \times d_{\text{head}}`) factor
:math:`h\,V_{h'} = W_o W_v` the same way. Every bias is zero. Hence
:math:`\operatorname{rank} B_{h'}, \operatorname{rank} V_{h'} \le d_{\text{head}}`:

================  ===========================  =================================================
family            head size                    what is supported
================  ===========================  =================================================
``"bert"``        :math:`d/H` (config fixed)   :math:`H \mid d`; rank :math:`\le d/H` per head
``"vit"``         :math:`d` (``head_dim``)     any :math:`H`; full rank (``ViTConfig(head_dim=d)``)
``"modernbert"``  :math:`d/H` (config fixed)   :math:`H \mid d`; rank :math:`\le d/H` per head
================  ===========================  =================================================

So the paper's case :math:`H = 1` with full-rank :math:`V, B` runs on all three families, and
several full-rank heads only on ViT. Anything else raises a ``ValueError`` naming the head.

**Feed-forward.** ``feed_forward=False`` makes each MLP block add exactly :math:`0` (output weights
and bias zero); the controls must then have :math:`A = 0,\ b = 0`. ``feed_forward=True`` realises
:math:`h(Ax + b)` with the library's ``"linear"`` activation (``ACT2FN["linear"]``, the identity):
first projection :math:`I`, second :math:`hA` with bias :math:`hb`. ModernBERT's MLP is a GLU,
:math:`W_o(\operatorname{act}(W_{\text{in}}x) \odot W_{\text{gate}}x)`: its gate rows are set to
weight 0 and bias 1 (``mlp_bias=True``), so the gate is exactly 1. In every family the MLP follows
the attention, so a block is the *split* step (attention sub-layer, then feed-forward sub-layer),
an order-1 consistent approximation of the ODE like explicit Euler and equal to it when
:math:`A = 0, b = 0`. :func:`~gtcore.models.prescribed_moments.split_controls` and
:func:`~gtcore.models.prescribed_moments.layer_moments` give its exact Gaussian layer map;
:func:`~gtcore.models.prescribed_moments.split_schedule` gives it as time-piecewise controls for
:func:`gtcore.particles.simulate`. The controls' own block :math:`W\sigma(Ux + c)` is not supported.

**Position information.** The residual stream is fed to the blocks directly: no embedding layer
(so no BERT position / token-type embeddings, no ViT patch embedding, CLS token or position
embeddings), no special tokens, no attention mask (every token attends to every token). ModernBERT
applies RoPE to :math:`q, k` inside its attention: it is neutralised by passing the rotary tables
:math:`\cos \equiv 1,\ \sin \equiv 0` (rotation by angle 0, what position ids all equal to 0
give), and every layer is configured ``"full_attention"`` (no sliding window). transformers'
``apply_rotary_pos_emb`` computes that identity in float32 (it upcasts :math:`q, k` with
``.float()``), which would cap the agreement at :math:`\sim 10^{-7}`; during
:func:`hidden_states` the module's ``apply_rotary_pos_emb`` is therefore replaced (for the call
only) by the float64 identity it equals at angle 0. The attention kernel is ``"sdpa"``
(``torch.nn.functional.scaled_dot_product_attention``, softmax in the model's dtype); the
``"eager"`` paths of ViT and ModernBERT take their softmax in float32.

**LayerNorm.** ``layer_norm=False`` replaces every LayerNorm of the blocks by the identity.
``layer_norm=True`` keeps the family's own placement with unit gain and zero bias: BERT post-LN
(:math:`\mathrm{LN}(x + \text{sub-layer}(x))` after each sub-layer), ViT and ModernBERT pre-LN
(:math:`x + \text{sub-layer}(\mathrm{LN}(x))`). ModernBERT's first block has no pre-attention norm
of its own, its embedding LayerNorm plays that part: with ``layer_norm=True`` it is applied to the
input before block 1. Final LayerNorms after the last block are never applied.

Hidden states are the residual stream before block 1 (the input tokens) and after each block.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any
from unittest import mock

import numpy as np
import torch
from torch import nn

from gtcore._validation import as_float_array
from gtcore.controls import Controls
from gtcore.models.prescribed_moments import _check_flag, _check_h, _check_layers

__all__ = [
    "ATTN_IMPLEMENTATION",
    "FAMILIES",
    "HEAD_FACTOR_RTOL",
    "PrescribedTransformer",
    "head_dim",
    "hidden_states",
    "prescribed_transformer",
]


#: supported families
FAMILIES = ("bert", "vit", "modernbert")


#: a singular value below this fraction of the largest counts as zero when B_h, V_h are factored through
#: heads (tighter than gtcore._linalg.RANK_RTOL: the factorisation must hold to round-off)
HEAD_FACTOR_RTOL = 1e-12


#: the attention implementation used by every family (see the module docstring)
ATTN_IMPLEMENTATION = "sdpa"


# ============================================================================== validation
def _check_family(family: str) -> str:
    if not isinstance(family, str) or family.lower() not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got {family!r}")
    return family.lower()


def head_dim(family: str, d: int, heads: int) -> int:
    """The head size the family uses for hidden size ``d`` and ``heads`` heads.

    ``"vit"``: ``d`` (its config's ``head_dim`` override); ``"bert"``, ``"modernbert"``: ``d / heads``.

    Parameters
    ----------
    family : {"bert", "vit", "modernbert"}
        The encoder family.
    d : int
        The hidden size.
    heads : int
        The number of heads.

    Returns
    -------
    int
        The head size.

    Raises
    ------
    ValueError
        ``heads`` does not divide ``d`` (BERT, ModernBERT).
    """
    family = _check_family(family)
    if family == "vit":
        return int(d)
    if d % heads:
        raise ValueError(
            f"controls: family {family!r} needs the hidden size d={d} divisible by the "
            f"number of heads H={heads} (head size d/H); use H dividing d, or family='vit'"
        )
    return d // heads


def _factor(M: np.ndarray, r: int, name: str, family: str) -> tuple[np.ndarray, np.ndarray]:
    r"""``(L, R)`` of shapes (d, r), (r, d) with ``L @ R == M``, from the SVD truncated to rank r."""
    U, s, Vt = np.linalg.svd(M)
    scale = max(float(s[0]), np.finfo(float).tiny) if s.size else 1.0
    if s.size > r and s[r] > HEAD_FACTOR_RTOL * scale and s[0] > 0:
        rank = int(np.sum(s > HEAD_FACTOR_RTOL * scale))
        raise ValueError(
            f"controls: {name} has rank {rank}, but family {family!r} factors it through "
            f"heads of size {r} (rank <= {r}); use lower-rank matrices, fewer heads, "
            f"or family='vit' (head size d)"
        )
    root = np.sqrt(s[:r])
    L = np.zeros((M.shape[0], r))
    R = np.zeros((r, M.shape[1]))
    k = min(r, s.size)
    L[:, :k] = U[:, :k] * root[:k]
    R[:k] = root[:k, None] * Vt[:k]
    return L, R


def _check_controls(controls: Any, feed_forward: bool) -> Controls:
    if not isinstance(controls, Controls):
        raise ValueError(f"controls must be a Controls, got {type(controls).__name__}")
    if controls.attention != "dot":
        raise ValueError(
            f"controls: attention={controls.attention!r} is not what these families compute "
            "(softmax of the logits x_j^T B x_i, the dot product): prescribed Transformers are "
            "built for attention='dot' only"
        )
    if controls.has_feedforward:
        raise ValueError(
            "controls: the block W sigma(Ux + c) is not supported by prescribed "
            "Transformers; fold an identity-activation block into A, b"
        )
    if not feed_forward and (np.any(controls.A) or np.any(controls.b)):
        raise ValueError(
            "controls: A and b must be zero when feed_forward=False (the MLP block adds "
            "exactly 0); pass feed_forward=True to realise h(Ax + b) in the MLP"
        )
    return controls


# ============================================================================== the model
class PrescribedTransformer(nn.Module):
    """A ``transformers`` encoder whose blocks are prescribed residual layers.

    Built by :func:`prescribed_transformer`; calling it on tokens of shape (N, d) or (S, N, d)
    returns the hidden states (L + 1, N, d) or (L + 1, S, N, d) as a tensor.

    Parameters
    ----------
    model : torch.nn.Module
        The ``transformers`` base model (``BertModel``, ``ViTModel`` or ``ModernBertModel``).
    family : {"bert", "vit", "modernbert"}
        Its family.
    controls : Controls
        The layer's parameters (those of the first layer when they vary).
    n_layers : int
        The number of blocks L.
    h : float
        The layer size.
    layer_norm : bool
        Whether the family's LayerNorms are kept.
    feed_forward : bool
        Whether the MLP realises :math:`h(Ax + b)`.
    head_size : int
        The head size (:func:`~gtcore.models.prescribed.head_dim`).

    Attributes
    ----------
    model : torch.nn.Module
        The ``transformers`` base model.
    family, controls, n_layers, h, layer_norm, feed_forward
        As given.
    head_dim : int
        The head size.
    """

    def __init__(
        self,
        model: nn.Module,
        family: str,
        controls: Controls,
        n_layers: int,
        h: float,
        layer_norm: bool,
        feed_forward: bool,
        head_size: int,
    ) -> None:
        super().__init__()
        self.model: Any = model  # a transformers model: its submodules are not visible to the type checker
        self.family = family
        self.controls = controls
        self.n_layers = n_layers
        self.h = h
        self.layer_norm = layer_norm
        self.feed_forward = feed_forward
        self.head_dim = head_size

    @property
    def blocks(self) -> nn.ModuleList:
        """The L encoder blocks, in order."""
        return self.model.encoder.layer if self.family == "bert" else self.model.layers

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the weights."""
        return next(self.model.parameters()).dtype

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """The residual stream through the L blocks (no special tokens, no mask, RoPE neutralised).

        Parameters
        ----------
        tokens : (N, d) or (S, N, d) tensor
            One sequence, or S independent ones, in the model's dtype.

        Returns
        -------
        (L + 1, N, d) or (L + 1, S, N, d) tensor
            The input, then the output of each block.
        """
        single = tokens.ndim == 2
        x = tokens.unsqueeze(0) if single else tokens
        out = [x]
        with self._rope_neutralised():
            if self.family == "modernbert":
                _, N, _ = x.shape
                rope = (
                    torch.ones(1, N, self.head_dim, dtype=x.dtype, device=x.device),
                    torch.zeros(1, N, self.head_dim, dtype=x.dtype, device=x.device),
                )
                if self.layer_norm:
                    x = self.model.embeddings.norm(x)  # block 1's pre-attention norm
                for layer in self.blocks:
                    x = layer(x, attention_mask=None, position_embeddings=rope)
                    out.append(x)
            else:
                for layer in self.blocks:
                    x = layer(x, None)
                    out.append(x)
        hs = torch.stack(out)
        return hs[:, 0] if single else hs

    @contextlib.contextmanager
    def _rope_neutralised(self):
        if self.family != "modernbert":
            yield
            return
        from transformers.models.modernbert import modeling_modernbert

        def identity_rotary(q, k, cos, sin, unsqueeze_dim=1):
            return q, k

        with mock.patch.object(modeling_modernbert, "apply_rotary_pos_emb", identity_rotary):
            yield

    def extra_repr(self) -> str:
        """The line ``torch.nn.Module``'s repr shows for this module.

        Returns
        -------
        str
            Family, dimension, heads, head size, layers, layer size and options.
        """
        return (
            f"family={self.family!r}, d={self.controls.d}, heads={self.controls.heads}, "
            f"head_dim={self.head_dim}, n_layers={self.n_layers}, h={self.h:g}, "
            f"layer_norm={self.layer_norm}, feed_forward={self.feed_forward}"
        )


def _config(family: str, d: int, H: int, n_layers: int, width: int):
    import transformers

    common: dict[str, Any] = dict(
        hidden_size=d,
        num_hidden_layers=n_layers,
        num_attention_heads=H,
        intermediate_size=width,
        attn_implementation=ATTN_IMPLEMENTATION,
    )
    if family == "bert":
        return transformers.BertConfig(
            vocab_size=4,
            max_position_embeddings=4,
            type_vocab_size=1,
            hidden_act="linear",
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            **common,
        )
    if family == "vit":
        vit: dict[str, Any] = dict(head_dim=d, image_size=1, patch_size=1, num_channels=1)  # head_dim: **kwargs
        return transformers.ViTConfig(
            **vit,
            hidden_act="linear",
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            qkv_bias=False,
            **common,
        )
    return transformers.ModernBertConfig(
        vocab_size=4,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        cls_token_id=1,
        sep_token_id=2,
        max_position_embeddings=8,
        layer_types=["full_attention"] * n_layers,
        hidden_activation="linear",
        mlp_bias=True,
        attention_bias=False,
        norm_bias=False,
        attention_dropout=0.0,
        embedding_dropout=0.0,
        mlp_dropout=0.0,
        **common,
    )


def _set(param: torch.Tensor | None, value: np.ndarray | float) -> None:
    if param is None:
        return
    with torch.no_grad():
        param.copy_(torch.as_tensor(np.broadcast_to(value, tuple(param.shape)).copy(), dtype=param.dtype))


def _layer_norms(block: Any, family: str) -> list[tuple[nn.Module, str]]:
    """(parent, attribute) of every LayerNorm inside one block."""
    if family == "bert":
        return [(block.attention.output, "LayerNorm"), (block.output, "LayerNorm")]
    if family == "vit":
        return [(block, "layernorm_before"), (block, "layernorm_after")]
    return [(block, "attn_norm"), (block, "mlp_norm")]


def _prescribe_block(
    block: Any, family: str, ctl: Controls, h: float, r: int, layer_norm: bool, feed_forward: bool
) -> None:
    d, H = ctl.d, ctl.heads
    Wq = np.zeros((H * r, d))
    Wk = np.zeros((H * r, d))
    Wv = np.zeros((H * r, d))
    Wo = np.zeros((d, H * r))
    c = r**0.25
    for k in range(H):
        Lb, Rb = _factor(ctl.B[k], r, f"B[{k}]", family)  # B = Lb Rb
        Lv, Rv = _factor(h * ctl.V[k], r, f"V[{k}]", family)  # hV = Lv Rv
        sl = slice(k * r, (k + 1) * r)
        Wk[sl] = c * Lb.T  # Wk^T Wq = sqrt(r) Lb Rb = sqrt(r) B
        Wq[sl] = c * Rb
        Wv[sl] = Rv
        Wo[:, sl] = Lv
    # the feed-forward: first projection I (or 0), second h A with bias h b
    W1 = np.eye(d) if feed_forward else 0.0
    W2 = h * ctl.A if feed_forward else 0.0
    b2 = h * ctl.b if feed_forward else 0.0
    if family == "bert":
        att = block.attention
        for lin, W in ((att.self.query, Wq), (att.self.key, Wk), (att.self.value, Wv), (att.output.dense, Wo)):
            _set(lin.weight, W)
            _set(lin.bias, 0.0)
        _set(block.intermediate.dense.weight, W1)
        _set(block.intermediate.dense.bias, 0.0)
        _set(block.output.dense.weight, W2)
        _set(block.output.dense.bias, b2)
    elif family == "vit":
        att = block.attention
        for lin, W in ((att.q_proj, Wq), (att.k_proj, Wk), (att.v_proj, Wv), (att.o_proj, Wo)):
            _set(lin.weight, W)
            _set(lin.bias, 0.0)
        _set(block.mlp.fc1.weight, W1)
        _set(block.mlp.fc1.bias, 0.0)
        _set(block.mlp.fc2.weight, W2)
        _set(block.mlp.fc2.bias, b2)
    else:
        _set(block.attn.Wqkv.weight, np.concatenate([Wq, Wk, Wv]))
        _set(block.attn.Wqkv.bias, 0.0)
        _set(block.attn.Wo.weight, Wo)
        _set(block.attn.Wo.bias, 0.0)
        Wi = np.concatenate([np.broadcast_to(W1, (d, d)), np.zeros((d, d))])  # rows: input, gate
        bi = np.concatenate([np.zeros(d), np.ones(d)])  # gate == 1
        _set(block.mlp.Wi.weight, Wi)
        _set(block.mlp.Wi.bias, bi)
        _set(block.mlp.Wo.weight, W2)
        _set(block.mlp.Wo.bias, b2)
    for parent, name in _layer_norms(block, family):
        ln = getattr(parent, name)
        if not layer_norm:
            setattr(parent, name, nn.Identity())
        elif isinstance(ln, nn.LayerNorm):
            _set(ln.weight, 1.0)
            _set(ln.bias, 0.0)


def prescribed_transformer(
    family: str,
    controls: Controls | Sequence[Controls],
    n_layers: int,
    *,
    h: float = 1.0,
    layer_norm: bool = False,
    feed_forward: bool = False,
    dtype: torch.dtype = torch.float64,
) -> PrescribedTransformer:
    r"""A real ``transformers`` encoder whose every block is the prescribed residual layer.

    Block :math:`\ell` maps the residual stream :math:`X = (x_1, \dots, x_N)` by

    .. math::

        x_i \leftarrow x_i + h\sum_{h'} V_{h'}\sum_j \operatorname{softmax}_j(x_j^\top B_{h'} x_i)\,x_j,
        \qquad x_i \leftarrow x_i + h(Ax_i + b)

    (the second only with ``feed_forward=True``), with LayerNorms as ``layer_norm`` says. With
    ``layer_norm=False`` and :math:`A = 0, b = 0` it is exactly one explicit Euler step of the
    particle Transformer (:func:`gtcore.particles.simulate`, ``method="euler"``). See the module
    docstring for the weights, what each family supports and how RoPE is neutralised.

    Parameters
    ----------
    family : {"bert", "vit", "modernbert"}
        ``BertModel``, ``ViTModel`` (the DeiT/ViT encoder) or ``ModernBertModel``, built from a
        config with random initialisation, then overwritten.
    controls : Controls, or a sequence of ``n_layers`` Controls (one per layer)
        Heads :math:`(V_{h'}, B_{h'})` and, with ``feed_forward=True``, :math:`A, b`.
    n_layers : int >= 1
        The number of blocks L.
    h : float > 0
        Layer size.
    layer_norm : bool
        Keep the family's LayerNorms (unit gain, zero bias) or replace them by the identity.
    feed_forward : bool
        Realise :math:`h(Ax + b)` in the MLP, or make the MLP exactly zero.
    dtype : torch.dtype
        The dtype of the weights (float64 for round-off agreement).

    Returns
    -------
    PrescribedTransformer
        A ``torch.nn.Module`` in eval mode wrapping the ``transformers`` model.

    Raises
    ------
    ValueError
        Unknown ``family``; ``n_layers < 1``; ``h <= 0``; ``d`` not divisible by the number of
        heads (BERT, ModernBERT); a :math:`B_{h'}` or :math:`V_{h'}` of rank above the head size;
        :math:`A, b \ne 0` with ``feed_forward=False``; a controls feed-forward block; controls whose
        ``attention`` is not ``"dot"`` (the families' softmax of :math:`x_j^\top Bx_i`); ``h``,
        ``layer_norm`` or ``feed_forward`` of the wrong type (a bool for ``h``, a non-bool flag).
    """
    family = _check_family(family)
    n_layers = _check_layers(n_layers)
    h = _check_h(h)
    layer_norm = _check_flag(layer_norm, "layer_norm")
    feed_forward = _check_flag(feed_forward, "feed_forward")
    given: list[Any] = list(controls) if isinstance(controls, (list, tuple)) else [controls] * n_layers
    if len(given) != n_layers:
        raise ValueError(f"controls: a sequence must hold n_layers={n_layers} Controls, got {len(given)}")
    per_layer = [_check_controls(c, feed_forward) for c in given]
    d, H = per_layer[0].d, per_layer[0].heads
    if any(c.d != d or c.heads != H for c in per_layer):
        raise ValueError("controls: every layer must have the same dimension d and head count H")
    r = head_dim(family, d, H)
    config = _config(family, d, H, n_layers, d)
    from gtcore.models.loading import _model_class, _quiet_transformers

    cls = _model_class(family)
    kwargs = {"add_pooling_layer": False} if family in ("bert", "vit") else {}
    with _quiet_transformers(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = cls(config, **kwargs)
    model = model.to(dtype).eval()
    wrapper = PrescribedTransformer(model, family, per_layer[0], n_layers, h, bool(layer_norm), bool(feed_forward), r)
    for block, ctl in zip(wrapper.blocks, per_layer, strict=True):
        _prescribe_block(block, family, ctl, h, r, bool(layer_norm), bool(feed_forward))
    return wrapper.eval()


def hidden_states(model: PrescribedTransformer, tokens: Any) -> np.ndarray:
    r"""The residual stream of a prescribed Transformer: input, then after each of the L blocks.

    Parameters
    ----------
    model : PrescribedTransformer
        The model (:func:`~gtcore.models.prescribed_transformer`).
    tokens : (N, d) array or tensor
        One sequence (the token cloud), no special tokens, no mask. A batch (S, N, d) of
        independent sequences is accepted too.

    Returns
    -------
    (L + 1, N, d) or (L + 1, S, N, d) ndarray
        The residual stream, in the model's dtype.

    Raises
    ------
    ValueError
        ``model`` is not a :class:`PrescribedTransformer`, or tokens that are not real numbers, of the wrong shape
        or not finite.
    """
    if not isinstance(model, PrescribedTransformer):
        raise ValueError(f"model must be a PrescribedTransformer, got {type(model).__name__}")
    if torch.is_tensor(tokens):
        if tokens.is_complex():
            raise ValueError(f"tokens must be real, got a complex tensor ({tokens.dtype})")
        x = tokens.detach()
    else:  # a negative-stride view is copied
        x = torch.as_tensor(np.ascontiguousarray(as_float_array(tokens, "tokens")))
    d = model.controls.d
    if x.ndim not in (2, 3) or x.shape[-1] != d or x.shape[-2] < 1:
        raise ValueError(f"tokens must have shape (N, {d}) or (S, N, {d}), got {tuple(x.shape)}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("tokens has non-finite entries (NaN or inf)")
    with torch.no_grad():
        return model(x.to(model.dtype)).cpu().numpy()
