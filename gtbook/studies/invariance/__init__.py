"""Chapter 1: Gaussian invariance against N-token softmax Transformers."""
