"""The finite-N studies' precision policy (a choice of the chapters, not of the core integrator)."""

#: the softmax kernel's precision in the finite-N studies (mean-field errors, pole study, softmax stacks,
#: Gaussianity paths): float32 halves their time, and its round-off in the attention average (about
#: 1e-7 relative per evaluation, measured against float64) is four or more orders of magnitude below the
#: sampling fluctuations of N <= 10^4 tokens (N^-1/2 >= 1e-2) that those studies measure. Tokens, the
#: integrator and the moments stay in float64. Pass ``kernel_dtype=None`` to a study for float64 throughout.
STUDY_KERNEL_DTYPE = "float32"
