r"""Chapter 9 (reachability seen from learning): a Transformer trained by gradient descent to Gaussian targets.

* :mod:`~gtbook.studies.learning.harness`: seeded targets, cached trained runs on fresh test pairs, the
  noise floors of N tokens, the slack over the rank floor and its slope in N, the energy comparison with
  chapter 3's controls;
* :mod:`~gtbook.studies.learning.learned_clouds`: what a trained network does to fresh clouds (thickness off the
  start's subspace against N, the attention's sampling strength, the departure from its mean-field limit);
* :mod:`~gtbook.studies.learning.grid`: every network of the chapter trained in one call (``train_grid``),
  with the tables, figures and numbers the chapter reads from it;
* :mod:`~gtbook.studies.learning.figures`: the chapter's figures, taking those results;
* :mod:`~gtbook.studies.learning.statistics`: the measurements and noise floors, computed without the trainer's
  code.

The trainer itself is core numerics: :mod:`gtcore.training`.
"""

from gtbook.studies.learning.grid import Escape, LearningGrid, against, band, run_seed, train_grid
from gtbook.studies.learning.harness import TrainingSettings, random_targets

__all__ = ["Escape", "LearningGrid", "TrainingSettings", "against", "band", "random_targets", "run_seed", "train_grid"]
