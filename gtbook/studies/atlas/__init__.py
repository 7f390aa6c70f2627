r"""Chapter 8: an atlas of regimes.

* :mod:`~gtbook.studies.atlas.outcomes`: each layer's long-time outcome (equilibrium, lower-rank limit,
  collapse, finite-time blow-up, exponential growth, other), decided by stated tests on the covariance equation
  of many layers at once (:class:`gtcore.moments.batched.LaneStack`, through the attention registry);
* :mod:`~gtbook.studies.atlas.ensembles`: seeded draws (the peers' experiment, the condition ensembles);
* :mod:`~gtbook.studies.atlas.peer`: the peers' projected-Euler scheme and the exact rank of the limit;
* :mod:`~gtbook.studies.atlas.maps` and :mod:`~gtbook.studies.atlas.explorer`: the wider regime map and its
  offline explorer;
* :mod:`~gtbook.studies.atlas.sweep`: the sweep on Dask, chunked, written as it goes, resumable;
* :mod:`~gtbook.studies.atlas.tables` and :mod:`~gtbook.studies.atlas.figures`: the chapter's tables,
  binomial intervals and figures.
"""
