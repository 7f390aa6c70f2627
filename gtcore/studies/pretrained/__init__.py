"""Chapter 5: pretrained Transformers fed Gaussian tokens."""
