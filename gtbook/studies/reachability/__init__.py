"""Chapter 3: rank invariance and reachability on tokens."""
