r"""The chapters' studies: one package per chapter, holding its harness and its figures.

* :mod:`gtbook.studies.invariance` (chapter 1): the N-token Transformer against the moment ODE,
  moment-matched non-Gaussian clouds, the softmax layer stack;
* :mod:`gtbook.studies.beyond` (chapter 2): a cloud followed in time, mixtures, ReLU;
* :mod:`gtbook.studies.reachability` (chapter 3): rank invariance along the ODE, steered tokens;
* :mod:`gtbook.studies.stability` (chapter 4): the planar rotating family, regime maps, tokens near a pole;
* :mod:`gtbook.studies.pretrained` (chapter 5): the effect-size criterion for closeness to Gaussian, the paper's
  architectures trained here, clustering;
* :mod:`gtbook.studies.prescribed` (chapter 6): Transformers with prescribed attention matrices;
* :mod:`gtbook.studies.families` (chapter 7): the attention types compared;
* :mod:`gtbook.studies.atlas` (chapter 8): the regime atlas over random draws, and a peer's experiment;
* :mod:`gtbook.studies.learning` (chapter 9): learning to reach a target with trained Transformers.

Each package has a ``harness`` (computations returning result dataclasses) and ``figures`` (the
figures, taking those dataclasses), sharing :mod:`gtbook.studies.style` and the animation player
:mod:`gtbook.studies.animation`; the fits and tests every chapter uses (slopes in N and their standard
errors, Hotelling's test, bands) are the library's, :mod:`gtcore.stats.inference`.
Studies import the library (``gtcore``), which never imports them; they never import the book's
machinery (the rest of :mod:`gtbook`).
"""
