r"""The chapters' studies: one package per chapter, holding its harness and its figures.

* :mod:`gtcore.studies.invariance` (chapter 1): the N-token Transformer against the moment ODE,
  moment-matched non-Gaussian clouds, the softmax layer stack;
* :mod:`gtcore.studies.beyond` (chapter 2): a cloud followed in time, mixtures, ReLU;
* :mod:`gtcore.studies.reachability` (chapter 3): rank invariance along the ODE, steered tokens;
* :mod:`gtcore.studies.stability` (chapter 4): the planar rotating family, regime maps, tokens near a pole;
* :mod:`gtcore.studies.pretrained` (chapter 5): the effect-size criterion for closeness to Gaussian, the paper's
  architectures trained here, clustering;
* :mod:`gtcore.studies.prescribed` (chapter 6): Transformers with prescribed attention matrices;
* :mod:`gtcore.studies.families` (chapter 7): the attention types compared.

Each package has a ``harness`` (computations returning result dataclasses) and ``figures`` (the
figures, taking those dataclasses), sharing :mod:`gtcore.studies.style` and the animation player
:mod:`gtcore.studies.animation`; :mod:`gtcore.studies.fits` holds the fits every chapter uses.
Studies import the core (``gtcore``); the core never imports them, and they never import the book's
machinery (:mod:`gtcore.book`).
"""
