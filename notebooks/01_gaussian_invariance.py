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
# same statistic rejects non-Gaussian clouds with the same first two moments and a flow that breaks
# Gaussianity; (e) (c) and (d) again over a seeded ensemble of general layers in $d = 3$ (non-zero $A$,
# non-scalar $V$, non-symmetric $B$), since the statements hold for every layer, not only for the
# $d = 2$, $V = vI$ examples of (a)–(d).

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
record_times = 11
noise_repeats = 200
band_level = 0.99
n_boot = 2000
stack_Ns = [250, 500, 1000, 2000, 4000]
stack_seeds = 24
control_seeds = 8
student_dof = 5.0
mixture_separation = 0.9
relu_gain = 0.5
# (e) ensembles of general layers (seeds new in issue 22: draws 2211, stack samples 2212, flow samples 2213,
# null samples 2214, bootstrap 2215)
ens_d = 3
ens_draws = 10
ens_kappa = 0.25
ens_Ns = [250, 500, 1000, 2000, 4000]
ens_seeds = 6
ens_control_seeds = 2
ens_tokens = 4000
ens_steps = 10
ens_null_repeats = 400
ens_draw_seed = 2211
ens_stack_seed = 2212
ens_flow_seed = 2213
ens_null_seed = 2214
ens_boot_seed = 2215
# the second ensemble (weaker attention, for the non-affine residual): seeds 2216 (draws), 2217 (samples), 2218
aff_kappa = 0.1
aff_cap = 0.2
aff_draw_seed = 2216
aff_stack_seed = 2217
aff_boot_seed = 2218

# kappa by direct maximisation (issue 22; a seed new to this chapter)
strength_n_draws = 10
strength_seed = 2271
# %%
import numpy as np

from gtbook import claim
from gtbook.glue import glue
from gtbook.studies.invariance import figures as figs
from gtbook.studies.invariance.ensemble import gaussianity_ensemble, general_draws, relu_variant, stack_ensemble
from gtbook.studies.invariance.harness import mean_field_study, relative_moment_discrepancy
from gtbook.studies.invariance.nongaussian import softmax_stack_study
from gtbook.studies.invariance.strength import strength_draws
from gtcore import Controls, gaussian_tokens, integrate_moments, layer_stack
from gtcore.attention import max_sampling_strength
from gtcore.particles import simulate
from gtcore.stats.gaussianity import mardia_kurtosis, noise_floor, sliced_w2
from gtcore.stats.inference import mean_of_k_quantile, slope_difference_standard_error, slope_standard_error
from gtcore.stats.sampling import moment_matched_tokens

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
figs.cloud_with_ellipses(cloud.tokens[show], cloud.t[show], ode.mu[show], ode.Sigma[show]);

# %% [markdown]
# *What to look at* in {numref}`fig-cloud`: the cloud rotates, stretches and drifts, and the ellipses of the ODE move with it
# at every time. {numref}`anim-cloud` plays the same run at every one of its `steps` integrator
# steps (press play or drag the slider).

# %% mystnb={"figure": {"name": "anim-cloud", "caption": "The tokens (dots, a fixed subset) moved by the softmax Transformer, integrator step by integrator step, and the $2\\sigma$ ellipse of the Gaussian whose moments solve eq. (1.1)."}}
figs.ode_animation(cloud, ode, alt="Animation of a two-dimensional token cloud over time: the cloud turns, "
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
# *What is measured.* For each $N$ and seed, the tokens' moments at $T$ are compared with the moment
# ODE started from **that cloud's own moments** $(\hat\mu(0), \hat\Sigma(0))$: the initial sampling
# error (which shrinks like $N^{-1/2}$ for any law and would make the rate hold by construction)
# cancels, and what is left is the *dynamic* error, the finite-$N$ softmax's own.
#
# *Thresholds, fixed before the run.* SE is the bootstrap standard error of a fitted slope (seeds
# resampled within each $N$, `n_boot` resamples). The weak setting's slope must lie within
# $3\,\mathrm{SE}$ of $-\tfrac12$ (a 99.7% band set by the seed-to-seed scatter). The strong setting is
# slower when its slope exceeds the weak one's by more than three standard errors of the difference
# (the two settings move the same seeded samples, so the difference is bootstrapped with one set of
# resampled seeds for both).

# %% mystnb={"figure": {"name": "fig-error-n", "caption": "Relative moment error of the token cloud against the number of tokens $N$, for weak and strong attention, with the $N^{-1/2}$ reference line. Error bars: standard errors over the seeds."}, "image": {"alt": "Log-log plot of moment error against the number of tokens: the weak-attention curve falls parallel to a reference line of slope minus one half; the strong-attention curve falls more slowly."}}
studies = {
    "weak attention": mean_field_study(mu0, Sigma0, weak, (0, T), Ns, n_seeds, study_steps),
    "strong attention": mean_field_study(mu0, Sigma0, strong, (0, T), Ns, n_seeds, study_steps),
}
figs.error_against_n(studies)
se_weak = slope_standard_error(Ns, studies["weak attention"].errors, n_boot=n_boot, seed=seed)
se_strong = slope_standard_error(Ns, studies["strong attention"].errors, n_boot=n_boot, seed=seed + 1)
se_diff = slope_difference_standard_error(Ns, studies["weak attention"].errors, studies["strong attention"].errors,
                                          n_boot=n_boot, seed=seed + 2)
glue("weak_slope", studies["weak attention"].slope)
glue("strong_slope", studies["strong attention"].slope)
glue("weak_se", se_weak)
glue("strong_se", se_strong)
glue("diff_se", se_diff);

# %% [markdown]
# *What to look at* in {numref}`fig-error-n`: the fitted slopes are {glue:text}`weak_slope:.2f`
# (SE {glue:text}`weak_se:.2f`) in the weak setting ($\kappa < \tfrac12$) and {glue:text}`strong_slope:.2f`
# (SE {glue:text}`strong_se:.2f`) in the strong one ($\kappa > \tfrac12$); error bars are standard errors
# over the seeds. The claims below say whether the weak slope is within its band and whether the strong
# one is measurably flatter. The threshold $\kappa = \tfrac12$ and the $N^{-1/2}$ rate below it are this
# book's analysis (the statement `beyond_finite_n`), not a result of the paper; the paper's statement is
# the limit $N \to \infty$ itself, tested in (c), (d) and (e).

# %%
claim("weak_attention_kappa", studies["weak attention"].kappa, lt=0.5,
      statement="beyond_finite_n", kind="consistency")
claim("weak_attention_slope", studies["weak attention"].slope, gt=-0.5 - 3 * se_weak, lt=-0.5 + 3 * se_weak,
      statement="beyond_finite_n", kind="reproduces")
claim("strong_attention_kappa", studies["strong attention"].kappa, gt=0.5,
      statement="beyond_finite_n", kind="consistency")
claim("strong_is_slower", studies["strong attention"].slope - studies["weak attention"].slope, gt=3 * se_diff,
      statement="beyond_finite_n", kind="reproduces")

# %% [markdown]
# Both settings above use one symmetric $B$, where $\lambda_{\max}(B^\top\Sigma B\Sigma)$ and
# $\lambda_{\max}(B\Sigma B\Sigma)$ coincide. The threshold's derivation says what $\kappa$ *is*: the weights
# $e^{y^\top Bx}$ have relative second moment $e^{x^\top B^\top\Sigma Bx}$ over the tokens, and its average over
# Gaussian queries is finite iff $\sup_x x^\top B^\top\Sigma Bx / x^\top\Sigma^{-1}x < \tfrac12$. So the closed form
# the library uses is checked against that supremum, maximised directly (random directions, then BFGS;
# {py:mod}`gtbook.studies.invariance.strength`), over `strength_n_draws` seeded draws in $d = 3$ with a
# non-symmetric (Ginibre) $B$ and a random $\Sigma$ (seed `strength_seed`). *Threshold*: $10^{-8}$ relative, the
# accuracy of a smooth maximum found by BFGS to gradient tolerance $10^{-13}$ (the error in the value is
# quadratic in the error in the maximiser). A derivation check.

# %%
strength = strength_draws(strength_n_draws, 3, seed=strength_seed)
glue("strength_err", strength.max_relative_error)
claim("kappa = lambda_max(B^T Sigma B Sigma) is the sup of the weights' variance exponent (non-symmetric B; "
      "largest relative error over draws)", strength.max_relative_error, lt=1e-8,
      statement="beyond_finite_n", kind="derivation")

# %% [markdown]
# ## (c) A 12-layer Transformer and the exact layer map
#
# A residual layer $x \mapsto x + h\,v(x)$ maps $N(\mu, \Sigma)$ to $N(\mu + h\mu', M\Sigma M^\top)$ with
# $M = I + h(A + V\Sigma B)$. Two checks of different nature.
#
# *Consistency.* Stacking 12 such layers on the tokens with the attention average evaluated against the
# Gaussian with the cloud's moments is the same affine algebra as `layer_stack`: it must agree to
# round-off. This checks the code, not the paper.
#
# *Reproduction.* With softmax attention over the $N$ tokens, the stack is what a Transformer computes,
# and it approaches the layer map only because the softmax over a Gaussian sample estimates the
# Gaussian attention average $\hat\mu + \hat\Sigma Bx$. We start `layer_stack` from each sample's own
# moments (so the initial sampling error cancels) and measure the error after the last layer,
# $\|\hat\mu_L - \mu_L\| + \|\hat\Sigma_L - \Sigma_L\|_F$, over `stack_seeds` samples for each $N$ in `stack_Ns` (weak
# attention, $\kappa < \tfrac12$). Expanding the softmax average in $q = Bx$, it is
# $\hat\mu + \hat\Sigma q + \tfrac12\hat\kappa_3[q, q] + \dots$ with the sample's third (and higher)
# cumulants, which vanish like $N^{-1/2}$ for a Gaussian sample: the error should fall like $N^{-1/2}$.
# For a non-Gaussian law with the same two moments those cumulants do not vanish, and the error
# levels off. The **control** is that law: tokens uniform on a box, moment-matched to
# $(\mu_0, \Sigma_0)$, through the same stack (`control_seeds` samples per $N$: a plateau needs few).
#
# *Threshold.* The fitted slope must lie within $3\,\mathrm{SE}$ of $-\tfrac12$, where SE is the bootstrap
# standard error of the fitted slope (seeds resampled within each $N$, `n_boot` resamples): a 99.7%
# band set by the seed-to-seed scatter. The control's slope must lie above that band's upper edge.

# %% mystnb={"figure": {"name": "fig-layers", "caption": "Moment discrepancy, layer by layer, between 12 residual layers applied to the tokens and the exact layer map `layer_stack`."}, "image": {"alt": "Two curves of relative moment discrepancy over 12 layers on a log scale: Gaussian attention on the tokens stays at round-off, softmax attention over the tokens sits at the sampling error."}}
h = T / n_layers
exact_attention = simulate(x0, weak, (0, T), n_layers, method="euler", average="gaussian")
softmax_attention = simulate(x0, weak, (0, T), n_layers, method="euler")
mus, Sigmas = layer_stack(exact_attention.mu[0], exact_attention.Sigma[0], [weak] * n_layers, h)
layer_error = relative_moment_discrepancy(exact_attention.mu, exact_attention.Sigma, mus, Sigmas)[1:]
sampling_error = relative_moment_discrepancy(softmax_attention.mu, softmax_attention.Sigma, mus, Sigmas)[1:]
figs.layer_errors({"Gaussian attention on the tokens": layer_error,
                   "softmax attention over the tokens": sampling_error});

# %%
claim("discrete_layers_exact", layer_error.max(), lt=1e-10, statement="reduction", kind="consistency")

# %% [markdown]
# *What to look at* in {numref}`fig-layers`: the first curve sits at round-off ($10^{-15}$): with the Gaussian attention average
# the discrete Transformer and the layer map are the same computation. The second is the softmax's
# error at this $N$; how it depends on $N$ is {numref}`fig-stack-n`.

# %% mystnb={"figure": {"name": "fig-stack-n", "caption": "Error of the 12-layer softmax stack against the exact layer map after the last layer, against $N$: Gaussian tokens and the moment-matched uniform control, with the $N^{-1/2}$ reference."}, "image": {"alt": "Log-log plot of the stack's moment error against the number of tokens: the Gaussian-token curve falls parallel to a reference line of slope minus one half, the uniform-token curve stays flat."}}
stacks = {
    "Gaussian tokens": softmax_stack_study(mu0, Sigma0, weak, T, n_layers, stack_Ns, stack_seeds, law="gaussian",
                                           seed=seed + 100),
    "uniform tokens, same moments (control)": softmax_stack_study(mu0, Sigma0, weak, T, n_layers, stack_Ns,
                                                                  control_seeds, law="uniform", seed=seed + 200),
}
gauss_stack, uniform_stack = stacks.values()
se = slope_standard_error(gauss_stack.Ns, gauss_stack.errors, n_boot=n_boot, seed=seed)
figs.stack_error_against_n(stacks);

# %%
dict(gaussian_slope=round(gauss_stack.slope, 3), bootstrap_se=round(se, 3),
     band=(round(-0.5 - 3 * se, 3), round(-0.5 + 3 * se, 3)), uniform_slope=round(uniform_stack.slope, 3))

# %% [markdown]
# *What to look at* in {numref}`fig-stack-n`: the Gaussian cloud's error runs parallel to the $N^{-1/2}$ line; the uniform
# cloud's error stays flat: the softmax over it estimates its own tilted mean, which is not
# $\mu + \Sigma Bx$.

# %%
claim("softmax 12-layer stack vs layer_stack: log-log slope in N", gauss_stack.slope,
      gt=-0.5 - 3 * se, lt=-0.5 + 3 * se, statement="reduction", kind="reproduces")
claim("uniform tokens (same moments): softmax stack slope above the band", uniform_stack.slope,
      gt=-0.5 + 3 * se, statement="reduction", kind="control")

# %% [markdown]
# ## (d) The cloud stays as Gaussian as a Gaussian sample
#
# Two affine-invariant statistics of the cloud: the sliced $W_2$ distance to its moment-matched
# Gaussian (each projection standardised) and Mardia's kurtosis $b_{2,d}$ {cite}`mardia1970measures`.
# The grey band is the central 99% of each statistic over `noise_repeats` true Gaussian samples of
# the same size and dimension: the noise floor. A cloud that stays Gaussian stays in the band.
#
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
# **Controls** (same statistics, same $N$, same band): clouds with exactly the first two moments
# $(\mu_0, \Sigma_0)$ of the input but another law: uniform on a box, an elliptical Student-$t$ with
# `student_dof` degrees of freedom, and a two-component Gaussian mixture (equal weights, separation
# `mixture_separation`). Each must fall outside the band. These are static clouds: they show that the
# band is narrow enough to see a non-Gaussian law, not that the statistic sees a departure that a
# *flow* creates. The **flow control** does that: the same tokens under the same $B_{\rm mid}$ layer
# plus a ReLU block $g\,\mathrm{relu}(x - \mu_0)$ ($g$ = `relu_gain`, the kink through the input's
# mean in each coordinate, `ff="relu"`), which pushes the tokens on one side of each kink outward and
# leaves the others: its sliced $W_2$ at $T$ must be outside the band.
#
# *Thresholds* (fixed before looking): the reproduction passes when the statistic lies inside the 99%
# band at every recorded time (claim value: the largest excursion outside the band, negative when
# inside); a control passes when its excursion is positive.
#
# *Mardia's kurtosis is shown, not claimed for the flow.* A first version of this chapter also claimed
# that the $B_{\rm mid}$ cloud stays inside the kurtosis band; its only controls were the static
# clouds, and under $B_{\rm strong}$ (below) the flow's departure stays inside the kurtosis band while
# sliced $W_2$ leaves its own, as does the ReLU departure of chapter 2. With no flow that the kurtosis
# test is shown to detect, an *inside the kurtosis band* claim would test nothing, so it was dropped
# (after its values had been seen, in that first version); the static controls are kept as a check of
# the kurtosis statistic itself.

# %% mystnb={"figure": {"name": "fig-gaussianity", "caption": "Sliced W2 and Mardia kurtosis of the token cloud over time, inside the 99% noise band of true Gaussian samples, with moment-matched non-Gaussian samples marked as controls."}, "image": {"alt": "Panels of two Gaussianity statistics against time: the cloud's curves stay inside a grey band while the non-Gaussian control markers lie outside it."}}
record_every = steps // (record_times - 1)
flows = {}
for label, ctl in (("B_mid", mid), ("B_strong", strong)):
    tracked = simulate(x0, ctl, (0, T), steps, keep_tokens=True, record_every=record_every)
    ode_track = integrate_moments(mu0, Sigma0, ctl, (0, T), t_eval=tracked.t)
    kappa = max_sampling_strength(ctl, ode_track.t, ode_track.Sigma)
    flows[f"{label} (κ = {kappa:.2f})"] = {
        "sliced W2": np.array([sliced_w2(x, seed=seed) for x in tracked.tokens]),
        "Mardia kurtosis": np.array([mardia_kurtosis(x) for x in tracked.tokens]),
    }
floors = {
    "sliced W2": noise_floor(lambda z: sliced_w2(z, seed=seed), n_tokens, 2, repeats=noise_repeats, seed=seed + 1),
    "Mardia kurtosis": noise_floor(mardia_kurtosis, n_tokens, 2, repeats=noise_repeats, seed=seed + 1),
}
bands = {k: f.band(band_level) for k, f in floors.items()}
control_clouds = {
    "uniform": moment_matched_tokens("uniform", n_tokens, mu0, Sigma0, seed + 3),
    f"Student-t ({student_dof:g} dof)": moment_matched_tokens("student_t", n_tokens, mu0, Sigma0, seed + 4,
                                                               dof=student_dof),
    "two-component mixture": moment_matched_tokens("mixture", n_tokens, mu0, Sigma0, seed + 5,
                                                   separation=mixture_separation),
}
controls = {law: {"sliced W2": sliced_w2(x, seed=seed), "Mardia kurtosis": mardia_kurtosis(x)}
            for law, x in control_clouds.items()}
relu_flow = simulate(x0, relu_variant(mid, mu0, relu_gain), (0, T), steps, ff="relu", keep_tokens=True,
                     record_every=steps)
relu_w2 = sliced_w2(relu_flow.tokens[-1], seed=seed)
figs.statistics_with_controls(tracked.t, flows, bands, controls, band_level);


def excursion(values, band):
    """Largest distance outside the band (negative: inside by that much at every point)."""
    lo, hi = band
    values = np.atleast_1d(values)
    return float(max(values.max() - hi, lo - values.min()))


# %%
mid_stats, strong_stats = flows.values()
claim("B_mid: sliced W2 inside the noise band at every time", excursion(mid_stats["sliced W2"], bands["sliced W2"]),
      lt=0.0, statement="invariance", kind="reproduces")
claim("B_mid + ReLU block (flow control): sliced W2 at T outside the noise band", excursion(relu_w2, bands["sliced W2"]),
      gt=0.0, statement="invariance", kind="control")
for name in bands:
    for law, vals in controls.items():
        claim(f"{law}, same moments: {name} outside the noise band", excursion(vals[name], bands[name]), gt=0.0,
              statement="invariance", kind="control")
{name: dict(band=tuple(round(x, 4) for x in bands[name]), B_mid_max=round(float(mid_stats[name].max()), 4),
            B_strong_at_T=round(float(strong_stats[name][-1]), 4)) for name in bands} | {
    "B_mid + ReLU block: sliced W2 at T": round(relu_w2, 4)}

# %% [markdown]
# *What to look at* in {numref}`fig-gaussianity`: under $B_{\rm mid}$ the sliced $W_2$ stays inside the band at every recorded time
# (and so, unclaimed, does Mardia's kurtosis), although the attention tilts each query's average by two
# thirds of a standard deviation per standard deviation; the three moment-matched non-Gaussian clouds
# lie far outside it at this $N$, and so does the same flow with the ReLU block (the table above), so the
# band is not too wide to see a non-Gaussian law or a flow that breaks Gaussianity. Under $B_{\rm strong}$ ($\kappa > \tfrac12$) the finite cloud's
# sliced $W_2$ drifts out of the band as time goes on (the table above gives both statistics at $T$;
# Mardia's kurtosis, which weighs the far tail differently, moves up but need not leave): at this $N$ the
# softmax of the queries far out is dominated by a handful of tokens, and the cloud is no longer a
# Gaussian sample. That is a finite-$N$ effect (the attention average it estimates has infinite
# variance), not a failure of the mean-field statement, and it is why (b) sees the error decay more
# slowly than $N^{-1/2}$ in that regime. We record it as a finding, not a claim: we did not predict
# at which $N$ it would show.
#
# ## (e) Over general parameters
#
# The worked examples above have $d = 2$ and $V = vI$. The reduction and the invariance are statements
# about every layer, so we test them again over seeded ensembles of `ens_draws` layers in $d = 3$
# (`gtbook.studies.invariance.ensemble.general_draws`): $A, V, B$ with i.i.d. Gaussian entries (a
# non-zero $A$, a non-scalar $V$, a non-symmetric $B$: a transposed tilt $\Sigma B^\top x$ or a value map
# applied as $V^\top$ would change every result), a random mean and an anisotropic full-rank $\Sigma_0$
# scaled to a chosen sampling strength $\kappa$ at $t = 0$; a draw is kept only if $\kappa$ stays below a
# cap along its moment ODE on $[0, T]$. The 12-layer softmax stack of (c) runs on each draw, for $N$ in
# `ens_Ns`, `ens_seeds` samples per $N$; a statistic's rate is one log–log slope pooled over the draws
# (one intercept per draw), and SE its bootstrap standard error (seeds resampled within each draw and
# $N$). The seeds are new (parameters cell).
#
# * **Reduction** (the ensemble at $\kappa = $ `ens_kappa`, cap $0.45$). The stack's moment error against
#   the exact layer map from each sample's own moments, as in (c). *Threshold, fixed before the run*: the
#   slope within $3\,\mathrm{SE}$ of $-\tfrac12$; control: the same draws with tokens uniform on a box,
#   moment-matched (`ens_control_seeds` samples per $N$), slope above the band's upper edge.
# * **Invariance** (a second ensemble, $\kappa = $ `aff_kappa`, cap `aff_cap`). The invariance rests on the
#   attention average against a Gaussian being affine in the query, so that the flow map of a Gaussian
#   cloud is affine and its image Gaussian. The statistic is how far each sample's map through the stack
#   is from affine: the relative residual of the least-squares affine fit of the final tokens on the
#   initial ones (`nonaffine_residual`). The finite-$N$ softmax fluctuates around the affine average by
#   $O(N^{-1/2})$, so the residual should fall like $N^{-1/2}$; against a law whose average is not affine
#   it levels off. *Threshold, fixed before the run on these seeds*: the slope within $3\,\mathrm{SE}$ of
#   $-\tfrac12$; control: uniform tokens, slope above the band's upper edge.
#
# *How this design came about (thresholds set after seeing values, said here).* Two earlier designs
# failed in the quick profile, and are kept as findings. (1) With the first ensemble, the sliced $W_2$ of
# each draw's cloud of `ens_tokens` tokens after the flow to $T$ (`ens_steps` RK4 steps), averaged over
# the draws, was claimed below the 99% quantile of the same average over Gaussian samples of that size
# (from `ens_null_repeats` samples, by resampling), with the ReLU block of (d) as control. It failed
# narrowly (numbers below; {numref}`fig-ensemble`, right): the statistic is affine invariant, the
# finite-$N$ flow is not exactly affine, and the draw with the strongest attention ends visibly less
# Gaussian than a Gaussian sample, a finite-$N$ departure of the same order $N^{-1/2}$ as the null's own
# spread, so it does not fade relative to the null as $N$ grows (the mean-field statement concerns the
# limit). (2) The non-affine residual on that same ensemble fell more slowly than $N^{-1/2}$ (slope below),
# with a few samples per $N$ far above the others. The residual is a mean of *squared* per-token errors,
# so its spread across samples involves the fourth moment of the softmax weights, finite only while
# $\kappa < \tfrac14$ (the moment error, a mean of the errors themselves, needs only the second,
# $\kappa < \tfrac12$); at $\kappa = 0.25$ and above, a seed-average and its bootstrap SE are not to be
# trusted. Hence the second ensemble, with $\kappa$ below $0.2$ along every path. Before fixing it we
# checked on a seed that the chapter does not use (999) that there the residual's slope is close to
# $-\tfrac12$ and the uniform control levels off; the chapter's seeds (`aff_draw_seed`, `aff_stack_seed`)
# ran only after the thresholds above were written.

# %% mystnb={"figure": {"name": "fig-ensemble", "caption": "The chapter's statements over ensembles of general layers in $d = 3$. Left: each draw's 12-layer stack moment error (first ensemble), middle: the non-affine residual of each sample's map through the stack (second ensemble, weaker attention), both relative to their value at the smallest $N$, against $N$, for Gaussian tokens and the moment-matched uniform control, with the $N^{-1/2}$ reference. Right (a finding, not a claim): each draw's sliced $W_2$ at $T$ in the first ensemble (flow, and flow plus a ReLU block), their means (bars), the null values of Gaussian samples and the 99% quantile of the null's ensemble mean (dashed)."}, "image": {"alt": "Left and middle: two bundles of thin lines on log-log axes, the Gaussian bundles falling parallel to a dashed line of slope minus one half and the uniform bundles flat. Right: dots for the flow near the top of a cloud of grey null dots, one of them above it, and dots for the ReLU control well above a dashed line."}}
ens = general_draws(ens_draws, ens_d, T=T, seed=ens_draw_seed, kappa=ens_kappa)
ens_gauss = stack_ensemble(ens, T, n_layers, ens_Ns, ens_seeds, seed=ens_stack_seed)
ens_uniform = stack_ensemble(ens, T, n_layers, ens_Ns, ens_control_seeds, law="uniform", seed=ens_stack_seed)
ens_se = ens_gauss.slope_standard_error(n_boot=n_boot, seed=ens_boot_seed)
aff = general_draws(ens_draws, ens_d, T=T, seed=aff_draw_seed, kappa=aff_kappa, kappa_cap=aff_cap)
aff_gauss = stack_ensemble(aff, T, n_layers, ens_Ns, ens_seeds, seed=aff_stack_seed)
aff_uniform = stack_ensemble(aff, T, n_layers, ens_Ns, ens_control_seeds, law="uniform", seed=aff_stack_seed)
aff_se = aff_gauss.slope_standard_error("nonaffine", n_boot=n_boot, seed=aff_boot_seed)
ens_flow = gaussianity_ensemble(ens, T, ens_steps, ens_tokens, seed=ens_flow_seed)
ens_relu = gaussianity_ensemble(ens, T, ens_steps, ens_tokens, relu=True, gain=relu_gain, seed=ens_flow_seed)
ens_null = noise_floor("sliced_w2", ens_tokens, ens_d, repeats=ens_null_repeats, seed=ens_null_seed).values
ens_q = mean_of_k_quantile(ens_null, ens_draws, band_level, seed=ens_null_seed)
figs.ensemble_figure(ens_gauss, ens_uniform, aff_gauss, aff_uniform, ens_flow, ens_relu, ens_null, ens_q)
glue("ens_slope", ens_gauss.slope)
glue("ens_se", ens_se)
glue("ens_uniform_slope", ens_uniform.slope)
glue("ens_kappa_max", max(dr.kappa_max for dr in ens))
glue("aff_slope", aff_gauss.nonaffine_slope)
glue("aff_se", aff_se)
glue("aff_uniform_slope", aff_uniform.nonaffine_slope)
glue("aff_kappa_max", max(dr.kappa_max for dr in aff))
glue("ens_affine_slope", ens_gauss.nonaffine_slope)
glue("ens_affine_se", ens_gauss.slope_standard_error("nonaffine", n_boot=n_boot, seed=ens_boot_seed + 1))
glue("ens_flow_mean", float(ens_flow.mean()))
glue("ens_relu_mean", float(ens_relu.mean()))
glue("ens_worst_draw", float(ens_flow.max()))
glue("ens_null_mean", float(ens_null.mean()))
glue("ens_null_sd", float(ens_null.std(ddof=1)))
glue("ens_q", ens_q);

# %%
claim(f"ensemble of {ens_draws} general layers (d={ens_d}): pooled slope of the softmax stack error",
      ens_gauss.slope, gt=-0.5 - 3 * ens_se, lt=-0.5 + 3 * ens_se, statement="reduction", kind="reproduces")
claim("ensemble, uniform tokens (same moments): pooled stack slope above the band", ens_uniform.slope,
      gt=-0.5 + 3 * ens_se, statement="reduction", kind="control")
claim(f"second ensemble of {ens_draws} general layers (kappa < {aff_cap:g}): pooled slope of the stack map's "
      "non-affine residual", aff_gauss.nonaffine_slope, gt=-0.5 - 3 * aff_se, lt=-0.5 + 3 * aff_se,
      statement="invariance", kind="reproduces")
claim("second ensemble, uniform tokens (same moments): non-affine residual slope above the band",
      aff_uniform.nonaffine_slope, gt=-0.5 + 3 * aff_se, statement="invariance", kind="control")

# %% [markdown]
# In {numref}`fig-ensemble`, left, the pooled slope of the moment error over the first ensemble is
# {glue:text}`ens_slope:.2f` (SE {glue:text}`ens_se:.2f`; the largest $\kappa$ along a path
# {glue:text}`ens_kappa_max:.2f`), the uniform control's {glue:text}`ens_uniform_slope:.2f`. Middle: the
# non-affine residual's slope over the second ensemble is {glue:text}`aff_slope:.2f`
# (SE {glue:text}`aff_se:.2f`; largest $\kappa$ {glue:text}`aff_kappa_max:.2f`), the uniform control's
# {glue:text}`aff_uniform_slope:.2f`. The findings of the earlier designs: on the first ensemble the
# residual's slope is {glue:text}`ens_affine_slope:.2f` (a bootstrap SE of {glue:text}`ens_affine_se:.2f`,
# which the heavy tail makes unreliable); right, the flow's mean sliced $W_2$ over the draws is
# {glue:text}`ens_flow_mean:.4f` against the null's 99% quantile {glue:text}`ens_q:.4f` (null mean
# {glue:text}`ens_null_mean:.4f`, standard deviation of one value {glue:text}`ens_null_sd:.4f`; the largest
# single draw {glue:text}`ens_worst_draw:.4f`), and with the ReLU block {glue:text}`ens_relu_mean:.4f`.
#
# ## What we saw
#
# What the claims establish. The moment error of a softmax Transformer against the moment ODE, measured
# from each cloud's own moments, falls with $N$ at a rate consistent with $N^{-1/2}$ when $\kappa < \tfrac12$
# (slope {glue:text}`weak_slope:.2f`, within three bootstrap SE of $-\tfrac12$), and measurably more slowly
# when $\kappa > \tfrac12$ (this book's analysis, beyond the paper). A 12-layer residual stack with softmax
# attention approaches the exact Gaussian layer map at a rate consistent with $N^{-1/2}$, in the $d = 2$
# example and pooled over ten general layers in $d = 3$ (non-zero $A$, non-scalar $V$, non-symmetric $B$);
# a uniform cloud with the same two moments does not approach it. Over ten general layers with weaker
# attention ($\kappa < 0.2$), the map of a Gaussian cloud through the stack approaches an affine map at a
# rate consistent with $N^{-1/2}$, and that of a uniform cloud does not: the mechanism of the invariance,
# seen on tokens. In the $d = 2$ example with $\kappa \approx 0.44$ the cloud's sliced $W_2$ stays inside the
# 99% band of Gaussian samples of its size at every recorded time, while moment-matched non-Gaussian
# clouds and the same flow with a ReLU block lie outside it.
#
# What was seen but not claimed: at a fixed $N$ a finite cloud is not exactly a Gaussian sample. Under
# $B_{\rm strong}$ ($\kappa > \tfrac12$) the cloud's sliced $W_2$ drifts towards and out of the band (the
# table of (d)); over the general ensemble ($\kappa$ up to {glue:text}`ens_kappa_max:.2f`) the largest single
# draw's sliced $W_2$ is {glue:text}`ens_worst_draw:.4f` against Gaussian samples' {glue:text}`ens_null_mean:.4f`
# $\pm$ {glue:text}`ens_null_sd:.4f`. These are finite-$N$ departures, which the mean-field statement (about
# $N \to \infty$) does not exclude; Mardia's kurtosis, shown in {numref}`fig-gaussianity`, is not claimed for
# any flow.
