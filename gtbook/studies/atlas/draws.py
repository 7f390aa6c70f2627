r"""One seeded draw of the atlas: a small, picklable record from which its layer is rebuilt exactly.

A :class:`Draw` names its ensemble, attention type, dimension, index and seed; its generator
``np.random.default_rng([seed, ensemble, attention, variant, d, index])`` does not depend on which other draws
are computed with it, in which chunk or on which machine. :func:`gtbook.studies.atlas.ensembles.draw_controls`
rebuilds the layer (the condition ensembles and the peers' experiment there, the regime map's points in
:mod:`~gtbook.studies.atlas.maps`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Draw"]

_CODES = {"peer": 1, "conditions": 2, "map": 3}
_ATT_CODES = {"dot": 0, "multihead": 1, "l2": 2, "sinkhorn": 3}


@dataclass(frozen=True)
class Draw:
    """One seeded draw: enough to rebuild its layer exactly (:func:`~gtbook.studies.atlas.ensembles.draw_controls`).

    Attributes
    ----------
    ensemble : "peer", "conditions" or "map"
    attention : "dot", "multihead", "l2" or "sinkhorn"
    d : dimension
    index : the draw's number within its (ensemble, attention, d, variant)
    seed : the study's seed
    variant : for "peer", "identity" or "wishart"; for "map", the map's parameters as a tuple
    """

    ensemble: str
    attention: str
    d: int
    index: int
    seed: int = 0
    variant: str | tuple = ""
    key: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.ensemble not in _CODES:
            raise ValueError(f"ensemble must be one of {sorted(_CODES)}, got {self.ensemble!r}")
        if self.attention not in _ATT_CODES:
            raise ValueError(f"attention must be one of {sorted(_ATT_CODES)}, got {self.attention!r}")
        if not (isinstance(self.d, int) and self.d >= 1):
            raise ValueError(f"d must be a positive integer, got {self.d!r}")
        object.__setattr__(self, "key", f"{self.ensemble}/{self.attention}/{self.variant}/d{self.d}/{self.index}")

    def rng(self) -> np.random.Generator:
        """The draw's own generator."""
        var = (
            {"": 0, "identity": 0, "wishart": 1, "stab": 3, "blow": 4}.get(self.variant, 2)
            if isinstance(self.variant, str)
            else 2
        )
        return np.random.default_rng(
            [self.seed, _CODES[self.ensemble], _ATT_CODES[self.attention], var, self.d, self.index]
        )
