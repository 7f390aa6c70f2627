# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 1. Gaussian invariance
#
# A softmax Transformer of $N$ tokens approaches the exact Gaussian layer map at a rate consistent with
# $N^{-1/2}$ (pooled slope {glue:text}`ens_slope:.2f` over ten general layers in $d = 3$), and its map of a
# Gaussian cloud approaches an affine one at that rate ({glue:text}`aff_slope:.2f`), while a uniform cloud with
# the same two moments does not ({numref}`fig-ensemble`); in the $d = 2$ example the cloud stays inside the 99%
# band of Gaussian samples of its size, and the moment error falls like $N^{-1/2}$ only while the softmax
# weights have finite variance.
#
# The paper's first result is the reduction that makes everything else possible
# {cite}`alcalde2026gaussian`: for the mean-field Transformer with self-attention and an affine
# feed-forward layer, a Gaussian input stays Gaussian, and the measure equation reduces to the ODE
# (1.1) for the mean and covariance,
#
# $$
# \mu' = (A + V)\mu + V\Sigma B\mu + b, \qquad
# \Sigma' = A\Sigma + \Sigma A^\top + V\Sigma B\Sigma + \Sigma B^\top\Sigma V^\top .
# $$
#
# The reason is one line: against $N(\mu,\Sigma)$ the attention average
# $\int y\,e^{y^\top Bx}\,d\rho(y) / \int e^{y^\top Bx}\,d\rho(y) = \mu + \Sigma Bx$ is affine in $x$, so
# the velocity field is affine and its flow maps Gaussians to Gaussians.
#
# The statement is about the mean-field limit. A real Transformer moves finitely many tokens, and its
# attention is a softmax over them. This chapter checks the reduction against such a Transformer:
# (a) the token cloud follows the ODE's ellipses; (b) the moment error shrinks like $N^{-1/2}$ when
# attention is weak, and more slowly when it is strong (this book's analysis, not the paper's);
# (c) a residual Transformer of 12 layers with softmax attention approaches the exact Gaussian layer
# map as $N$ grows, and does not for a non-Gaussian cloud with the same moments; (d) under attention
# strong enough for a failure to show, the cloud stays as Gaussian as a true Gaussian sample, while the
# same statistic rejects a flow that breaks Gaussianity; (e) (c) and (d) again over seeded ensembles of
# general layers in $d = 3$ (non-zero $A$, non-scalar $V$, non-symmetric $B$), since the statements hold for
# every layer, not only for the $d = 2$, $V = vI$ examples of (a)–(d).

# %% tags=["parameters"]
seed = 0
mu0 = [0.5, -0.3]
Sigma0 = [[1.0, 0.4], [0.4, 0.7]]
A = [[0.2, 0.6], [-0.6, 0.1]]
b = [0.3, 0.0]
v = 0.5
B_weak = [[-0.3, 0.1], [0.0, -0.2]]
B_strong = [[-1.5, 0.3], [0.2, -1.2]]
B_mid = [[-0.65, 0.1], [0.1, -0.5]]
T = 1.0
n_tokens = 6000
steps = 20
Ns = [250, 500, 1000, 2000, 4000]
n_seeds = 12
study_steps = 8
n_layers = 12
noise_repeats = 200
stack_Ns = [250, 500, 1000, 2000, 4000]
stack_seeds = 24
ens_draws = 10
ens_Ns = [250, 500, 1000, 2000, 4000]
ens_seeds = 6
ens_tokens = 4000
seeds = {"ens_draw": 2211, "ens_stack": 2212, "ens_flow": 2213, "ens_null": 2214, "ens_boot": 2215,
         "aff_draw": 2216, "aff_stack": 2217, "aff_boot": 2218, "strength": 2271}

# %%
import numpy as np

from gtbook import claim
from gtbook.glue import glue
from gtbook.studies.invariance import (
    ensemble_study,
    excursion,
    figures,
    finite_n_rates,
    gaussianity_study,
    layer_map_check,
    stack_rates,
    strength_draws,
)
from gtcore import Controls, gaussian_tokens, integrate_moments
from gtcore.particles import simulate

weak = Controls(A=A, b=b, V=v * np.eye(2), B=B_weak)
strong = Controls(A=A, b=b, V=v * np.eye(2), B=B_strong)
mid = Controls(A=A, b=b, V=v * np.eye(2), B=B_mid)
x0 = gaussian_tokens(n_tokens, mu0, Sigma0, seed)

# %% [markdown]
# ## (a) Tokens follow the moment ODE
#
# $N$ tokens drawn from $N(\mu_0, \Sigma_0)$ are moved by the Transformer with softmax attention over
# the tokens (RK4 in time). Over them we draw the 1σ and 2σ ellipses of the Gaussian whose moments
# solve eq. (1.1).

# %% mystnb={"figure": {"name": "fig-cloud", "caption": "Tokens (dots) moved by the softmax Transformer, at three times, with the 1σ and 2σ ellipses of the Gaussian whose moments solve eq. (1.1)."}, "image": {"alt": "Three scatter plots of a two-dimensional token cloud at increasing times; in each, two nested ellipses drawn from the moment ODE cover the cloud and move with it."}}
cloud = simulate(x0, weak, (0, T), steps, keep_tokens=True)  # every step: the animation below plays them all
ode = integrate_moments(mu0, Sigma0, weak, (0, T), t_eval=cloud.t)
show = slice(None, None, steps // 2)  # t = 0, T/2, T
figures.cloud_with_ellipses(cloud.tokens[show], cloud.t[show], ode.mu[show], ode.Sigma[show]);

# %% [markdown]
# *What to look at* in {numref}`fig-cloud`: the cloud rotates, stretches and drifts, and the ellipses of the ODE
# move with it at every time. {numref}`anim-cloud`, in the collapsed output below, plays the same run at every one
# of its `steps` integrator steps (press play or drag the slider).

# %% tags=["hide-output"] mystnb={"figure": {"name": "anim-cloud", "caption": "The tokens (dots, a fixed subset) moved by the softmax Transformer, integrator step by integrator step, and the $2\\sigma$ ellipse of the Gaussian whose moments solve eq. (1.1)."}}
figures.ode_animation(cloud, ode, alt="Animation of a two-dimensional token cloud over time: the cloud turns, "
                      "stretches and drifts, and an ellipse computed from the moment ODE moves with it, "
                      "covering it at every frame.")

# %% [markdown]
# ## (b) Moment error against the number of tokens
#
# The softmax over $N$ tokens is a self-normalised importance-sampling estimate of $\mu + \Sigma Bx$
# with weights $e^{y^\top Bx}$. Its variance for a query $x$ grows like $e^{x^\top B^\top\Sigma Bx}$, and
# averaged over $x \sim N(\mu, \Sigma)$ it is finite exactly when
# $\kappa = \lambda_{\max}(B^\top\Sigma B\Sigma) < \tfrac12$ (a Gaussian integral of
# $e^{z^\top M z}$ with $M$ similar to $B^\top\Sigma B\Sigma$). With $\kappa$ below $\tfrac12$ along the
# trajectory, the central limit theorem gives errors of order $N^{-1/2}$; above it, rare tokens in the
# tail dominate their softmax and the error decays more slowly at any practical $N$.
#
# ```{dropdown} What is measured, and the thresholds
# *What is measured.* For each $N$ and seed, the tokens' moments at $T$ are compared with the moment
# ODE started from **that cloud's own moments** $(\hat\mu(0), \hat\Sigma(0))$: the initial sampling
# error (which shrinks like $N^{-1/2}$ for any law and would make the rate hold by construction)
# cancels, and what is left is the *dynamic* error, the finite-$N$ softmax's own
# ({py:func}`~gtbook.studies.invariance.finite_n_rates`).
#
# *Thresholds, fixed before the run.* SE is the bootstrap standard error of a fitted slope (seeds
# resampled within each $N$, 2000 resamples). The weak setting's slope must lie within
# $3\,\mathrm{SE}$ of $-\tfrac12$ (a 99.7% band set by the seed-to-seed scatter). The strong setting is
# slower when its slope exceeds the weak one's by more than three standard errors of the difference
# (the two settings move the same seeded samples, so the difference is bootstrapped with one set of
# resampled seeds for both).
# ```

# %% mystnb={"figure": {"name": "fig-error-n", "caption": "Relative moment error of the token cloud against the number of tokens $N$, for weak and strong attention, with the $N^{-1/2}$ reference line. Error bars: standard errors over the seeds."}, "image": {"alt": "Log-log plot of moment error against the number of tokens: the weak-attention curve falls parallel to a reference line of slope minus one half; the strong-attention curve falls more slowly."}}
rates = finite_n_rates(mu0, Sigma0, weak, strong, T, Ns, n_seeds, study_steps, seed=seed)
rates.figure();

# %% [markdown]
# *What to look at* in {numref}`fig-error-n`: the fitted slopes are {glue:text}`weak_slope:.2f`
# (SE {glue:text}`weak_se:.2f`) in the weak setting ($\kappa < \tfrac12$) and {glue:text}`strong_slope:.2f`
# (SE {glue:text}`strong_se:.2f`) in the strong one ($\kappa > \tfrac12$); error bars are standard errors
# over the seeds. The claims below say whether the weak slope is within its band and whether the strong
# one is measurably flatter. The threshold $\kappa = \tfrac12$ and the $N^{-1/2}$ rate below it are this
# book's analysis (the statement `beyond_finite_n`), not a result of the paper; the paper's statement is
# the limit $N \to \infty$ itself, tested in (c), (d) and (e).

# %% tags=["hide-input"]
S2 = dict(system="tokens", d=2, A="general", B="general", V="scalar")  # A non-normal, B_weak non-symmetric, V = vI
glue("weak_slope", rates.weak.slope)
glue("strong_slope", rates.strong.slope)
glue("weak_se", rates.se_weak)
glue("strong_se", rates.se_strong)
glue("diff_se", rates.se_diff)
claim("weak_attention_kappa", rates.weak.kappa, lt=0.5, statement="beyond_finite_n", kind="consistency",
      scope=dict(S2, system="moment ODE"))
claim("weak_attention_slope", rates.weak.slope, gt=-0.5 - 3 * rates.se_weak, lt=-0.5 + 3 * rates.se_weak,
      statement="beyond_finite_n", kind="reproduces", scope=S2, sides=rates.weak.sides)
claim("strong_attention_kappa", rates.strong.kappa, gt=0.5, statement="beyond_finite_n", kind="consistency",
      scope=dict(S2, system="moment ODE"))
claim("strong_is_slower", rates.strong.slope - rates.weak.slope, gt=3 * rates.se_diff,
      statement="beyond_finite_n", kind="reproduces", scope=S2, sides=rates.sides)

# %% [markdown]
# A derivation check of $\kappa$ itself, against the supremum it stands for, is in the collapsed output below.
#
# ```{dropdown} What the check of $\kappa$ does, and its threshold
# The threshold's derivation says what $\kappa$ *is*: the weights $e^{y^\top Bx}$ have relative second moment
# $e^{x^\top B^\top\Sigma Bx}$ over the tokens, and its average over Gaussian queries is finite iff
# $\sup_x x^\top B^\top\Sigma Bx / x^\top\Sigma^{-1}x < \tfrac12$. So the closed form the library uses is checked
# against that supremum, maximised directly (random directions, then BFGS;
# {py:mod}`gtbook.studies.invariance.strength`), over 10 seeded draws in $d = 3$ with a non-symmetric (Ginibre)
# $B$ and a random $\Sigma$. *Threshold*: $10^{-8}$ relative, the accuracy of a smooth maximum found by BFGS to
# gradient tolerance $10^{-13}$ (the error in the value is quadratic in the error in the maximiser). A
# derivation check.
# ```

# %% tags=["hide-input", "hide-output"]
strength = strength_draws(10, 3, seed=seeds["strength"])
glue("strength_err", strength.max_relative_error)
claim("kappa = lambda_max(B^T Sigma B Sigma) is the sup of the weights' variance exponent (non-symmetric B; "
      "largest relative error over draws)", strength.max_relative_error, lt=1e-8,
      statement="beyond_finite_n", kind="derivation", scope=dict(system="closed form", d=3))

# %% [markdown]
# ## (c) A 12-layer Transformer and the exact layer map
#
# A residual layer $x \mapsto x + h\,v(x)$ maps $N(\mu, \Sigma)$ to $N(\mu + h\mu', M\Sigma M^\top)$ with
# $M = I + h(A + V\Sigma B)$. Two checks of different nature: a consistency check that stacking 12 such layers
# with the Gaussian attention average is `layer_stack` to round-off, and a reproduction that the softmax stack
# approaches it like $N^{-1/2}$, against a moment-matched uniform control.
#
# ```{dropdown} The two checks, the control and the threshold
# *Consistency.* Stacking 12 such layers on the tokens with the attention average evaluated against the
# Gaussian with the cloud's moments is the same affine algebra as `layer_stack`: it must agree to
# round-off. This checks the code, not the paper.
#
# *Reproduction.* With softmax attention over the $N$ tokens, the stack is what a Transformer computes,
# and it approaches the layer map only because the softmax over a Gaussian sample estimates the
# Gaussian attention average $\hat\mu + \hat\Sigma Bx$. We start `layer_stack` from each sample's own
# moments (so the initial sampling error cancels) and measure the error after the last layer,
# $\|\hat\mu_L - \mu_L\| + \|\hat\Sigma_L - \Sigma_L\|_F$, over `stack_seeds` samples for each $N$ in `stack_Ns`
# (weak attention, $\kappa < \tfrac12$). Expanding the softmax average in $q = Bx$, it is
# $\hat\mu + \hat\Sigma q + \tfrac12\hat\kappa_3[q, q] + \dots$ with the sample's third (and higher)
# cumulants, which vanish like $N^{-1/2}$ for a Gaussian sample: the error should fall like $N^{-1/2}$.
# For a non-Gaussian law with the same two moments those cumulants do not vanish, and the error
# levels off. The **control** is that law: tokens uniform on a box, moment-matched to
# $(\mu_0, \Sigma_0)$, through the same stack (8 samples per $N$: a plateau needs few).
#
# *Threshold.* The fitted slope must lie within $3\,\mathrm{SE}$ of $-\tfrac12$, where SE is the bootstrap
# standard error of the fitted slope (seeds resampled within each $N$, 2000 resamples): a 99.7%
# band set by the seed-to-seed scatter. The control's slope must lie above that band's upper edge.
# ```
#
# {numref}`fig-layers`, the layer-by-layer discrepancy, is in the collapsed output below.

# %% tags=["hide-output"] mystnb={"figure": {"name": "fig-layers", "caption": "Moment discrepancy, layer by layer, between 12 residual layers applied to the tokens and the exact layer map `layer_stack`."}, "image": {"alt": "Two curves of relative moment discrepancy over 12 layers on a log scale: Gaussian attention on the tokens stays at round-off, softmax attention over the tokens sits at the sampling error."}}
layers = layer_map_check(x0, weak, T, n_layers)
layers.figure();

# %% tags=["hide-input"]
claim("discrete_layers_exact", layers.gaussian.max(), lt=1e-10, statement="reduction", kind="consistency",
      scope=dict(S2, system="moment ODE"))

# %% [markdown]
# *What to look at* in {numref}`fig-layers`: the first curve sits at round-off ($10^{-15}$): with the Gaussian
# attention average the discrete Transformer and the layer map are the same computation. The second is the
# softmax's error at this $N$; how it depends on $N$ is {numref}`fig-stack-n`.

# %% mystnb={"figure": {"name": "fig-stack-n", "caption": "Error of the 12-layer softmax stack against the exact layer map after the last layer, against $N$: Gaussian tokens and the moment-matched uniform control, with the $N^{-1/2}$ reference."}, "image": {"alt": "Log-log plot of the stack's moment error against the number of tokens: the Gaussian-token curve falls parallel to a reference line of slope minus one half, the uniform-token curve stays flat."}}
stacks = stack_rates(mu0, Sigma0, weak, T, n_layers, stack_Ns, stack_seeds, seed=seed)
stacks.figure();

# %% tags=["hide-output"]
stacks.table()

# %% [markdown]
# *What to look at* in {numref}`fig-stack-n`: the Gaussian cloud's error runs parallel to the $N^{-1/2}$ line; the
# uniform cloud's error stays flat: the softmax over it estimates its own tilted mean, which is not
# $\mu + \Sigma Bx$. The fitted slopes, their standard errors and the band are in the collapsed output above.

# %% tags=["hide-input"]
claim("softmax 12-layer stack vs layer_stack: log-log slope in N", stacks.gaussian.slope,
      gt=stacks.band[0], lt=stacks.band[1], statement="reduction", kind="reproduces", scope=S2,
      sides=stacks.gaussian.sides)
claim("uniform tokens (same moments): softmax stack slope above the band", stacks.uniform.slope,
      gt=stacks.band[1], statement="reduction", kind="control", scope=S2)

# %% [markdown]
# ## (d) The cloud stays as Gaussian as a Gaussian sample
#
# Two affine-invariant statistics of the cloud: the sliced $W_2$ distance to its moment-matched
# Gaussian (each projection standardised) and Mardia's kurtosis $b_{2,d}$ {cite}`mardia1970measures`.
# The grey band is the central 99% of each statistic over `noise_repeats` true Gaussian samples of
# the same size and dimension: the noise floor. A cloud that stays Gaussian stays in the band.
#
# ```{dropdown} Why strong attention, the control, the checks of the statistics and the thresholds
# Because both statistics are affine invariant, a nearly affine flow cannot move them: the test only
# has power where the attention field is far from affine on any law but a Gaussian. We therefore use
# attention as strong as the finite-variance regime allows, $B_{\rm mid}$ with $\kappa \approx 0.44$
# (the tilt $\Sigma Bx$ moves by about two thirds of a standard deviation per standard deviation of
# the query), and also the strong head $B_{\rm strong}$ of (b), $\kappa > \tfrac12$. What we expect,
# written before running: with $\kappa < \tfrac12$ the $N$-token softmax is a finite-variance estimate of
# the Gaussian average and the cloud should stay in the band; with $\kappa > \tfrac12$ a few tail tokens
# dominate the softmax of the queries far out, the finite-$N$ velocity field is not affine there, and
# the cloud may leave the band at this $N$, although the mean-field statement (which is about
# $N \to \infty$) is untouched.
#
# **The control** is a flow that breaks Gaussianity, seen by the same statistic: the same tokens under the same
# $B_{\rm mid}$ layer plus a ReLU block $g\,\mathrm{relu}(x - \mu_0)$ ($g = 0.5$, the kink through the input's
# mean in each coordinate, `ff="relu"`), which pushes the tokens on one side of each kink outward and leaves the
# others: its sliced $W_2$ at $T$ must be outside the band. **Checks of the statistics** (same $N$, same band):
# static clouds with exactly the first two moments $(\mu_0, \Sigma_0)$ of the input but another law (uniform on
# a box, an elliptical Student-$t$ with 5 degrees of freedom, a two-component Gaussian mixture with separation
# 0.9) must fall outside the band of both statistics. They show that the band is narrow enough to see a
# non-Gaussian law at this $N$, a property of the book's instrument, not of the paper's flow: they count for no
# statement.
#
# *Thresholds* (fixed before looking): the reproduction passes when the sliced $W_2$ lies inside the 99%
# band at every recorded time (claim value: the largest excursion outside the band, negative when
# inside); the control and the checks of the statistics pass when their excursion is positive. Mardia's
# kurtosis is shown, not claimed for the flow: no flow that it is shown to detect accompanies it here.
# ```
#
# The claims' outcomes, and both statistics at $T$ for every flow and law with the band, are in the collapsed
# outputs below the figure.

# %% mystnb={"figure": {"name": "fig-gaussianity", "caption": "Sliced W2 and Mardia kurtosis of the token cloud over time, inside the 99% noise band of true Gaussian samples, with moment-matched non-Gaussian samples marked as controls."}, "image": {"alt": "Panels of two Gaussianity statistics against time: the cloud's curves stay inside a grey band while the non-Gaussian control markers lie outside it."}}
gauss = gaussianity_study(x0, mu0, Sigma0, {"B_mid": mid, "B_strong": strong}, T, steps, noise_repeats=noise_repeats,
                          seed=seed)
gauss.figure();

# %% tags=["hide-input", "hide-output"]
S2_mid = dict(S2, B="symmetric")  # B_mid is symmetric
mid, mid_stats = next(iter(gauss.flows.items()))
claim("B_mid: sliced W2 inside the noise band at every time", excursion(mid_stats["sliced W2"], gauss.bands["sliced W2"]),
      lt=0.0, statement="invariance", kind="reproduces", scope=S2_mid, sides=gauss.sides[mid])
claim("B_mid + ReLU block (flow control): sliced W2 at T outside the noise band",
      excursion(gauss.relu_w2, gauss.bands["sliced W2"]), gt=0.0, statement="invariance", kind="control",
      scope=S2_mid)
for name, band in gauss.bands.items():
    for law, vals in gauss.controls.items():
        claim(f"{law}, same moments: {name} outside the noise band", excursion(vals[name], band), gt=0.0,
              statement=None, kind="instrument", scope="instrument")

# %% tags=["hide-output"]
gauss.table()

# %% [markdown]
# *What to look at* in {numref}`fig-gaussianity`: under $B_{\rm mid}$ the sliced $W_2$ stays inside the band at every
# recorded time (and so, unclaimed, does Mardia's kurtosis), although the attention tilts each query's average by two
# thirds of a standard deviation per standard deviation; the three moment-matched non-Gaussian clouds lie far outside
# it at this $N$, and so does the same flow with the ReLU block (the collapsed table above), so the band is not too
# wide to see a non-Gaussian law or a flow that breaks Gaussianity. Under $B_{\rm strong}$ ($\kappa > \tfrac12$) the
# finite cloud's sliced $W_2$ drifts out of the band as time goes on (the collapsed table above gives both statistics
# at $T$; Mardia's kurtosis, which weighs the far tail differently, moves up but need not leave): at this $N$ the
# softmax of the queries far out is dominated by a handful of tokens, and the cloud is no longer a Gaussian sample.
# That is a finite-$N$ effect (the attention average it estimates has infinite variance), not a failure of the
# mean-field statement, and it is why (b) sees the error decay more slowly than $N^{-1/2}$ in that regime. We record
# it as a finding, not a claim: we did not predict at which $N$ it would show.

# %% [markdown]
# ## (e) Over general parameters
#
# The worked examples above have $d = 2$ and $V = vI$. The reduction and the invariance are statements about every
# layer, so we test them again over seeded ensembles of `ens_draws` layers in $d = 3$
# ({py:func}`~gtbook.studies.invariance.ensemble.general_draws`): $A, V, B$ with i.i.d. Gaussian entries (a non-zero
# $A$, a non-scalar $V$, a non-symmetric $B$: a transposed tilt $\Sigma B^\top x$ or a value map applied as $V^\top$
# would change every result), a random mean and an anisotropic full-rank $\Sigma_0$ scaled to a chosen sampling
# strength $\kappa$ at $t = 0$. The $N^{-1/2}$ rate is predicted only while the softmax weights have finite variance,
# so a draw is used only if $\kappa$ stays below a cap along its moment ODE on $[0, T]$: a property of the layer and
# its Gaussian input, decided before any token moves, never of a claim's outcome. Every draw the generator made is
# counted in the census, collapsed below the figure (kept, or $\kappa$ above the cap, or the moment ODE did not
# complete). The 12-layer softmax stack of (c) runs on each draw, for $N$ in `ens_Ns`, `ens_seeds` samples per $N$; a
# statistic's rate is one log–log slope pooled over the draws (one intercept per draw), and SE its bootstrap standard
# error (seeds resampled within each draw and $N$) ({py:func}`~gtbook.studies.invariance.ensemble_study`).
#
# ```{dropdown} The two ensembles: statistics, thresholds and controls
# * **Reduction** (the ensemble at $\kappa = 0.25$, cap $0.45$). The stack's moment error against
#   the exact layer map from each sample's own moments, as in (c). *Threshold, fixed before the run*: the
#   slope within $3\,\mathrm{SE}$ of $-\tfrac12$; control: the same draws with tokens uniform on a box,
#   moment-matched (2 samples per $N$), slope above the band's upper edge.
# * **Invariance** (a second ensemble, $\kappa = 0.1$, cap $0.2$). The invariance rests on the
#   attention average against a Gaussian being affine in the query, so that the flow map of a Gaussian
#   cloud is affine and its image Gaussian. The statistic is how far each sample's map through the stack
#   is from affine: the relative residual of the least-squares affine fit of the final tokens on the
#   initial ones (`nonaffine_residual`). The finite-$N$ softmax fluctuates around the affine average by
#   $O(N^{-1/2})$, so the residual should fall like $N^{-1/2}$; against a law whose average is not affine
#   it levels off. *Threshold, fixed before the run on these seeds*: the slope within $3\,\mathrm{SE}$ of
#   $-\tfrac12$; control: uniform tokens, slope above the band's upper edge. The cap is lower here because the
#   residual is a mean of *squared* per-token errors, whose spread needs the fourth moment of the softmax
#   weights, finite only while $\kappa < \tfrac14$.
# ```
#
# The right panel of {numref}`fig-ensemble` is a finding, not a claim: the sliced $W_2$ of each first-ensemble
# draw's cloud of `ens_tokens` tokens after the flow to $T$, beside the null of Gaussian samples of that size
# (how it came to be a finding is in the last section).

# %% mystnb={"figure": {"name": "fig-ensemble", "caption": "The chapter's statements over ensembles of general layers in $d = 3$. Left: each draw's 12-layer stack moment error (first ensemble), middle: the non-affine residual of each sample's map through the stack (second ensemble, weaker attention), both relative to their value at the smallest $N$, against $N$, for Gaussian tokens and the moment-matched uniform control, with the $N^{-1/2}$ reference. Right (a finding, not a claim): each draw's sliced $W_2$ at $T$ in the first ensemble (flow, and flow plus a ReLU block), their means (bars), the null values of Gaussian samples and the 99% quantile of the null's ensemble mean (dashed)."}, "image": {"alt": "Left and middle: two bundles of thin lines on log-log axes, the Gaussian bundles falling parallel to a dashed line of slope minus one half and the uniform bundles flat. Right: dots for the flow near the top of a cloud of grey null dots, one of them above it, and dots for the ReLU control well above a dashed line."}}
ens = ensemble_study(ens_draws, 3, T, n_layers, ens_Ns, ens_seeds, ens_tokens, seeds_of=seeds)
ens.figure();

# %% tags=["hide-output"]
{"first ensemble (kappa cap 0.45)": ens.census.table(), "second ensemble (kappa cap 0.2)": ens.weak_census.table()}

# %% tags=["hide-input"]
S3 = dict(system="tokens", d=3)  # general A, B, V
for key, value in ens.summary().items():
    glue(key, value)
glue("ens_tries", ens.census.tries)
glue("aff_tries", ens.weak_census.tries)
claim(f"ensemble of {ens_draws} general layers (d=3): pooled slope of the softmax stack error", ens.gauss.slope,
      gt=-0.5 - 3 * ens.se, lt=-0.5 + 3 * ens.se, statement="reduction", kind="reproduces", scope=S3,
      sides=ens.sides)
claim("ensemble, uniform tokens (same moments): pooled stack slope above the band", ens.uniform.slope,
      gt=-0.5 + 3 * ens.se, statement="reduction", kind="control", scope=S3)
claim(f"second ensemble of {ens_draws} general layers (kappa < 0.2): pooled slope of the stack map's "
      "non-affine residual", ens.weak_gauss.nonaffine_slope, gt=-0.5 - 3 * ens.weak_se, lt=-0.5 + 3 * ens.weak_se,
      statement="invariance", kind="reproduces", scope=S3, sides=ens.nonaffine_sides)
claim("second ensemble, uniform tokens (same moments): non-affine residual slope above the band",
      ens.weak_uniform.nonaffine_slope, gt=-0.5 + 3 * ens.weak_se, statement="invariance", kind="control", scope=S3)

# %% [markdown]
# In {numref}`fig-ensemble`, left, the pooled slope of the moment error over the first ensemble is
# {glue:text}`ens_slope:.2f` (SE {glue:text}`ens_se:.2f`; the largest $\kappa$ along a path
# {glue:text}`ens_kappa_max:.2f`), the uniform control's {glue:text}`ens_uniform_slope:.2f`. Middle: the non-affine
# residual's slope over the second ensemble is {glue:text}`aff_slope:.2f` (SE {glue:text}`aff_se:.2f`; largest
# $\kappa$ {glue:text}`aff_kappa_max:.2f`), the uniform control's {glue:text}`aff_uniform_slope:.2f`. The census
# (collapsed above) counts every draw: the first ensemble's ten layers are the first ten of {glue:text}`ens_tries`
# draws, the others reaching the cap on $\kappa$ along their moment ODE; the second's, of {glue:text}`aff_tries`. The
# rejected draws are general layers at an input scale where the softmax weights have infinite variance, where (b)
# shows the rate to be slower than $N^{-1/2}$; they are not counterexamples to the mean-field statement, and the
# claims say nothing about them. On the first ensemble the residual's slope is {glue:text}`ens_affine_slope:.2f` (a
# bootstrap SE of {glue:text}`ens_affine_se:.2f`, which the heavy tail makes unreliable); right, the flow's mean
# sliced $W_2$ over the draws is {glue:text}`ens_flow_mean:.4f` against the null's 99% quantile
# {glue:text}`ens_q:.4f` (null mean {glue:text}`ens_null_mean:.4f`, standard deviation of one value
# {glue:text}`ens_null_sd:.4f`; the largest single draw {glue:text}`ens_worst_draw:.4f`), and with the ReLU block
# {glue:text}`ens_relu_mean:.4f`.
#
# ## What we saw
#
# What the claims establish. The moment error of a softmax Transformer against the moment ODE, measured
# from each cloud's own moments, falls with $N$ at a rate consistent with $N^{-1/2}$ when $\kappa < \tfrac12$
# (slope {glue:text}`weak_slope:.2f`, within three bootstrap SE of $-\tfrac12$), and measurably more slowly
# when $\kappa > \tfrac12$ (this book's analysis, beyond the paper). A 12-layer residual stack with softmax
# attention approaches the exact Gaussian layer map at a rate consistent with $N^{-1/2}$, in the $d = 2$
# example and pooled over ten general layers in $d = 3$ (non-zero $A$, non-scalar $V$, non-symmetric $B$,
# $\kappa < 0.45$ along the path); a uniform cloud with the same two moments does not approach it. Over ten
# general layers with weaker attention ($\kappa < 0.2$), the map of a Gaussian cloud through the stack approaches
# an affine map at a rate consistent with $N^{-1/2}$, and that of a uniform cloud does not: the mechanism of the
# invariance, seen on tokens. In the $d = 2$ example with $\kappa \approx 0.44$ the cloud's sliced $W_2$ stays
# inside the 99% band of Gaussian samples of its size at every recorded time, while the same flow with a ReLU
# block lies outside it.
#
# What was seen but not claimed: at a fixed $N$ a finite cloud is not exactly a Gaussian sample. Under
# $B_{\rm strong}$ ($\kappa > \tfrac12$) the cloud's sliced $W_2$ drifts towards and out of the band (the
# table of (d)); over the general ensemble ($\kappa$ up to {glue:text}`ens_kappa_max:.2f`) the largest single
# draw's sliced $W_2$ is {glue:text}`ens_worst_draw:.4f` against Gaussian samples' {glue:text}`ens_null_mean:.4f`
# $\pm$ {glue:text}`ens_null_sd:.4f`. These are finite-$N$ departures, which the mean-field statement (about
# $N \to \infty$) does not exclude; Mardia's kurtosis, shown in {numref}`fig-gaussianity`, is not claimed for
# any flow.
#
# ## How these checks were designed
#
# ```{dropdown} Revisions, seeds and the mutations behind these claims
# *Mardia's kurtosis in (d).* A first version of this chapter also claimed that the $B_{\rm mid}$ cloud stays
# inside the kurtosis band; its only controls were the static clouds, and under $B_{\rm strong}$ the flow's
# departure stays inside the kurtosis band while sliced $W_2$ leaves its own, as does the ReLU departure of
# chapter 2. With no flow that the kurtosis test is shown to detect, an *inside the kurtosis band* claim would
# test nothing, so it was dropped (after its values had been seen, in that first version). The static clouds are
# kept as checks of the two statistics (instrument claims, counted for no statement).
#
# *The ensembles of (e): thresholds set after seeing values.* Two earlier designs failed in the quick profile,
# and are kept as findings. (1) With the first ensemble, the sliced $W_2$ of each draw's cloud after the flow to
# $T$ (10 RK4 steps), averaged over the draws, was claimed below the 99% quantile of the same average over
# Gaussian samples of that size (from 400 samples, by resampling), with the ReLU block of (d) as control. It
# failed narrowly ({numref}`fig-ensemble`, right): the statistic is affine invariant, the finite-$N$ flow is not
# exactly affine, and the draw with the strongest attention ends visibly less Gaussian than a Gaussian sample, a
# finite-$N$ departure of the same order $N^{-1/2}$ as the null's own spread, so it does not fade relative to the
# null as $N$ grows (the mean-field statement concerns the limit). (2) The non-affine residual on that same
# ensemble fell more slowly than $N^{-1/2}$, with a few samples per $N$ far above the others: its spread needs the
# fourth moment of the softmax weights, finite only while $\kappa < \tfrac14$; at $\kappa = 0.25$ and above, a
# seed-average and its bootstrap SE are not to be trusted. Hence the second ensemble, with $\kappa$ below $0.2$
# along every path. Before fixing it we checked on a seed that the chapter does not use (999) that there the
# residual's slope is close to $-\tfrac12$ and the uniform control levels off; the chapter's seeds for it ran
# only after the thresholds were written.
#
# *The draws' census* was added when the book's ensembles were reviewed for selection: the generator keeps the
# first draws whose $\kappa$ stays below the cap along the moment ODE, and the census replays it and counts every
# draw it made (it fails if its replay keeps other draws than the chapter's ensemble).
#
# *Traced sides.* Each reproduction records the library functions its two sides ran: the observed side is the
# tokens drawn and moved by the $N$-token simulator; the predicted side is the moment ODE (b), the exact layer
# maps (c, e) or the sliced-$W_2$ noise floor of Gaussian samples (d), the floor counted whole, its statistic
# included. The statistic applied to the tokens (the moment error, the sliced $W_2$ of the cloud, the
# non-affine residual) is the comparison and counts on neither side. The book refuses a reproduction whose
# two sides share model code; none of this chapter's do. The non-affine residual of (e) is compared with the
# rate $N^{-1/2}$ itself, so its predicted side ran no library code.
#
# *Seeds.* The ensembles' seeds (2211–2218: draws, stack samples, flow samples, null samples, bootstraps) and
# the seed of the direct maximisation of $\kappa$ in (b) (2271) were new to this chapter when introduced; the
# $d = 2$ examples use the chapter's `seed` and fixed offsets from it (100, 200 for the stacks; 1, 3, 4, 5 for the
# noise floors and the static clouds).
# ```
