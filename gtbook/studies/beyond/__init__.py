"""Chapter 2: beyond invariance: a cloud in time, mixtures, ReLU."""
