"""Chapter 4: regimes of constant controls, and tokens near a pole."""
