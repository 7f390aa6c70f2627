"""Chapter 6: Transformers with prescribed attention matrices."""
