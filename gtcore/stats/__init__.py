r"""Statistics of token clouds: Gaussian samples, Gaussianity statistics and their noise floors, mixtures.

* :mod:`~gtcore.stats.sampling`: i.i.d. Gaussian tokens;
* :mod:`~gtcore.stats.gaussianity`: moments, Bures–Wasserstein distance, sliced :math:`W_2`, Mardia's
  statistics, per-coordinate kurtosis, and the noise floor of each under true Gaussian samples;
* :mod:`~gtcore.stats.mixtures`: Gaussian mixtures and per-component statistics;
* :mod:`~gtcore.stats.inference`: fitted slopes in N and their bootstrap standard errors, Hotelling's test of
  signed deviations, the null of an ensemble mean, binomial and normal bands.
"""
