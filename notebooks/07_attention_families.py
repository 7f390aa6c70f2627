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
# # 7. Attention families: L2, Sinkhorn and several heads (beyond the paper)
#
# The paper's attention is the dot product: logits $x_j^\top Bx_i$, softmax over the keys $j$.
# Is Gaussian invariance special to it, and do other attention laws blow up too? This chapter
# answers for three laws, each with its own derivation in {py:mod}`gtcore.attention`, checked against
# tokens and against the moment ODE. Everything here is **beyond the paper**.
#
# | type | logits of query $x_i$, key $x_j$ | Gaussian average $a(x)$ against $N(\mu,\Sigma)$ |
# |---|---|---|
# | `"dot"` | $x_j^\top Bx_i$, $B = K^\top Q$ | $\mu + \Sigma Bx$ |
# | `"l2"` | $-\lVert Qx_i - Kx_j\rVert^2$ | $(I + 2\Sigma K^\top K)^{-1}(\mu + 2\Sigma K^\top Qx)$ |
# | `"sinkhorn"` | $x_j^\top Bx_i + g_j$, $g$ from Sinkhorn scaling | $\mu + M(x - \mu)$, $M = 2\Sigma^{1/2}(I + (I + 4\Sigma^{1/2}B\Sigma B^\top\Sigma^{1/2})^{1/2})^{-1}\Sigma^{1/2}B$ |
#
# *L2.* Completing the square, the key density tilted by $e^{-\lVert Qx - Ky\rVert^2}$ is Gaussian
# with precision $\Sigma^{-1} + 2K^\top K$: the average is affine in the query, so Gaussians stay
# Gaussian, with the moment ODE $\Sigma' = F\Sigma + \Sigma F^\top$,
# $F = A + 2V(I + 2\Sigma K^\top K)^{-1}\Sigma K^\top Q$.
#
# *Sinkhorn.* Tokens attend with the kernel $e^{x_j^\top Bx_i}$ scaled to a doubly-stochastic
# matrix (entropic parameter 1). Against a Gaussian this is entropic optimal transport from
# $N(\mu,\Sigma)$ to itself with cost $-y^\top Bx$; the optimal coupling is Gaussian (the
# derivation is in {py:func}`gtcore.attention.sinkhorn.gaussian_conditional_gain`, for any $B$, symmetric or not,
# and reduces to the closed form of Janati et al. 2020 and Mallasto et al. 2021 for
# $B = I/\sigma^2$), and the average is its conditional mean, affine in the query again. The
# coupling's marginals are both $\rho$, so the attention keeps the mean: $\mu' = (A + V)\mu + b$.
#
# *Several heads* add their velocities: $v = Ax + b + \sum_h V_h a_h(x)$.
#
# The tests (`tests/test_attention_families.py`) check every covariance right-hand side at zero
# mean against an independent implementation of the formulas published with Castin, Rouzé, Ablin,
# Peyré and Kim (2025), "A unified perspective on the dynamics of deep Transformers" (softmax, L2,
# multi-head and Sinkhorn; after mapping their $1/\sqrt d$ scalings) to round-off ($10^{-10}$
# relative); the Sinkhorn average against Sinkhorn scaling on a Gauss–Hermite rule (a
# discretised Gaussian) to $10^{-9}$; and particles against the moment ODE with an $N^{-1/2}$ slope.

# %% tags=["parameters"]
seed = 0
n_tokens = 3000
steps = 20
t_end = 1.0
noise_repeats = 200
mu0 = [0.5, -0.3]
Sigma0 = [[1.0, 0.3], [0.3, 0.5]]
omega_A = 0.3
v_inv = -0.8
omega_V = 0.3
Q_inv = [[0.45, 0.2], [-0.1, 0.35]]
K_inv = [[2.0, 0.4], [0.2, 1.6]]
Q_blow = [[1.0, 0.3], [0.3, 0.6]]
t_long = 8.0
rate_window = 1.0
rate_tol = 1e-2
blow_tokens = 1000
blow_steps = 20
blow_horizon = 1.5
n_heads = 3
head_scale = 0.3
# the actual null of "tokens follow their moment ODE": R independent clouds, each against the ODE from its
# own moments (seeds new in issue 22: 2271 onwards)
null_tokens = 1000
blow_null_tokens = 300
null_seeds = 10
null_level = 0.99
gain_error = 1.1
null_seed = 2271
extrapolation_ratio = 3
# Sinkhorn: the decay in N of the clouds' covariance deviation (added after the finite-N test failed for
# Sinkhorn; seeds from decay_seed, new)
decay_Ns = [250, 500, 1000, 2000]
decay_seed = 22271
decay_slope = -0.25

# %%
import numpy as np

from gtbook import claim
from gtbook.glue import glue
from gtbook.studies.families import figures as figs
from gtbook.studies.families.harness import (
    deviation_decay,
    growth_bound_excess,
    growth_rate,
    head_cancellation,
    moment_discrepancy,
    near_misses,
    noise_floor,
    predicted_rate,
    run_family,
)
from gtbook.studies.nulls import extrapolated_flow_deviations, flow_deviations
from gtcore import Controls, Status, integrate_moments
from gtcore.riccati import blowup_time
from gtcore.stats.inference import hotelling_test
from gtcore.stats.sampling import gaussian_tokens

TYPES = ["dot", "l2", "sinkhorn"]
mu0, Sigma0 = np.array(mu0), np.array(Sigma0)
J = np.array([[0.0, -1.0], [1.0, 0.0]])
I2 = np.eye(2)

# %% [markdown]
# ## (a) Invariance: tokens against the moment ODE, per type
#
# One layer for all three types: $A = \omega_A J$, $V = v I + \omega_V J$ with $v < 0$, and the
# same $Q, K$ ($B = K^\top Q$ for the dot product and Sinkhorn). $N$ tokens start from
# $N(\mu_0, \Sigma_0)$; each type's moment ODE starts from the tokens' own empirical moments, so
# the initial sampling error is not counted. The statistic is
# $D = \lVert\hat\mu - \mu\rVert/\lVert\Sigma\rVert_2^{1/2} + \lVert\hat\Sigma - \Sigma\rVert_F/\lVert\Sigma\rVert_F$
# at $t = T$, shown in the table below against the 99th percentile of $D$ for $N$ fresh i.i.d.
# Gaussian tokens with the ODE's moments (the *fresh-sample floor*).
#
# That floor is not the statistic's null. An earlier version of this chapter claimed $D$ below it, for
# each type; but the ODE starts from the tokens' own moments, so the initial sampling error cancels and
# $D$ sits ten to a few hundred times below the floor, far too wide a band to see a small error in the
# right ODE: an L2 or Sinkhorn gain 10% too large, or the Sinkhorn gain with $B^\top$ in place of $B$,
# would still pass (checked by hand: $D \approx 0.03$–$0.08$ against floors of $0.14$ at $N = 1000$ and
# $0.085$ at $N = 3000$).
#
# **The claims, with the threshold calibrated to the actual null, fixed in advance.** What is left after
# the cancellation is the finite-$N$ attention's own error, a fluctuation of mean zero (up to an $O(1/N)$
# bias) around the moment ODE when the ODE is right, and with a common offset when it is wrong. So
# `null_seeds` independent clouds of `null_tokens` tokens (seeds from `null_seed`) move under each type's
# layer, each is compared with the ODE started from its own moments through the signed, scale-free
# deviation of its mean and covariance at $T$ (`gtbook.studies.nulls.signed_deviation`, $p = 5$
# coordinates), and Hotelling's test (`hotelling_test`) asks whether the mean deviation is zero; the claim
# value is $T^2$ over its 99% quantile under the null. *Reproduction* (ratio below 1): the tokens against
# their own type's ODE. *Controls* (ratio above 1): the same clouds against near misses of that ODE, the
# attention term `gain_error` $= 1.1$ times too large ($V \to 1.1V$: for every type a 10% error in the gain
# $M$ of the covariance equation) and the queries and keys swapped (for the dot product and Sinkhorn,
# $B^\top$ in place of $B$), and against the other two types' ODEs.
#
# *Sinkhorn: a finite-$N$ bias (what follows was set after seeing values).* In the first
# run of this design (quick profile, $N = 500$) the Sinkhorn clouds rejected their own ODE
# while the dot-product and L2 clouds were consistent with theirs. A pilot by hand, not rerun by
# the chapter, on seeds it does not use (from 5000; $N = 250$ to $2000$, 8 clouds each) showed why: the clouds'
# mean covariance deviation from the ODE shrinks like $1/N$ ($N$ times it stays near $-0.65$ in the
# largest coordinates), an $O(1/N)$ bias of the finite-$N$ Sinkhorn scaling (an entropic transport plan
# estimated from $N$ samples), several standard errors of the mean at these $N$; and the mean part of the
# deviation is no fluctuation at all (doubly stochastic attention conserves the cloud's mean exactly, so
# the tokens' mean follows the mean ODE up to the integrator's error). So for Sinkhorn the test uses the
# covariance part only and removes a $c/N$ bias by Richardson extrapolation: clouds of $N_2 = $ `null_tokens`
# and $N_1 = N_2/$`extrapolation_ratio` tokens, paired, give $z_s = (N_2\delta^{(N_2)}_s - N_1\delta^{(N_1)}_s)/(N_2 - N_1)$,
# whose mean is the $N \to \infty$ deviation (`extrapolated_deviations`), and Hotelling's test applies to
# them with the same threshold. The plain test's value at $N_2$ is reported.
#
# *That extrapolated test failed too, at first.* Its first run (quick profile, $N_2 = 500$, $N_1 = 166$)
# gave $T^2$ at 1.6 times its 99% quantile (the plain test at $N_2$: 2.6 times); at the full profile's
# sizes, run afterwards, it came out below 1 (the values are below). A test designed after seeing values,
# that then failed once, is no claim: the chapter does **not** claim that clouds of these sizes follow
# the Sinkhorn ODE within their fluctuation, with or without the extrapolation. Both values are reported
# below as findings (`fam_T2_sinkhorn`, `fam_T2_sinkhorn_plain`), and the Sinkhorn rows of the table of
# $T^2$ ratios (own ODE, near misses, other types) are not claims. What is claimed for Sinkhorn instead (this design, too, was chosen after
# seeing those values, and its threshold was written here before it ran) is what the moment ODE
# predicts of the clouds as $N$ grows: their covariance deviation from the ODE started at their own
# moments vanishes (fluctuation $\sim N^{-1/2}$, bias $\sim N^{-1}$), while the deviation from a wrong
# ODE levels off at its error. `deviation_decay` measures the log–log slope in $N$ of the mean over
# `null_seeds` clouds of $\lVert\delta_s\rVert$ (covariance part), for $N$ in `decay_Ns` (seeds from
# `decay_seed`), with a bootstrap standard error (clouds resampled within each $N$). **Threshold:**
# `decay_slope` $= -1/4$, halfway between the slowest decay of a right ODE ($-1/2$) and a wrong one's
# levelling off ($0$). *Reproduction:* the own ODE's slope $+\,3$ SE below $-1/4$. *Controls:* each near
# miss's slope $-\,3$ SE above $-1/4$. This says that the deviation shrinks over this range of $N$, as
# for a right ODE, and rules out errors as large as the near misses; it cannot see an error of the ODE
# smaller than the fluctuation of clouds of $\max N$ tokens (the formula itself is checked in the tests
# against Sinkhorn scaling on a quadrature rule, to $10^{-9}$).

# %%
ctl_inv = {name: Controls(A=omega_A * J, V=v_inv * I2 + omega_V * J, Q=Q_inv, K=K_inv, attention=name)
           for name in TYPES}
runs = {name: run_family(ctl_inv[name], mu0, Sigma0, t_end, n_tokens, steps, seed=seed) for name in TYPES}
D = np.array([[moment_discrepancy(runs[a].particles.mu[-1], runs[a].particles.Sigma[-1],
                                  runs[b].ode.mu[-1], runs[b].ode.Sigma[-1]) for b in TYPES] for a in TYPES])
floors = [noise_floor(runs[a].ode.mu[-1], runs[a].ode.Sigma[-1], n_tokens, noise_repeats, seed=100)
          for a in TYPES]
fig = figs.clouds_by_type({name: runs[name] for name in TYPES})

# %% [markdown]
# Tokens (dots) of each type at $t = T$ inside the 1σ and 2σ ellipses of that type's moment ODE;
# the dotted ellipse is the start. The three laws move the same cloud to visibly different
# ellipses.

# %%
fig = figs.discrepancy_table(TYPES, D, floors)
for i, name in enumerate(TYPES):
    glue(f"fam_D_{name}", float(D[i, i]))

# %%
def sinkhorn_extrapolated(controls, mu, Sigma, T, n_large, n_steps, predictions, seed):
    """extrapolated_flow_deviations with this chapter's clouds and ratio."""
    return extrapolated_flow_deviations(controls, mu, Sigma, T, n_large, null_seeds, n_steps, predictions=predictions,
                                        ratio=extrapolation_ratio, seed=seed)


null_inv, plain_sinkhorn = {}, {}
for i, name in enumerate(TYPES):
    preds = {"own ODE": ctl_inv[name], **near_misses(ctl_inv[name], gain_error),
             **{f"{other} ODE": ctl_inv[other] for other in TYPES if other != name}}
    if name == "sinkhorn":
        dev, plain = sinkhorn_extrapolated(ctl_inv[name], mu0, Sigma0, t_end, null_tokens, steps, preds,
                                           null_seed + 100 * i)
        plain_sinkhorn["inv"] = hotelling_test(plain["own ODE"], null_level).ratio
    else:
        dev = flow_deviations(ctl_inv[name], mu0, Sigma0, t_end, null_tokens, null_seeds, steps, predictions=preds,
                              seed=null_seed + 100 * i, kernel_dtype=None)
    null_inv[name] = {k: hotelling_test(v, null_level) for k, v in dev.items()}
    glue(f"fam_T2_{name}", null_inv[name]["own ODE"].ratio)
glue("fam_T2_sinkhorn_plain", plain_sinkhorn["inv"])
{name: {k: round(t.ratio, 3) for k, t in tests.items()} for name, tests in null_inv.items()} | {
    "sinkhorn, plain test at null_tokens (not claimed)": round(plain_sinkhorn["inv"], 3)}

# %%
for name in ("dot", "l2"):  # Sinkhorn's finite-N test failed (see above): its rows are reported, not claimed
    tests = null_inv[name]
    claim(f"{name}: tokens follow their moment ODE (Hotelling T^2 / 99% quantile over {null_seeds} clouds)",
          tests["own ODE"].ratio, lt=1.0, statement="beyond_attention_families", kind="reproduces")
    claim(f"{name}: the same clouds reject the ODE with the attention term x {gain_error:g} (near miss)",
          tests[f"attention term x {gain_error:g}"].ratio, gt=1.0, statement="beyond_attention_families",
          kind="control")
    claim(f"{name}: the same clouds reject the ODE with queries and keys swapped (B^T for B)",
          tests["queries and keys swapped"].ratio, gt=1.0, statement="beyond_attention_families", kind="control")
    claim(f"{name}: the same clouds reject the other types' ODEs (smallest T^2 / 99% quantile)",
          min(t.ratio for k, t in tests.items() if k.endswith(" ODE") and k != "own ODE"), gt=1.0,
          statement="beyond_attention_families", kind="control")

# %% [markdown]
# Sinkhorn, not claimed: the extrapolated test gives $T^2$ at {glue:text}`fam_T2_sinkhorn:.2f` times its 99%
# quantile and the plain test at $N$ = `null_tokens` {glue:text}`fam_T2_sinkhorn_plain:.2f` times. The plain
# test was above 1 in both profiles (clouds of this size reject their own ODE at this resolution: the
# finite-$N$ bias); the extrapolated one above 1 in the quick profile ($N_2 = 500$) and below it in the full
# one ($N_2 = 1000$). The decay in $N$, claimed:

# %%
def decay_claims(decay, section, statement):
    """The reproduction (own ODE) and control (every other prediction) claims of a Sinkhorn decay study."""
    glue(f"fam_decay_slope_{section}", decay["own ODE"].slope)
    for k, dec in decay.items():
        if k == "own ODE":
            claim(f"sinkhorn ({section}): the covariance deviation from the own ODE vanishes as N grows "
                  f"(log-log slope + 3 SE, N in {list(decay_Ns)})", dec.slope + 3 * dec.se, lt=decay_slope,
                  statement=statement, kind="reproduces")
        else:
            claim(f"sinkhorn ({section}): the deviation from the {k} ODE levels off (slope - 3 SE)",
                  dec.slope - 3 * dec.se, gt=decay_slope, statement=statement, kind="control")
    return {k: (round(d.slope, 3), round(d.se, 3)) for k, d in decay.items()}


decay_inv = deviation_decay(ctl_inv["sinkhorn"], mu0, Sigma0, t_end, decay_Ns, null_seeds, steps,
                            predictions={"own ODE": ctl_inv["sinkhorn"], **near_misses(ctl_inv["sinkhorn"], gain_error)},
                            seed=decay_seed)
decay_claims(decay_inv, "a", "beyond_attention_families")

# %% [markdown]
# In the table of $D$ the diagonal (tokens against their own ODE) sits far below each row's fresh-sample
# floor and the off-diagonal entries above it. The claims above say more, and less: for the dot product
# and L2, independent clouds are consistent with their own ODE and reject both near misses of it and the
# other types' ODEs, at the resolution of the actual null. For Sinkhorn, clouds of these sizes are *not*
# consistent with their own ODE at that resolution (a finite-$N$ bias); what holds is that their
# deviation from it shrinks with $N$ while the deviation from each near miss levels off. The formulas are also checked in the tests: the
# Sinkhorn average against Sinkhorn scaling on a quadrature rule to $10^{-9}$, the L2 average against
# $2\times10^6$ sampled keys, and the $N^{-1/2}$ slope of the particles' error.
#
# ## (b) Asymptotics with the parameters that make the dot product blow up
#
# Take $A = 0$, $V = I$, $K = I$ and a symmetric positive-definite $Q$, so $B = K^\top Q = Q$, and
# $\Sigma_0 = I$. **Predictions from the derived ODEs, before integrating:**
#
# * *dot:* $\Sigma' = 2\Sigma Q\Sigma$, so $P = \Sigma^{-1}$ solves $P' = -2Q$: blow-up at
#   $t^* = 1/(2\lambda_{\max}(Q))$ ({py:func}`gtcore.riccati.blowup_time`).
# * *L2:* the gain $M = 2(I + 2\Sigma K^\top K)^{-1}\Sigma K^\top Q$ tends to $K^{-1}Q$ as
#   $\Sigma^{-1} \to 0$ and $\lVert M\rVert_2 \le \lVert K^{-1}Q\rVert_2\cdot$(a factor below 1
#   here), so $\lVert\Sigma(t)\rVert_2 \le \lVert\Sigma_0\rVert_2e^{2\lVert V\rVert\lVert K^{-1}Q\rVert t}$:
#   **no finite-time blow-up, exponential growth** at the asymptotic rate
#   $2\max\operatorname{Re}\lambda(A + VK^{-1}Q) = 2\lambda_{\max}(Q)$. That limit assumes
#   $\Sigma$ grows in every direction ($\Sigma^{-1} \to 0$). That needs every eigenvalue of
#   $A + VK^{-1}Q = Q$ to have positive real part, which holds here (and the integration shows
#   $\lambda_{\min}(\Sigma)$ growing too). When one has a negative real part, $\Sigma$ stays bounded
#   along it and the rate is different (e.g. $Q$ with rows $(1, 3)$ and $(0, -1)$: 2.27,
#   not 2; `tests/test_attention_families.py`).
# * *Sinkhorn:* $M\Sigma$ is the coupling's (transposed) cross-covariance, so
#   $\lVert M\Sigma\rVert_2 \le \lVert\Sigma\rVert_2$ (Cauchy–Schwarz) and
#   $\lVert\Sigma(t)\rVert_2 \le \lVert\Sigma_0\rVert_2e^{2(\lVert A\rVert + \lVert V\rVert)t}$:
#   **no finite-time blow-up**; for symmetric positive-definite $B$ the whitened coupling tends to
#   the identity, $M\Sigma \to \Sigma$, and the rate tends to $2\max\operatorname{Re}\lambda(A + V) = 2$,
#   for every symmetric positive-definite $Q$.
#
# **Tolerances, fixed in advance:** the fitted slope of $\log\lambda_{\max}(\Sigma)$ over the last
# unit of time may differ from the predicted rate by the neglected terms, which are
# $O(1/\lambda_{\min}(\Sigma))$ in both laws; $\lambda_{\min}(\Sigma(8))$ is about $700$ for L2 and
# $2\times10^6$ for Sinkhorn, so they are of order $10^{-3}$ at most: we allow `rate_tol` $=10^{-2}$.
# The Grönwall bounds are inequalities: their excess must be $\le 10^{-9}$ (the integrator's
# tolerance). The dot product's event time must match the closed-form $t^*$ to $10^{-3}$ relative
# (the event fires at $\lVert\Sigma\rVert_F = 10^8$, i.e. $\sim 10^{-8}$ before the pole).
#
# These claims compare the integrated moment ODE with the closed-form analysis of the *same* ODE:
# they are `derivation` claims (they would catch a wrong limit or bound, or an integrator error,
# not a wrong ODE). Whether tokens obey these ODEs is the next claim. The horizon $t = 8$ is
# bounded by the same event: from $\Sigma_0 = I$, L2 reaches $\lambda_{\max} \approx 7\times10^7$ at
# $t = 8$ and would trip the $10^8$ event shortly after; "no finite-time blow-up" therefore rests
# on the straight $\log\lambda_{\max}$ line (the rate claim), not on the integrator's status.

# %%
Q_blow = np.array(Q_blow)
ctl_blow = {name: Controls(V=I2, Q=Q_blow, K=I2, attention=name) for name in TYPES}
t_star = blowup_time(I2, ctl_blow["dot"]).t_star
glue("fam_t_star", t_star)
t_grid = np.linspace(0.0, t_long, 321)
long = {name: integrate_moments(np.zeros(2), I2, ctl_blow[name], (0.0, t_long), t_eval=t_grid) for name in TYPES}
rates = {name: predicted_rate(ctl_blow[name]) for name in ("l2", "sinkhorn")}
fitted = {name: growth_rate(long[name], rate_window) for name in rates}
bounds = {"l2": 2 * np.linalg.norm(np.linalg.solve(I2, Q_blow), 2), "sinkhorn": 2.0}

claim("dot: the covariance blows up at the closed-form t*", abs(long["dot"].crossing_time - t_star) / t_star,
      lt=1e-3, statement="blowup", kind="derivation")
for name in rates:
    glue(f"fam_rate_{name}", fitted[name])
    glue(f"fam_pred_{name}", rates[name])
    claim(f"{name}: no finite-time blow-up up to t = {t_long:g} (> {t_long / t_star:.0f} t*)",
          long[name].status is Status.COMPLETED and bool(np.all(np.isfinite(long[name].Sigma))),
          statement="beyond_families_asymptotics", kind="derivation")
    claim(f"{name}: growth rate of lambda_max matches the predicted {rates[name]:.4f}",
          abs(fitted[name] - rates[name]), lt=rate_tol, statement="beyond_families_asymptotics", kind="derivation")
    claim(f"{name}: the Groenwall bound holds along the trajectory", growth_bound_excess(long[name], bounds[name]),
          lt=1e-9, statement="beyond_families_asymptotics", kind="derivation")

# %% [markdown]
# Now tokens, over $[0, 1.5\,t^*]$: past the dot product's blow-up. The test is that of section (a), on
# `null_seeds` clouds of `blow_null_tokens` tokens. Controls: the attention-free ODE ($\Sigma$ constant:
# the growth the attention causes must register) and the attention term $1.1$ times too large. ($B = Q$ is
# symmetric here, so $B^\top$ for $B$ is no near miss. A first design used the other bounded law's ODE as
# the control; at this horizon L2 and Sinkhorn differed by less than the fresh-sample floor of a few
# hundred tokens, so that control failed; the difference is now only reported, as the $T^2$ ratio
# against the other law's ODE in the table below.) For Sinkhorn the extrapolated test (covariance only,
# the $1/N$ bias extrapolated out from clouds of `blow_null_tokens` and a third as many tokens) is only
# reported, and the claims are those of the decay in $N$, as in (a), with the attention-free ODE and the
# attention term $1.1$ times too large as controls (decided after the Sinkhorn test of (a) failed, before
# this section ran).

# %%
t_tok = blow_horizon * t_star
blow_runs = {name: run_family(ctl_blow[name], np.zeros(2), I2, t_tok, blow_tokens, blow_steps, seed=seed + 1)
             for name in ("l2", "sinkhorn")}
for name, other in (("l2", "sinkhorn"), ("sinkhorn", "l2")):
    r, o = blow_runs[name], blow_runs[other]
    floor = noise_floor(r.ode.mu[-1], r.ode.Sigma[-1], blow_tokens, noise_repeats, seed=200)
    glue(f"fam_blow_D_{name}", r.discrepancy)
    glue(f"fam_blow_cross_{name}", moment_discrepancy(r.particles.mu[-1], r.particles.Sigma[-1],
                                                       o.ode.mu[-1], o.ode.Sigma[-1]))
    glue(f"fam_blow_floor_{name}", floor)
null_blow = {}
for i, (name, other) in enumerate((("l2", "sinkhorn"), ("sinkhorn", "l2"))):
    preds = {"own ODE": ctl_blow[name], "attention-free ODE": Controls(A=np.zeros((2, 2))),
             f"attention term x {gain_error:g}": near_misses(ctl_blow[name], gain_error)[f"attention term x {gain_error:g}"],
             f"{other} ODE": ctl_blow[other]}
    if name == "sinkhorn":
        dev, plain = sinkhorn_extrapolated(ctl_blow[name], np.zeros(2), I2, t_tok, blow_null_tokens, blow_steps, preds,
                                           null_seed + 1000 + 100 * i)
        plain_sinkhorn["blow"] = hotelling_test(plain["own ODE"], null_level).ratio
    else:
        dev = flow_deviations(ctl_blow[name], np.zeros(2), I2, t_tok, blow_null_tokens, null_seeds, blow_steps,
                              predictions=preds, seed=null_seed + 1000 + 100 * i, kernel_dtype=None)
    null_blow[name] = {k: hotelling_test(v, null_level) for k, v in dev.items()}
    tests = null_blow[name]
    if name == "sinkhorn":
        continue
    claim(f"{name}: tokens stay finite and follow the ODE past t* (Hotelling T^2 / 99% quantile)",
          tests["own ODE"].ratio, lt=1.0, statement="beyond_families_asymptotics", kind="reproduces")
    claim(f"{name}: the same clouds reject the attention-free ODE", tests["attention-free ODE"].ratio, gt=1.0,
          statement="beyond_families_asymptotics", kind="control")
    claim(f"{name}: the same clouds reject the ODE with the attention term x {gain_error:g} (near miss)",
          tests[f"attention term x {gain_error:g}"].ratio, gt=1.0, statement="beyond_families_asymptotics",
          kind="control")
print({name: {k: round(t.ratio, 3) for k, t in tests.items()} for name, tests in null_blow.items()},
      f"sinkhorn, plain test (not claimed): {plain_sinkhorn['blow']:.3f}")
glue("fam_T2_sinkhorn_blow_plain", plain_sinkhorn["blow"])
glue("fam_T2_sinkhorn_blow", null_blow["sinkhorn"]["own ODE"].ratio)
decay_blow = deviation_decay(ctl_blow["sinkhorn"], np.zeros(2), I2, t_tok, decay_Ns, null_seeds, blow_steps,
                             predictions={"own ODE": ctl_blow["sinkhorn"],
                                          "attention-free": Controls(A=np.zeros((2, 2))),
                                          f"attention term x {gain_error:g}":
                                              near_misses(ctl_blow["sinkhorn"], gain_error)[
                                                  f"attention term x {gain_error:g}"]},
                             seed=decay_seed + 10000)
decay_claims(decay_blow, "b", "beyond_families_asymptotics")
fig = figs.growth_curves(long, t_star, rates, particles={k: v.particles for k, v in blow_runs.items()})

# %% [markdown]
# The dot product's $\log\lambda_{\max}$ (red) shoots up at $t^*$ (dotted line); L2 and Sinkhorn
# bend into straight lines whose slopes are the predicted rates (dashed): exponential growth, no
# blow-up. Tokens (circles) follow their ODEs past $t^*$: for L2 within the finite-$N$ null (the claims
# above); for Sinkhorn in the sense of the decay claims. Sinkhorn's Hotelling tests here, reported and not
# claimed: $T^2$ at {glue:text}`fam_T2_sinkhorn_blow:.2f` times its 99% quantile with the $1/N$ bias
# extrapolated out, {glue:text}`fam_T2_sinkhorn_blow_plain:.2f` times without (clouds of
# `blow_null_tokens`). The verdict: with the same
# $(V, Q, K)$, **dot product: finite-time blow-up; L2 with invertible keys and Sinkhorn:
# exponential growth** at $2\lambda_{\max}(Q)$ and $2$ respectively.
#
# ## (c) Several heads
#
# Three L2 heads with random (seeded) $Q_h$, invertible $K_h$ and values $V_h$, the layer of
# section (a) otherwise. The velocities add, so the derived ODE is the sum of the heads' drifts;
# the test is that of (a), on `null_seeds` clouds of `null_tokens` tokens, and the controls are the ODE of
# the first head alone and the two near misses of the summed ODE.
# Then the asymptotic rate with $H$ heads, $2\max\operatorname{Re}\lambda(A + \sum_hV_hK_h^{-1}Q_h)$,
# from $\Sigma_0 = I$ with $V_h = I/H$ (both eigenvalues of that matrix are positive here, so
# $\Sigma$ grows in every direction; a `derivation` claim, as in (b)). Last, two heads $(V, Q, K)$ and $(-V, Q, K)$ must cancel
# exactly, for every type: in the ODE and in the tokens (to round-off, $10^{-12}$).

# %%
rng = np.random.default_rng(seed)
Qh = head_scale * rng.standard_normal((n_heads, 2, 2))
Kh = I2 + head_scale * rng.standard_normal((n_heads, 2, 2))
Vh = -0.5 * I2 + head_scale * rng.standard_normal((n_heads, 2, 2))
ctl_heads = Controls(A=omega_A * J, V=Vh, Q=Qh, K=Kh, attention="l2")
heads_run = run_family(ctl_heads, mu0, Sigma0, t_end, n_tokens, steps, seed=seed + 2)
one_head = integrate_moments(heads_run.ode.mu[0], heads_run.ode.Sigma[0],
                             Controls(A=omega_A * J, V=Vh[:1], Q=Qh[:1], K=Kh[:1], attention="l2"), (0.0, t_end))
one_head_ctl = Controls(A=omega_A * J, V=Vh[:1], Q=Qh[:1], K=Kh[:1], attention="l2")
dev_h = flow_deviations(ctl_heads, mu0, Sigma0, t_end, null_tokens, null_seeds, steps,
                        predictions={"summed ODE": ctl_heads, "one-head ODE": one_head_ctl,
                                     **near_misses(ctl_heads, gain_error)},
                        seed=null_seed + 2000, kernel_dtype=None)
null_heads = {k: hotelling_test(v, null_level) for k, v in dev_h.items()}
print({k: round(t.ratio, 3) for k, t in null_heads.items()})
claim(f"{n_heads} L2 heads: tokens follow the summed moment ODE (Hotelling T^2 / 99% quantile)",
      null_heads["summed ODE"].ratio, lt=1.0, statement="beyond_multihead", kind="reproduces")
claim(f"{n_heads} L2 heads: the same clouds reject the one-head ODE", null_heads["one-head ODE"].ratio, gt=1.0,
      statement="beyond_multihead", kind="control")
claim(f"{n_heads} L2 heads: the same clouds reject the ODE with the attention term x {gain_error:g}",
      null_heads[f"attention term x {gain_error:g}"].ratio, gt=1.0, statement="beyond_multihead", kind="control")
claim(f"{n_heads} L2 heads: the same clouds reject the ODE with queries and keys swapped",
      null_heads["queries and keys swapped"].ratio, gt=1.0, statement="beyond_multihead", kind="control")

ctl_h_blow = Controls(V=np.stack([I2 / n_heads] * n_heads), Q=Qh + np.stack([Q_blow] * n_heads), K=Kh,
                      attention="l2")
h_long = integrate_moments(np.zeros(2), I2, ctl_h_blow, (0.0, t_long), t_eval=t_grid)
h_rate = predicted_rate(ctl_h_blow)
glue("fam_rate_heads", growth_rate(h_long, rate_window))
claim(f"{n_heads} L2 heads: growth rate matches the predicted {h_rate:.4f}",
      abs(growth_rate(h_long, rate_window) - h_rate), lt=rate_tol, statement="beyond_multihead", kind="derivation")

x0 = gaussian_tokens(500, mu0, Sigma0, seed=seed + 3)
cancel = [head_cancellation(Controls(A=omega_A * J, V=[Vh[0], -Vh[0]], Q=[Qh[0], Qh[0]], K=[Kh[0], Kh[0]],
                                     attention=name), Controls(A=omega_A * J), mu0, Sigma0, x0, t_end, 10)
          for name in TYPES]
cancel_ode, cancel_tok = max(c[0] for c in cancel), max(c[1] for c in cancel)
claim("opposite heads cancel in the moment ODE (all types)", cancel_ode, lt=1e-12, statement="beyond_multihead",
      kind="consistency")
claim("opposite heads cancel in the tokens (all types)", cancel_tok, lt=1e-12, statement="beyond_multihead",
      kind="consistency")

# %% [markdown]
# What the reader saw: Gaussian invariance and a moment ODE are not special to the dot product. For the
# dot product and L2 (logits at most quadratic in the key), in the layer of (a), independent token clouds
# are consistent with the type's own derived ODE at the resolution of the finite-$N$ null, and reject a
# 10% error in its attention term, queries and keys swapped, and the other types' ODEs. For their
# doubly-stochastic version (Sinkhorn) clouds of a few hundred to a thousand tokens are *not* consistent
# with the derived ODE at that resolution: a finite-$N$ bias ($T^2$ at
# {glue:text}`fam_T2_sinkhorn_plain:.1f` times its 99% quantile in (a), {glue:text}`fam_T2_sinkhorn_blow_plain:.1f`
# in (b); a finding, not a claim). With a $1/N$ bias extrapolated out (a test designed after seeing that)
# the clouds passed in (b) and, at the full profile's sizes, in (a), but failed in (a) at the quick
# profile's: reported, not claimed. What the claims show for Sinkhorn is that the clouds' deviation from
# its ODE shrinks as $N$ grows (log–log slope {glue:text}`fam_decay_slope_a:.2f` in (a)) while their
# deviation from each near miss levels off; that rules out errors as large as the near misses, not smaller
# ones. With the query, key and value maps that make the dot product blow up in finite time, the
# integrated L2 (invertible keys) and Sinkhorn ODEs grow exponentially at the rates read off the derived
# ODE; L2 token clouds follow their ODE past the dot product's $t^*$ within the finite-$N$ null (rejecting
# the attention-free ODE and a 10% gain error), and Sinkhorn clouds' deviation from theirs shrinks with
# $N$ there too. Three L2 heads add, as token clouds confirm against the summed ODE (rejecting the
# one-head ODE and both near misses), and opposite heads cancel exactly.
