r"""Chapter 8: an atlas of regimes.

* :mod:`~gtcore.studies.atlas.drift`: the covariance equation of many layers at once, per attention type;
* :mod:`~gtcore.studies.atlas.regimes`: each layer's long-time outcome (equilibrium, lower-rank limit,
  collapse, finite-time blow-up, exponential growth, other), decided by stated tests;
* :mod:`~gtcore.studies.atlas.ensembles`: seeded draws (the peers' experiment, the condition ensembles);
* :mod:`~gtcore.studies.atlas.peer`: the peers' projected-Euler scheme and the exact rank of the limit;
* :mod:`~gtcore.studies.atlas.maps` and :mod:`~gtcore.studies.atlas.explorer`: the wider regime map and its
  offline explorer;
* :mod:`~gtcore.studies.atlas.sweep`: the sweep on Dask, chunked, written as it goes, resumable;
* :mod:`~gtcore.studies.atlas.tables` and :mod:`~gtcore.studies.atlas.figures`: the chapter's tables,
  binomial intervals and figures.
"""
