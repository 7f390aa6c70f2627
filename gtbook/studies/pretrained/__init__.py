r"""Chapter 5: pretrained Transformers fed Gaussian tokens; how close to Gaussian the token cloud stays,
layer by layer.

* :mod:`~gtbook.studies.pretrained.criterion`: the registered effect-size criterion (a model layer by
  layer against the Student-t reference, the verdicts, the studies over sizes and modes);
* :mod:`~gtbook.studies.pretrained.effects`: the effect sizes it compares (the three statistics within
  sequences, their Gaussian null, the bootstrap over sequences, the Student-t reference law);
* :mod:`~gtbook.studies.pretrained.training`: the paper's two architectures trained here (a
  DeiT-tiny-configured ViT on scikit-learn's digits, a small ModernBERT with masked-language
  modelling on the standard library's ``pydoc_data`` topics), cached as safetensors;
* :mod:`~gtbook.studies.pretrained.side_by_side`: the two trainings at once, one in a child process;
* :mod:`~gtbook.studies.pretrained.clustering`: pairwise cosine similarities and cluster counts per layer;
* :mod:`~gtbook.studies.pretrained.statistics` and :mod:`~gtbook.studies.pretrained.layer_criteria`: the
  Gaussianity statistics against their noise bands (the earlier criterion; ``gtbook probe``);
* :mod:`~gtbook.studies.pretrained.figures`: the chapter's figures.

The models are loaded and run layer by layer by :mod:`gtcore.models`.
"""
