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
# In $d = 2$, token clouds under dot-product and L2 attention are consistent with their type's own moment ODE
# at the resolution of the finite-$N$ null (Hotelling's $T^2$ at {glue:text}`fam_T2_dot:.2f` and
# {glue:text}`fam_T2_l2:.2f` of its 99 % quantile) and reject a 10 % error in its attention term, swapped
# queries and keys, and the other types' ODEs ({numref}`fig-families-clouds`), while Sinkhorn clouds carry a
# finite-$N$ bias and only their deviation from their ODE shrinking with $N$ is shown (log–log slope
# {glue:text}`fam_decay_slope_a:.2f`). With the maps that make the dot product blow up at
# $t^* =$ {glue:text}`fam_t_star:.3f`, the L2 and Sinkhorn moment ODEs grow exponentially instead, at the rates
# derived from them ({glue:text}`fam_rate_l2:.3f` and {glue:text}`fam_rate_sinkhorn:.3f`), and three L2 heads
# add as the summed ODE says.
#
# The paper's attention is the dot product: logits $x_j^\top Bx_i$, softmax over the keys $j$.
# Is Gaussian invariance special to it, and do other attention laws blow up too? This chapter
# answers for three laws, each with its own derivation in {py:mod}`gtcore.attention`, checked against
# tokens and against the moment ODE. Everything here is **beyond the paper**, and runs in $d = 2$.
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
# The tests (`tests/studies/test_attention_families.py`) check every covariance right-hand side at zero
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
blow_tokens = 1000
blow_steps = 20
blow_horizon = 1.5
n_heads = 3
head_scale = 0.3
null_tokens = 1000
blow_null_tokens = 300
null_seeds = 10
decay_Ns = [250, 500, 1000, 2000]

# %%
from IPython.display import Markdown, display

from gtbook import claim
from gtbook.glue import glue
from gtbook.studies.families.study import asymptotics_study, families_layer, heads_study, invariance_study

# %% [markdown]
# ## (a) Invariance: tokens against the moment ODE, per type
#
# One layer for all three types: $A = \omega_A J$, $V = v I + \omega_V J$ with $v < 0$, and the
# same $Q, K$ ($B = K^\top Q$ for the dot product and Sinkhorn): a skew $A$, a non-symmetric $V$ and $B$.
# $N$ tokens start from $N(\mu_0, \Sigma_0)$ and move under each type's finite-$N$ attention
# ({py:func}`gtcore.particles.simulate`); each type's moment ODE starts from the tokens' own empirical moments,
# so the initial sampling error is not counted. What is left is the finite-$N$ attention's own error, a
# fluctuation of mean zero (up to an $O(1/N)$ bias) around the moment ODE when the ODE is right, and with a
# common offset when it is wrong.
#
# **The test.** `null_seeds` independent clouds of `null_tokens` tokens move under each type's layer; each is
# compared with the ODE started from its own moments through the signed, scale-free deviation of its mean
# and covariance at $T$ (`gtbook.studies.nulls.signed_deviation`, $p = 5$ coordinates), and Hotelling's test
# (`hotelling_test`) asks whether the mean deviation is zero; the value is $T^2$ over its 99 % quantile under
# the null. *Reproduction* (ratio below 1): the tokens against their own type's ODE. *Controls* (ratio above
# 1): the same clouds against near misses of that ODE, the attention term 1.1 times too large ($V \to 1.1V$:
# for every type a 10 % error in the gain $M$ of the covariance equation) and the queries and keys swapped
# (for the dot product and Sinkhorn, $B^\top$ in place of $B$), and against the other two types' ODEs. The
# tokens and the ODE are computed by different code (finite-$N$ softmax, L2 or Sinkhorn weights against the
# Gaussian averages of the table above), so these are reproductions on tokens.
#
# **Sinkhorn.** Clouds of these sizes carry an $O(1/N)$ bias of the finite-$N$ Sinkhorn scaling (an entropic
# transport plan estimated from $N$ samples), several standard errors at these $N$, and their mean deviation is
# no fluctuation at all (doubly stochastic attention conserves the cloud's mean exactly). Hotelling's test
# of Sinkhorn's clouds, on the covariance part with the $1/N$ bias extrapolated out from clouds of $N$ and
# $N/3$ tokens, is reported and not claimed. What is claimed is what the moment ODE predicts of the clouds
# as $N$ grows: their covariance deviation from the ODE started at their own moments vanishes (fluctuation
# $\sim N^{-1/2}$, bias $\sim N^{-1}$), while the deviation from a wrong ODE levels off at its error.
# `deviation_decay` measures the log–log slope in $N$ of the mean over `null_seeds` clouds of
# $\lVert\delta_s\rVert$ (covariance part), for $N$ in `decay_Ns`, with a bootstrap standard error.
# **Threshold:** $-1/4$, halfway between the slowest decay of a right ODE ($-1/2$) and a wrong one's levelling
# off ($0$). *Reproduction:* the own ODE's slope $+\,3$ SE below $-1/4$. *Controls:* each near miss's slope
# $-\,3$ SE above $-1/4$. This rules out errors as large as the near misses, not smaller ones (the formula
# itself is checked in the tests against Sinkhorn scaling on a quadrature rule, to $10^{-9}$).

# %%
layer = families_layer(omega_A, v_inv, omega_V, Q_inv, K_inv)
inv = invariance_study(layer, mu0, Sigma0, t_end, n_tokens=n_tokens, steps=steps, noise_repeats=noise_repeats,
                       null_tokens=null_tokens, null_seeds=null_seeds, decay_Ns=decay_Ns, seed=seed)
display(Markdown(inv.table()))

# %% tags=["hide-input"]
for name in ("dot", "l2"):  # Sinkhorn's Hotelling test is reported, not claimed: see above
    tests, scope = inv.tests[name], inv.scope(name)
    glue(f"fam_T2_{name}", tests["own ODE"].ratio)
    claim(f"{name}: tokens follow their moment ODE (Hotelling T^2 / 99% quantile over {null_seeds} clouds)",
          tests["own ODE"].ratio, lt=1.0, statement="beyond_attention_families", kind="reproduces", scope=scope,
          sides=inv.sides[name])
    claim(f"{name}: the same clouds reject the ODE with the attention term x 1.1 (near miss)",
          tests["attention term x 1.1"].ratio, gt=1.0, statement="beyond_attention_families", kind="control",
          scope=scope)
    claim(f"{name}: the same clouds reject the ODE with queries and keys swapped (B^T for B)",
          tests["queries and keys swapped"].ratio, gt=1.0, statement="beyond_attention_families", kind="control",
          scope=scope)
    claim(f"{name}: the same clouds reject the other types' ODEs (smallest T^2 / 99% quantile)",
          min(t.ratio for k, t in tests.items() if k.endswith(" ODE") and k != "own ODE"), gt=1.0,
          statement="beyond_attention_families", kind="control", scope=scope)
glue("fam_T2_sinkhorn", inv.tests["sinkhorn"]["own ODE"].ratio)
glue("fam_T2_sinkhorn_plain", inv.sinkhorn_plain)
glue("fam_decay_slope_a", inv.decay["own ODE"].slope)
for k, dec in inv.decay.items():
    if k == "own ODE":
        claim(f"sinkhorn (a): the covariance deviation from the own ODE vanishes as N grows (log-log slope + 3 SE, "
              f"N in {list(decay_Ns)})", dec.slope + 3 * dec.se, lt=-0.25, statement="beyond_attention_families",
              kind="reproduces", scope=inv.scope("sinkhorn"), sides=inv.sides["decay"])
    else:
        claim(f"sinkhorn (a): the deviation from the {k} ODE levels off (slope - 3 SE)", dec.slope - 3 * dec.se,
              gt=-0.25, statement="beyond_attention_families", kind="control", scope=inv.scope("sinkhorn"))

# %% mystnb={"figure": {"name": "fig-families-clouds", "caption": "The same layer and the same initial cloud under three attention laws: tokens (dots) at t = T inside the 1σ and 2σ ellipses of that type's moment ODE (solid, dashed); the dotted ellipse is the start."}, "image": {"alt": "Three square panels, dot, l2 and sinkhorn, each a cloud of blue dots inside red solid and dashed ellipses; the three ellipses differ in size and orientation from panel to panel, and each cloud fills its own ellipses."}}
fig = inv.clouds_figure()

# %% [markdown]
# The table gives, per type, the moment discrepancy
# $D = \lVert\hat\mu - \mu\rVert/\lVert\Sigma\rVert_2^{1/2} + \lVert\hat\Sigma - \Sigma\rVert_F/\lVert\Sigma\rVert_F$
# of the figure's cloud against its own ODE, beside the 99th percentile of $D$ for as many fresh i.i.d.
# Gaussian tokens (the *fresh-sample floor*, far wider than the test's null, and no claim), then the $T^2$
# ratios of the tests. For the dot product and L2, independent clouds are consistent with their own ODE and
# reject both near misses of it and the other types' ODEs, at the resolution of the actual null. For
# Sinkhorn the extrapolated test gives $T^2$ at {glue:text}`fam_T2_sinkhorn:.2f` times its 99 % quantile and the
# plain test at $N$ = `null_tokens` {glue:text}`fam_T2_sinkhorn_plain:.2f` times (reported, not claimed); the
# claims are that the clouds' deviation from Sinkhorn's ODE shrinks with $N$ while the deviation from each
# near miss levels off. The formulas are also checked in the tests: the Sinkhorn average against Sinkhorn
# scaling on a quadrature rule to $10^{-9}$, the L2 average against $2\times10^6$ sampled keys, and the
# $N^{-1/2}$ slope of the particles' error.
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
#   $\Sigma$ grows in every direction ($\Sigma^{-1} \to 0$), which needs every eigenvalue of
#   $A + VK^{-1}Q = Q$ to have positive real part, as here. When one has a negative real part, $\Sigma$ stays
#   bounded along it and the rate is different (e.g. $Q$ with rows $(1, 3)$ and $(0, -1)$: 2.27,
#   not 2; `tests/studies/test_attention_families.py`).
# * *Sinkhorn:* $M\Sigma$ is the coupling's (transposed) cross-covariance, so
#   $\lVert M\Sigma\rVert_2 \le \lVert\Sigma\rVert_2$ (Cauchy–Schwarz) and
#   $\lVert\Sigma(t)\rVert_2 \le \lVert\Sigma_0\rVert_2e^{2(\lVert A\rVert + \lVert V\rVert)t}$:
#   **no finite-time blow-up**; for symmetric positive-definite $B$ the whitened coupling tends to
#   the identity, $M\Sigma \to \Sigma$, and the rate tends to $2\max\operatorname{Re}\lambda(A + V) = 2$.
#
# **Tolerances, fixed in advance:** the fitted slope of $\log\lambda_{\max}(\Sigma)$ over the last
# unit of time may differ from the predicted rate by the neglected terms, $O(1/\lambda_{\min}(\Sigma))$ in both
# laws; $\lambda_{\min}(\Sigma(8))$ is about $700$ for L2 and $2\times10^6$ for Sinkhorn, so they are of order
# $10^{-3}$ at most: we allow $10^{-2}$. The Grönwall bounds are inequalities: their excess must be
# $\le 10^{-9}$ (the integrator's tolerance). The dot product's event time must match the closed-form $t^*$ to
# $10^{-3}$ relative (the event fires at $\lVert\Sigma\rVert_F = 10^8$, $\sim 10^{-8}$ before the pole). These
# compare the integrated moment ODE with the analysis of the *same* ODE: `derivation` claims (they catch a
# wrong limit or bound, or an integrator error, not a wrong ODE). The horizon $t = 8$ is bounded by the same
# event (L2 reaches $\lambda_{\max} \approx 7\times10^7$ there), so "no finite-time blow-up" rests on the
# straight $\log\lambda_{\max}$ line (the rate claim), not on the integrator's status.
#
# Whether tokens obey these ODEs past the dot product's blow-up: the test of section (a) over
# $[0, 1.5\,t^*]$, on `null_seeds` clouds of `blow_null_tokens` tokens, against the type's own ODE. Controls:
# the attention-free ODE ($\Sigma$ constant: the growth the attention causes must register) and the attention
# term 1.1 times too large ($B = Q$ is symmetric here, so $B^\top$ for $B$ is no near miss); the other bounded
# law's ODE is reported. For Sinkhorn, as in (a), the extrapolated test is reported and the claims are those
# of the decay in $N$, with the attention-free ODE and the attention term 1.1 times too large as controls.

# %%
asym = asymptotics_study(Q_blow, t_long=t_long, horizon=blow_horizon, n_tokens=blow_tokens, steps=blow_steps,
                         null_tokens=blow_null_tokens, null_seeds=null_seeds, decay_Ns=decay_Ns, seed=seed)
display(Markdown(asym.table()))

# %% tags=["hide-input"]
glue("fam_t_star", asym.t_star)
claim("dot: the covariance blows up at the closed-form t*", abs(asym.long["dot"].crossing_time - asym.t_star) / asym.t_star,
      lt=1e-3, statement="blowup", kind="derivation", scope=asym.scope("dot"))
for name in ("l2", "sinkhorn"):
    glue(f"fam_rate_{name}", asym.fitted[name])
    glue(f"fam_pred_{name}", asym.predicted[name])
    claim(f"{name}: no finite-time blow-up up to t = {t_long:g} (> {t_long / asym.t_star:.0f} t*)", asym.finite(name),
          statement="beyond_families_asymptotics", kind="derivation", scope=asym.scope(name))
    claim(f"{name}: growth rate of lambda_max matches the predicted {asym.predicted[name]:.4f}",
          abs(asym.fitted[name] - asym.predicted[name]), lt=1e-2, statement="beyond_families_asymptotics",
          kind="derivation", scope=asym.scope(name))
    claim(f"{name}: the Groenwall bound holds along the trajectory", asym.bound_excess[name], lt=1e-9,
          statement="beyond_families_asymptotics", kind="derivation", scope=asym.scope(name))
tests = asym.tests["l2"]
claim("l2: tokens stay finite and follow the ODE past t* (Hotelling T^2 / 99% quantile)", tests["own ODE"].ratio,
      lt=1.0, statement="beyond_families_asymptotics", kind="reproduces", scope=asym.scope("l2", "tokens"),
      sides=asym.sides["l2"])
claim("l2: the same clouds reject the attention-free ODE", tests["attention-free ODE"].ratio, gt=1.0,
      statement="beyond_families_asymptotics", kind="control", scope=asym.scope("l2", "tokens"))
claim("l2 past t*: the same clouds reject the ODE with the attention term x 1.1 (near miss)",
      tests["attention term x 1.1"].ratio, gt=1.0, statement="beyond_families_asymptotics", kind="control",
      scope=asym.scope("l2", "tokens"))
glue("fam_T2_sinkhorn_blow_plain", asym.sinkhorn_plain)
glue("fam_T2_sinkhorn_blow", asym.tests["sinkhorn"]["own ODE"].ratio)
for k, dec in asym.decay.items():
    if k == "own ODE":
        claim(f"sinkhorn (b): the covariance deviation from the own ODE vanishes as N grows (log-log slope + 3 SE, "
              f"N in {list(decay_Ns)})", dec.slope + 3 * dec.se, lt=-0.25, statement="beyond_families_asymptotics",
              kind="reproduces", scope=asym.scope("sinkhorn", "tokens"), sides=asym.sides["decay"])
    else:
        claim(f"sinkhorn (b): the deviation from the {k} ODE levels off (slope - 3 SE)", dec.slope - 3 * dec.se,
              gt=-0.25, statement="beyond_families_asymptotics", kind="control", scope=asym.scope("sinkhorn", "tokens"))

# %% mystnb={"figure": {"name": "fig-families-growth", "caption": "The largest eigenvalue of the covariance under the layer that makes the dot product blow up: the dot product's moment ODE (red) shoots up at t* (dotted line); L2 and Sinkhorn bend into straight lines whose slopes are the predicted rates (dashed). Circles: token clouds, followed past t*."}, "image": {"alt": "A plot of log lambda_max against t from 0 to 8. The red dot-product curve rises steeply to a vertical asymptote near t = 0.4; the L2 and Sinkhorn curves rise along straight lines with dashed reference slopes at their ends; circles of the token clouds lie on the L2 and Sinkhorn curves near the start."}}
fig = asym.figure()

# %% [markdown]
# In {numref}`fig-families-growth` the dot product's $\log\lambda_{\max}$ shoots up at $t^*$; L2 and Sinkhorn
# bend into straight lines whose slopes are the predicted rates: exponential growth, no blow-up. Tokens follow
# their ODEs past $t^*$: for L2 within the finite-$N$ null (the claims above); for Sinkhorn in the sense of the
# decay claims. Sinkhorn's Hotelling tests here, reported and not claimed: $T^2$ at
# {glue:text}`fam_T2_sinkhorn_blow:.2f` times its 99 % quantile with the $1/N$ bias extrapolated out,
# {glue:text}`fam_T2_sinkhorn_blow_plain:.2f` times without (clouds of `blow_null_tokens`). The verdict: with
# the same $(V, Q, K)$, **dot product: finite-time blow-up; L2 with invertible keys and Sinkhorn: exponential
# growth** at $2\lambda_{\max}(Q)$ and $2$ respectively.
#
# ## (c) Several heads
#
# Three L2 heads with random (seeded) $Q_h$, invertible $K_h$ and values $V_h$, the layer of
# section (a) otherwise. The velocities add, so the derived ODE is the sum of the heads' drifts;
# the test is that of (a), on `null_seeds` clouds of `null_tokens` tokens, and the controls are the ODE of
# the first head alone and the two near misses of the summed ODE.
# Then the asymptotic rate with $H$ heads, $2\max\operatorname{Re}\lambda(A + \sum_hV_hK_h^{-1}Q_h)$,
# from $\Sigma_0 = I$ with $V_h = I/H$ (both eigenvalues of that matrix are positive here, so
# $\Sigma$ grows in every direction; a `derivation` claim, as in (b)). Last, two heads $(V, Q, K)$ and
# $(-V, Q, K)$ must cancel exactly, for every type: in the ODE and in the tokens (to round-off, $10^{-12}$).

# %%
heads = heads_study(n_heads, head_scale, omega_A=omega_A, Q_blow=Q_blow, mu0=mu0, Sigma0=Sigma0, t_end=t_end,
                    t_long=t_long, null_tokens=null_tokens, null_seeds=null_seeds, steps=steps, seed=seed)
display(Markdown(heads.table()))

# %% tags=["hide-input"]
summed = heads.tests
claim(f"{n_heads} L2 heads: tokens follow the summed moment ODE (Hotelling T^2 / 99% quantile)",
      summed["summed ODE"].ratio, lt=1.0, statement="beyond_multihead", kind="reproduces", scope=heads.scope(),
      sides=heads.sides)
claim(f"{n_heads} L2 heads: the same clouds reject the one-head ODE", summed["one-head ODE"].ratio, gt=1.0,
      statement="beyond_multihead", kind="control", scope=heads.scope())
claim(f"{n_heads} L2 heads: the same clouds reject the ODE with the attention term x 1.1",
      summed["attention term x 1.1"].ratio, gt=1.0, statement="beyond_multihead", kind="control", scope=heads.scope())
claim(f"{n_heads} L2 heads: the same clouds reject the ODE with queries and keys swapped",
      summed["queries and keys swapped"].ratio, gt=1.0, statement="beyond_multihead", kind="control",
      scope=heads.scope())
glue("fam_rate_heads", heads.fitted)
claim(f"{n_heads} L2 heads: growth rate matches the predicted {heads.predicted:.4f}",
      abs(heads.fitted - heads.predicted), lt=1e-2, statement="beyond_multihead", kind="derivation",
      scope=heads.scope("growth", "moment ODE"))
claim("opposite heads cancel in the moment ODE (all types)", max(c[0] for c in heads.cancel.values()), lt=1e-12,
      statement="beyond_multihead", kind="consistency", scope=heads.scope("cancel", "moment ODE"))
claim("opposite heads cancel in the tokens (all types)", max(c[1] for c in heads.cancel.values()), lt=1e-12,
      statement="beyond_multihead", kind="consistency", scope=heads.scope("cancel", "tokens"))

# %% [markdown]
# ## What we saw
#
# Gaussian invariance and a moment ODE are not special to the dot product. For the dot product and L2
# (logits at most quadratic in the key), in the layer of (a) (skew $A$, non-symmetric $V$ and $B$, $d = 2$),
# independent token clouds are consistent with the type's own derived ODE at the resolution of the finite-$N$
# null, and reject a 10 % error in its attention term, queries and keys swapped, and the other types' ODEs. For
# their doubly-stochastic version (Sinkhorn) clouds of a few hundred to a thousand tokens are *not*
# consistent with the derived ODE at that resolution: a finite-$N$ bias ($T^2$ at
# {glue:text}`fam_T2_sinkhorn_plain:.1f` times its 99 % quantile in (a), {glue:text}`fam_T2_sinkhorn_blow_plain:.1f`
# in (b); a finding, not a claim). What the claims show for Sinkhorn is that the clouds' deviation from its
# ODE shrinks as $N$ grows (log–log slope {glue:text}`fam_decay_slope_a:.2f` in (a)) while their deviation from
# each near miss levels off; that rules out errors as large as the near misses, not smaller ones. With the
# query, key and value maps that make the dot product blow up in finite time, the integrated L2 (invertible
# keys) and Sinkhorn ODEs grow exponentially at the rates read off the derived ODE; L2 token clouds follow
# their ODE past the dot product's $t^*$ within the finite-$N$ null (rejecting the attention-free ODE and a
# 10 % gain error), and Sinkhorn clouds' deviation from theirs shrinks with $N$ there too. Three L2 heads add,
# as token clouds confirm against the summed ODE (rejecting the one-head ODE and both near misses), and
# opposite heads cancel exactly. Everything ran in $d = 2$: no claim here covers $d \ge 3$.
#
# ## How these checks were designed
#
# ```{dropdown} Revisions, seeds and the mutations behind these claims
# *Seeds.* The figure's clouds use `seed` (section (a)), `seed + 1` (section (b)) and `seed + 3` (the
# cancelling heads); the fresh-sample floors seeds from 100. The finite-$N$ tests' clouds take seeds from
# `seed + 2271` on (they were new when this test was designed: no earlier run of the chapter had used them),
# the decay in $N$'s from `seed + 22271` on (new when the decay claims were added); section (b)'s tests add
# 1000 and 10000 to these, section (c)'s 2000.
#
# *The fresh-sample floor was the first threshold.* An earlier version of this chapter claimed $D$ below the
# fresh-sample floor, for each type. But the ODE starts from the tokens' own moments, so the initial sampling
# error cancels and $D$ sits ten to a few hundred times below the floor, far too wide a band to see a small
# error in the right ODE: an L2 or Sinkhorn gain 10 % too large, or the Sinkhorn gain with $B^\top$ in place of
# $B$, would still pass (checked by hand: $D \approx 0.03$–$0.08$ against floors of $0.14$ at $N = 1000$ and
# $0.085$ at $N = 3000$). The Hotelling test on independent clouds, with its threshold calibrated to the
# actual null, replaced it, fixed in advance.
#
# *Sinkhorn's finite-$N$ test failed, twice.* In the first run of the Hotelling design (quick profile,
# $N = 500$) the Sinkhorn clouds rejected their own ODE while the dot-product and L2 clouds were consistent with
# theirs. A pilot by hand, not rerun by the chapter, on seeds it does not use (from 5000; $N = 250$ to $2000$, 8
# clouds each) showed why: the clouds' mean covariance deviation from the ODE shrinks like $1/N$ ($N$ times it
# stays near $-0.65$ in the largest coordinates), an $O(1/N)$ bias. The extrapolated test (covariance only, the
# $c/N$ bias removed by Richardson extrapolation from paired clouds of $N_2$ and $N_1 = N_2/3$ tokens,
# `extrapolated_deviations`) was designed after seeing that; its first run (quick profile, $N_2 = 500$,
# $N_1 = 166$) gave $T^2$ at 1.6 times its 99 % quantile (the plain test at $N_2$: 2.6 times); at the full
# profile's sizes, run afterwards, it came out below 1. A test designed after seeing values, that then failed
# once, is no claim: the chapter does not claim that clouds of these sizes follow the Sinkhorn ODE within their
# fluctuation, with or without the extrapolation, and the Sinkhorn $T^2$ ratios are reported only. The decay in
# $N$ was chosen after seeing those values too; its threshold ($-1/4$) was written before it ran. In section
# (b) the Sinkhorn claims were decided the same way, after the test of (a) failed and before (b) ran.
#
# *Section (b)'s controls.* A first design used the other bounded law's ODE as the control of the token test;
# at this horizon L2 and Sinkhorn differed by less than the fresh-sample floor of a few hundred tokens, so that
# control failed; the difference is now only reported, as the $T^2$ ratio against the other law's ODE.
#
# *Scopes.* Every claim records the classes its layer belongs to, read off the matrices
# (`gtbook.studies.scoping.layer_scope`): section (a)'s layer has a skew (normal) $A$ and a general $V$ and $B$;
# section (b)'s $A = 0$, $V = I$ and a symmetric $B$; all in $d = 2$.
#
# *Traced sides.* Each reproduction records the library functions its two sides ran: the observed side is the
# tokens moved by the $N$-token simulator with the type's finite-$N$ kernel; the predicted side is every moment
# ODE the clouds are tested against from their own moments (the own ODE, the near misses and the other types'
# ODEs, counted together). Hotelling's test and the decay slope are the comparison and count on neither side.
# The book refuses a reproduction whose two sides share model code; none of this chapter's do.
# ```
