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
# # 9. Reachability seen from learning
#
# A Transformer of $N$ tokens trained by gradient descent through its tokens reached every same-rank Gaussian
# target of a seeded ensemble as closely as two independent samples of the target are to each other, with and
# without attention ({numref}`fig-learning-ensemble`); without attention, from a rank-2 start, it stopped at the
# rank floor plus a finite-$N$ slack that shrinks like that of the nearest rank-2 Gaussian (slope
# {glue:text}`trained_slope:.2f` against {glue:text}`null_slope:.2f`), and with attention every network that
# ended below that wall ({glue:text}`n_below` of {glue:text}`n_behind`) had left its own Gaussian dynamics.
#
# The paper reads expressivity as reachability {cite}`alcalde2026gaussian`: "we prove exact finite-time
# reachability of any target Gaussian distribution whose covariance matrix has the same rank as the initial
# one, this rank constraint being an intrinsic invariant of the dynamics." Chapter 3 reached such targets
# with controls built for the purpose: a stretch and a rotation, or a minimum-energy optimiser working on
# eq. (1.1). Transformers are not built that way; they are **trained**. This chapter trains one: $N$ tokens
# drawn from $N(\mu_0, \Sigma_0)$, $L$ residual layers with softmax attention, every layer's controls
# learned by gradient descent through the tokens, and a loss that compares the output tokens with a sample
# of the target $N(\mu_1, \Sigma_1)$ without assuming anything Gaussian. Reachability then becomes a
# prediction about training (the loss can reach the noise floor of $N$ tokens), and rank invariance a second
# one (from a rank-$r$ start the loss cannot go below the distance from the target to the reachable set). The
# second holds exactly for networks without attention; with softmax attention at finite $N$ it need not, and
# section (f) shows what training does with that.
#
# The network is $L$ residual layers with softmax attention and learned controls; its loss is the $W_2^2$
# between its output tokens and a sample of the target, measured on fresh tokens and compared with the noise
# floor of $N$ tokens, the loss two independent samples leave.
#
# ```{dropdown} The network, the loss and the noise floor
# **The network.** Layer $l = 0, \dots, L-1$ has its own controls $(A_l, b_l, V_l, B_l)$ and step $h = T/L$:
#
# $$
# x_i^{l+1} = x_i^l + h\Big(A_l x_i^l + b_l + V_l \sum_{j=1}^N
#   \frac{e^{x_j^{l\top} B_l x_i^l}}{\sum_m e^{x_m^{l\top} B_l x_i^l}}\, x_j^l\Big),
# $$
#
# explicit Euler with $L$ steps for the particle system of the book ({py:func}`gtcore.training.transformer_tokens`;
# a test checks it against {py:func}`gtcore.simulate(..., method="euler") <gtcore.particles.simulate>` to round-off). For a Gaussian input the
# layer map is exact (chapter 1): $N(\mu, \Sigma) \mapsto N(\mu^+, M\Sigma M^\top)$ with
# $M = I + h(A_l + V_l\Sigma B_l)$.
#
# **The loss.** With $X$ the $N$ output tokens and $Y$ an $N$-sample of the target,
#
# $$
# \ell(X, Y) = W_2^2\Big(\tfrac1N\textstyle\sum_i \delta_{x_i},\ \tfrac1N\sum_i\delta_{y_i}\Big)
#   = \min_{\sigma} \frac1N\sum_i \lVert x_i - y_{\sigma(i)}\rVert^2,
# $$
#
# an optimal assignment, differentiated with the optimal $\sigma$ held fixed ({py:mod}`gtcore.training`). Adam runs
# on **fresh samples at every step** (new input tokens, a new target sample), so each recorded loss is
# measured on tokens the network has not been trained on. The squared Bures–Wasserstein distance of the
# output's moments to $(\mu_1, \Sigma_1)$ is recorded beside it: the Gaussian part of the loss.
#
# **The noise floor of $N$ tokens.** Even a perfect network leaves a loss: two independent $N$-samples of
# the same Gaussian are at a positive $W_2^2$. The floor is therefore *computed*: the distribution of
# $\ell(X', Y')$ over independent pairs, $X'$ drawn from the best distribution the network can reach and
# $Y'$ from the target ({py:func}`gtbook.studies.learning.harness.null_losses`).
# ```
#
# ## The rank floor
#
# Any distribution carried by an $r$-dimensional affine subspace is at a squared $W_2$ distance of at least
# $F_r(\Sigma_1) = \sum_{k>r}\lambda_k$ (the sum of the $d - r$ smallest eigenvalues of $\Sigma_1$) from the target
# $N(\mu_1, \Sigma_1)$, with equality at the **nearest reachable Gaussian** $N(\mu_1, P_E\Sigma_1P_E)$. Without
# attention the network is affine, so from a rank-$r$ start its $N$ tokens obey the exact finite-$N$ floor
# $\ell(X, Y) \ge F_r(\hat\Sigma_Y)$; with softmax attention at finite $N$ the cloud can bend out of its
# subspace and could, in principle, do better than that floor by an amount that vanishes as $N \to \infty$. The
# **slack** is $s = \ell(X, Y) - F_r(\hat\Sigma_Y)$.
#
# ```{dropdown} The derivation, why the network meets the floor, and what the slack is
# Let $\nu$ be any probability measure carried by an affine subspace $m + E$ of dimension $r$, and
# $\lambda_1 \ge \dots \ge \lambda_d$ the eigenvalues of $\Sigma_1$. For any coupling of $X \sim \nu$ and
# $Y \sim N(\mu_1, \Sigma_1)$, $X$ lies in $m + E$, so $\lVert X - Y\rVert \ge \lVert (I - P_E)(Y - m)\rVert$
# with $P_E$ the orthogonal projection on $E$, and
#
# $$
# \mathbb E\lVert X - Y\rVert^2 \ \ge\ \operatorname{tr}\big((I - P_E)\Sigma_1\big) + \lVert (I-P_E)(\mu_1 - m)\rVert^2
# \ \ge\ \operatorname{tr}\Sigma_1 - \operatorname{tr}(P_E\Sigma_1) \ \ge\ \sum_{k=r+1}^{d}\lambda_k =: F_r(\Sigma_1),
# $$
#
# the last step by Ky Fan's maximum principle ($\operatorname{tr}(P\Sigma_1) \le \lambda_1 + \dots + \lambda_r$
# for every rank-$r$ projection $P$). Equality holds throughout for $m = \mu_1$, $E$ the span of the top $r$
# eigenvectors and $X = \mu_1 + P_E(Y - \mu_1)$, which is distributed as $N(\mu_1, P_E\Sigma_1P_E)$, a
# Gaussian of rank $r$. So
#
# $$
# F_r(\Sigma_1) = \min_{\operatorname{rank}S \le r,\ m} W_2^2\big(N(m, S), N(\mu_1, \Sigma_1)\big)
#   = \min_{\nu \text{ on an } r\text{-dim. affine subspace}} W_2^2\big(\nu, N(\mu_1, \Sigma_1)\big),
# $$
#
# attained by the **nearest reachable Gaussian** $N(\mu_1, P_E\Sigma_1P_E)$ ({py:func}`gtcore.training.rank_floor`,
# {py:func}`best_rank_approximation <gtcore.training.best_rank_approximation>`; a test checks $F_r$ against a brute-force minimisation over rank-$r$ Gaussians).
#
# *Why the network meets it.* From a rank-$r$ start the Gaussian never gains rank (chapter 3: the covariance
# moves by congruence; one layer maps $\Sigma$ to $M\Sigma M^\top$, of rank at most $r$). Without attention
# ($V = 0$) the network is affine, $x \mapsto Mx + c$, so the $N$ tokens stay exactly in an $r$-dimensional
# affine subspace, and the bound above, applied to the empirical target $Y$, gives an **exact** finite-$N$
# floor: $\ell(X, Y) \ge F_r(\hat\Sigma_Y)$, with $\hat\Sigma_Y$ the $1/N$ covariance of $Y$.
#
# With softmax attention at finite $N$ this is no longer exact. Writing $P_{ij}$ for the attention weights
# and $\bar p_j = \frac1N\sum_i P_{ij}$, the centred tokens move as
#
# $$
# x_i^{+} - \bar x^{+} = (I + hA)(x_i - \bar x) + hV\sum_j (P_{ij} - \bar p_j)(x_j - \bar x)
# $$
#
# (because $\sum_j (P_{ij} - \bar p_j) = 0$). The attention term is a combination of the centred tokens,
# but not a fixed linear map of $x_i - \bar x$: its weights depend on $x_i$ nonlinearly, and $V$ sends the
# plane elsewhere than $I + hA$ does, so the cloud **bends out of its subspace**. Against a Gaussian the
# average is the affine tilt $\mu + \Sigma Bx$ (chapter 1) and the bending vanishes; at finite $N$ it is
# the sampling error of the softmax average, which shrinks with $N$ (like $N^{-1/2}$ while
# $\kappa = \lambda_{\max}(B^\top\Sigma B\Sigma) < 1/2$, more slowly beyond; chapter 1). A finite cloud with
# attention could therefore, in principle, do better than $F_r(\hat\Sigma_Y)$, by an amount that vanishes as
# $N \to \infty$; whether training finds and uses that is measured below. We call
# $s = \ell(X, Y) - F_r(\hat\Sigma_Y)$ the **slack**: $s \ge 0$ for every attention-free network.
#
# *What the slack is.* For $X$ an $N$-sample of the nearest reachable Gaussian and $x$ in its subspace
# $S^\star = \mu_1 + E$, $\lVert x - y\rVert^2 = \lVert x - \mu_1 - P_E(y - \mu_1)\rVert^2 + \lVert(I - P_E)(y - \mu_1)\rVert^2$:
# the second part, summed over $Y$, is the residual of $Y$ about $S^\star$, above $F_r(\hat\Sigma_Y)$ (the
# residual about $Y$'s own best subspace) by $O(1/N)$; the first is the optimal matching of two
# $N$-samples of an $r$-dimensional Gaussian, which falls like $N^{-1}$ up to logarithmic factors for
# $r \le 2$ (and like $N^{-2/r}$ for $r \ge 3$). Rather than trust the constants and logarithms, the chapter
# measures the slack's rate for that nearest Gaussian with the same statistic and compares the trained
# network's with it.
# ```

# %% tags=["parameters"]
seed = 0
d = 3
T = 1.0
layers = 8
steps = 150
lr = 0.05
final_lr = 5e-4
init_scale = 0.1
n_full = 3
n_low = 3
low_rank = 2
eigenvalue_range = [0.4, 2.5]
mean_scale = 1.0
n_tokens = 256
test_repeats = 32
null_repeats = 200
ladder_ns = [32, 64, 128, 256]
depths = [1, 2, 4, 8, 16]
bend_ns = [64, 256, 1024]
bend_clouds = 4
energy_pieces = 8
n_boot = 2000

# %% tags=["hide-output"]
import numpy as np

from gtbook import claim
from gtbook.glue import glue
from gtbook.studies.learning import TrainingSettings, against, band, random_targets, train_grid

settings = TrainingSettings(layers=layers, T=T, steps=steps, lr=lr, final_lr=final_lr, init_scale=init_scale,
                            test_repeats=test_repeats)
full_targets = random_targets(n_full, d, d, seed=seed + 1, eigenvalue_range=tuple(eigenvalue_range),
                              mean_scale=mean_scale, prefix="F")
low_targets = random_targets(n_low, d, low_rank, seed=seed + 2, eigenvalue_range=tuple(eigenvalue_range),
                             mean_scale=mean_scale, prefix="R")
full_targets, low_targets

# %% [markdown]
# The targets (drawn in the collapsed output above) are general: Haar-random orientations (no eigenvector along an
# axis), means of size about one, eigenvalues log-uniform in $[0.4, 2.5]$. The full-rank start is $N(0, I_3)$, the
# rank-2 start $N(0, \operatorname{diag}(1, 1, 0))$ (a plane, which the network must turn onto each rank-2 target's
# plane).
#
# **Thresholds, fixed before the run.** A run **reaches** its target when its mean test loss $\bar\ell$ is below
# the 99% quantile of its noise floor, and **stops at the wall** when $\bar\ell$ lies between the floor's 1% and
# 99% quantiles.
#
# ```{dropdown} The statistic, the noise floor and why these thresholds
# For every run the statistic is the mean test loss $\bar\ell$ over
# `test_repeats` fresh pairs, and its noise floor is the distribution of $\ell$ over `null_repeats`
# independent pairs from the nearest reachable Gaussian and the target. A run **reaches** its target when
# $\bar\ell$ is below the floor's 99% quantile $q_{99}$; a run **stops at the wall** when $\bar\ell$ lies
# between the floor's 1% and 99% quantiles. Since $\bar\ell$ averages 32 pairs, a network whose output is
# distributed exactly as the nearest reachable Gaussian gives $\bar\ell$ within about $\sigma/\sqrt{32}$ of
# the floor's mean ($\sigma$ its standard deviation), far inside $[q_{1}, q_{99}]$ (about $\pm 2.3\sigma$):
# these claims are very unlikely to fail by chance (the quantiles themselves are estimated from
# `null_repeats` draws), and they fail when training leaves an excess of more than about $2\sigma$ of the
# floor. They say "as close to the target as two independent samples of it", not "exact".
# ```

# %% [markdown]
# ## (a) Training curves
#
# Every training of the chapter runs in the next cell ({py:func}`~gtbook.studies.learning.train_grid`, cached
# on disk: a rerun with the same parameters reads them back): the ensemble of targets from both starts, with
# attention and with $V = 0$; the first full-rank target at every $N$ of `ladder_ns` and every depth of `depths`;
# and the noise floors. Each run has its own training seed, so no two runs share samples. The figure after it
# shows one full-rank target, trained from the full-rank start and from the rank-2 start (with attention, and
# with $V = 0$).

# %%
grid = train_grid(full_targets, low_targets, settings, d=d, rank=low_rank, n_tokens=n_tokens,
                  null_repeats=null_repeats, ladder_ns=ladder_ns, depths=depths, seed=seed)

# %% mystnb={"figure": {"name": "fig-learning-curves", "caption": "Training on fresh tokens. Left: the loss $W_2^2$ at each Adam step (light) and its running mean (bold), from a full-rank start and from a rank-2 start (with attention, and with $V = 0$) to the same full-rank target; the bands at the right are the noise floors (1–99%) of the target and of its nearest rank-2 Gaussian, the dashed line the rank floor $F_2$. Right: the squared Bures–Wasserstein distance of the output moments, the Gaussian part of the loss."}, "image": {"alt": "Two panels of decreasing loss curves on a log scale. The full-rank curve falls below a dashed horizontal line and ends in its band; the two rank-2 curves level off above the dashed line, in their band. In the right panel the rank-2 curves level off near the dashed line."}}
grid.training_figure();

# %% [markdown]
# In {numref}`fig-learning-curves` the curves fall quickly and level off. From the full-rank start the loss
# ends inside the noise floor of two independent target samples, below the dashed rank floor; from the
# rank-2 start it levels off above $F_2$, in the floor of the nearest rank-2 Gaussian. On the right, the
# Gaussian part of the loss of the rank-2 runs settles near $F_2$ itself, and the rest of their loss is the
# slack of $N$ tokens. {numref}`fig-wall-clouds` (in the collapsed output below) shows the wall in the target's
# own coordinates: along the direction of its smallest variance the target sample spreads, the attention-free
# output from the rank-2 start cannot.

# %% tags=["hide-output"] mystnb={"figure": {"name": "fig-wall-clouds", "caption": "Output tokens (blue) of trained networks on fresh inputs and a target sample (green), in the target's eigen-coordinates: largest variance horizontally, smallest vertically. Left: from the rank-2 start with $V = 0$: no spread along the smallest direction. Middle: from the full-rank start, covering the target. Right: of all the networks this chapter trains from the rank-2 start with attention, the one with the lowest test loss relative to the wall."}, "image": {"alt": "Three scatter plots. Left: the green target cloud is an ellipse, the blue output lies on a horizontal segment through it. Middle: the blue and green clouds overlap as ellipses of the same shape. Right: the output of the deepest attention network behind the wall, which is either a segment like the left panel or spreads vertically as well."}}
grid.wall_clouds_figure(seed=seed);

# %% [markdown]
# ## (b) Same-rank targets are reached
#
# Every full-rank target from the full-rank start, and every rank-2 target from the rank-2 start, trained
# with attention and, in section (e), without. Claims (statement `reachability`): $\bar\ell < q_{99}$ of
# the target's own noise floor. The table of every run and the claims' outcomes are in the collapsed outputs
# below the figure.

# %% mystnb={"figure": {"name": "fig-learning-ensemble", "caption": "Mean test loss of every trained network (filled: with attention; open: $V = 0$) against its noise floor (grey bar, 1–99%). Left: full-rank targets from the full-rank start. Middle: rank-2 targets from the rank-2 start. Right: the full-rank targets from the rank-2 start, with the rank floor $F_2$ (red)."}, "image": {"alt": "Three panels of dots on grey vertical bars, one bar per target. In the first two panels the dots lie inside the bars; in the right panel the bars lie above short red ticks, and the dots lie in the bars or below them."}}
grid.ensemble_figure();

# %% tags=["hide-output"]
grid.table(test_repeats)

# %% tags=["hide-input", "hide-output"]
TM = dict(system="trained model", d=d)  # learned A, b, V, B: general
TM0 = dict(TM, V="zero")  # trained with V = 0 (attention off)
t0 = grid.t0
shrunk = grid.scaled_floor(0.9, repeats=null_repeats, seed=seed + 50_000)
glue("shrunk_mean", shrunk.mean)
glue("floor_mean", grid.null_full[t0.name].mean)
for name, run in grid.runs.items():
    claim(f"full-rank target {name} reached: mean test W2^2 / q99 of its noise floor",
          run.test_loss / band(grid.null_full[name])[1], lt=1.0, statement="reachability", kind="reproduces", scope=TM,
          sides=against(run, grid.null_full[name]))
for name, run in grid.low.items():
    claim(f"rank-2 target {name} reached from rank 2: mean test W2^2 / q99 of its noise floor",
          run.test_loss / band(grid.null_low[name])[1], lt=1.0, statement="reachability", kind="reproduces", scope=TM,
          sides=against(run, grid.null_low[name]))

# %% [markdown]
# In {numref}`fig-learning-ensemble` every same-rank network, with and without attention, sits in its noise
# floor (left and middle); behind the wall (right) the grey bars of the nearest rank-2 Gaussian lie above
# $F_2$, and the networks are discussed in sections (c) and (f).
#
# ```{dropdown} The table's "z of the mean", and runs below the floor's mean
# The column "z of the mean" puts $\bar\ell$ on the scale of its own noise, $(\bar\ell - \text{floor mean})$
# over $\sigma/\sqrt{32}$: negative values are runs that end *below* the floor's mean. That is not a flaw of
# the floor. At finite $N$ the expected $W_2^2$ between two samples is not smallest when both come from the
# same law: a slightly narrower output, matched to a target sample, costs less on average. For the first
# target, $N$-samples of $N(\mu_1, 0.9\,\Sigma_1)$ are at {glue:text}`shrunk_mean:.3f` from target samples on
# average, against {glue:text}`floor_mean:.3f` for samples of the target itself. A network trained on this loss
# can learn that (its output moments sit a little off the target's in {numref}`fig-learning-curves`, right).
# The claims ask for the upper side only.
# ```
#
# ## (c) The rank wall without attention
#
# The same full-rank targets from the rank-2 start, first with $V = 0$: the network is then affine, the cloud
# stays in its plane by construction and the finite-$N$ floor is exact. These claims test the training, not the
# paper's rank invariance (which an affine network cannot fail): they count for this book's learning statement
# (`beyond_learning`). The claims' outcomes are in the collapsed output below.
#
# ```{dropdown} The three kinds of claim, fixed before the run
# (1) **reproduces**: $\bar\ell$ within $[q_1, q_{99}]$ of the floor of
# the nearest rank-2 Gaussian, for every target: training neither stops above the wall nor gets below it;
# (2) **consistency**: every test pair obeys $\ell \ge F_2(\hat\Sigma_Y)$ and the output is planar (the relative
# third singular value $\sigma_3/\sigma_1$ of the centred cloud below $10^{-10}$): theorems for the attention-free
# network, so they test the code; (3) **control**: the full-rank start, trained in the same way with $V = 0$,
# ends below $q_1$ of the wall's floor: the statistic separates the wall from reaching, and the wall is the
# rank's, not the training's.
# ```

# %% tags=["hide-input", "hide-output"]
for name, run in grid.wall0.items():
    lo, hi = band(grid.null_wall[name])
    claim(f"V = 0: target {name} from rank 2: mean test W2^2 inside the wall's noise floor [q01, q99]",
          run.test_loss, gt=lo, lt=hi, statement="beyond_learning", kind="reproduces", scope=TM0,
          sides=against(run, grid.null_wall[name]))
min_slack0, flat0 = grid.least_slack(), grid.largest_thickness(seed=seed + 5)
glue("min_slack0", min_slack0)
glue("flat0", flat0)
claim("V = 0: least slack W2^2 - F_2(hat Sigma_Y) over every rank-2-start test pair (exact floor)", min_slack0,
      gt=-1e-9, statement="beyond_learning", kind="consistency", scope=TM0)
claim("V = 0: every output from the rank-2 start planar, largest sigma_3 / sigma_1", flat0, lt=1e-10,
      statement="beyond_learning", kind="consistency", scope=TM0)
for name, run in grid.runs0.items():
    claim(f"control: V = 0, target {name} from the full-rank start: mean test W2^2 / q01 of the wall's floor",
          run.test_loss / band(grid.null_wall[name])[0], lt=1.0, statement="beyond_learning", kind="control",
          scope=TM0)

# %% [markdown]
# The least slack over all attention-free test pairs from the rank-2 start is {glue:text}`min_slack0:.3f`
# (never negative, as derived), and those outputs are flat to {glue:text}`flat0:.0e` of their width.
#
# ## (d) The slack shrinks with $N$
#
# The first full-rank target, trained at each $N$ of `ladder_ns` from the full-rank start (with attention) and
# from the rank-2 start (with $V = 0$, where the floor is exact, and with attention, for section f). The slack
# of a pair is $\ell - F_2(\hat\Sigma_Y)$; its mean over the test pairs is fitted on log–log axes, for the
# attention-free networks and for the nearest rank-2 Gaussian (the prediction, computed with the same
# statistic).
#
# ```{dropdown} The fit's standard errors and the claims, fixed before the run
# Bootstrap standard errors: pairs resampled within each $N$. Claims, fixed before the run:
# at every $N$ the full-rank start reaches the target ($\bar\ell < q_{99}$, `reachability`) and the
# attention-free rank-2 start stops at the wall ($[q_1, q_{99}]$, `beyond_learning`); the trained slope agrees
# with the prediction within four standard errors of their difference, and lies more than four standard
# errors below zero (`beyond_learning`): a training that stops short of the wall by a fixed amount would
# flatten it towards 0.
# ```

# %% mystnb={"figure": {"name": "fig-slack", "caption": "Left: the mean test loss against $N$ from the full-rank start (blue, attention on) and from the rank-2 start (orange: $V = 0$, solid; attention on, open squares), with the noise floors (bands, 1–99%) and the rank floor $F_2$ (dashed). Right: the slack $W_2^2 - F_2(\\hat\\Sigma_Y)$ of the attention-free rank-2 networks against $N$ (orange) and of the nearest rank-2 Gaussian (grey band and dashed mean), with fitted slopes and bootstrap standard errors."}, "image": {"alt": "Left: falling lines on log-log axes, the blue one inside its band, the orange ones levelling off towards a dashed horizontal line. Right: a falling orange line of dots lying on a grey band with a dashed line, both straight on log-log axes."}}
trained_slope, null_slope = grid.slack_slopes(n_boot=n_boot, seed=seed + 6)
grid.slack_figure((trained_slope, null_slope));

# %% [markdown]
# In {numref}`fig-slack` (left) the loss from the full-rank start keeps falling with $N$ inside its noise
# floor, while the loss from the rank-2 start approaches $F_2$ from above. On the right, the slack of the
# attention-free networks falls with slope {glue:text}`trained_slope:.2f` ± {glue:text}`trained_slope_se:.2f`,
# beside that of the nearest rank-2 Gaussian ({glue:text}`null_slope:.2f` ± {glue:text}`null_slope_se:.2f`).
# The claims' outcomes are in the collapsed output below.

# %% tags=["hide-input", "hide-output"]
slope_se = float(np.hypot(trained_slope.se, null_slope.se))
glue("trained_slope", trained_slope.slope)
glue("trained_slope_se", trained_slope.se)
glue("null_slope", null_slope.slope)
glue("null_slope_se", null_slope.se)
wall_sides = against(grid.ladder_wall0, grid.ladder_null_wall)
claim("full-rank start reaches the target at every N: max over N of mean test W2^2 / q99", grid.ladder_reached(),
      lt=1.0, statement="reachability", kind="reproduces", scope=TM, sides=against(grid.ladder_full, grid.ladder_null_full))
claim("V = 0: rank-2 start inside the wall's noise floor [q01, q99] at every N", grid.ladder_at_wall(),
      statement="beyond_learning", kind="reproduces", scope=TM0, sides=wall_sides)
claim("V = 0: slack slope, trained minus nearest rank-2 Gaussian, in units of its standard error",
      (trained_slope.slope - null_slope.slope) / slope_se, gt=-4.0, lt=4.0, statement="beyond_learning",
      kind="reproduces", scope=TM0, sides=wall_sides)
claim("V = 0: trained slack shrinks with N: (slope + 4 SE)", trained_slope.slope + 4 * trained_slope.se, lt=0.0,
      statement="beyond_learning", kind="reproduces", scope=TM0, sides=against(grid.ladder_wall0))

# %% [markdown]
# ## (e) Depth at fixed $T$, and is attention needed?
#
# Since one layer maps a Gaussian exactly, and $I + hF$ can be any matrix, $L$ layers reach the same
# Gaussians for every $L$: the nearest reachable distribution, and hence the noise floor, do not depend on
# $L$, and any difference between depths is the training's. The first full-rank target at each $L$ of
# `depths` with $h = T/L$. And the constructive controls of chapter 3 switch attention off: the Gaussian
# targets are reachable by the affine feed-forward part alone, so training with $V = 0$ should reach the same
# targets. Claims (`beyond_learning`, fixed before the run): at every depth the full-rank start (attention on)
# reaches the target and the attention-free rank-2 start stops at the wall; every $V = 0$ network reaches its
# same-rank target ($\bar\ell < q_{99}$). {numref}`fig-learning-depth`, the differences of the test losses with
# and without attention with the depth ladder's numbers, and the claims' outcomes are in the collapsed outputs
# below.

# %% tags=["hide-output"] mystnb={"figure": {"name": "fig-learning-depth", "caption": "Left: the mean test loss against the number of layers $L$ at fixed $T$, from the full-rank start (blue) and the rank-2 start (orange: $V = 0$, solid; attention on, open squares), with their noise floors (1–99%) and $F_2$ (dashed). Right: the energy of the learned controls from the full-rank start against $L$: the feed-forward part $h\\sum_l \\lVert A_l\\rVert_F^2 + \\lVert b_l\\rVert^2$ and the energy of the affine velocity the layers apply to the Gaussian (attention folded in), with chapter 3's constructive and minimum-energy controls."}, "image": {"alt": "Left: nearly flat lines of dots against the number of layers, each in its own band, the lowest one below a dashed line. Right: energy curves against the number of layers with two horizontal reference lines."}}
energies, wall_energies = grid.energies(pieces=energy_pieces)
grid.depth_figure(energies);

# %% tags=["hide-output"]
{"mean test loss, attention on minus V = 0 (same-rank targets)": grid.attention_gap(), "depth": grid.depth_table()}

# %% tags=["hide-input", "hide-output"]
claim("every depth L: full start reaches the target, V = 0 rank-2 start stops at the wall", grid.depths_ok(),
      statement="beyond_learning", kind="reproduces", scope=TM0, sides=grid.depths_sides())
claim("V = 0: every same-rank target reached (mean test W2^2 < q99)", grid.attention_free_reached(),
      statement="beyond_learning", kind="reproduces", scope=TM0, sides=grid.attention_free_sides())
glue("att_gap_max", float(max(abs(v) for v in grid.attention_gap().values())))
depth_e = np.array([[a.training.energy, a.gaussian_energy] for a in grid.depth_full]) / energies[t0.name].min_energy
glue("depth_e_lo", float(depth_e.min()))
glue("depth_e_hi", float(depth_e.max()))

# %% [markdown]
# In {numref}`fig-learning-depth` (left) the test loss stays in its noise floor at every $L$ from either start; the
# learned energies (right, both kinds) lie between {glue:text}`depth_e_lo:.2f` and {glue:text}`depth_e_hi:.2f`
# times chapter 3's minimum energy for this target.
#
# For the same-rank targets the test losses with and without attention differ by at most
# {glue:text}`att_gap_max:.3f`: to reach a Gaussian target, attention is not needed (for a Gaussian input the
# attention layer is affine, and its effect is one an affine feed-forward layer has too).
#
# ## (f) The rank wall with attention: a finite-$N$ loophole
#
# With attention the $N$-token network is not affine, and the wall need not bind at finite $N$: the $N$-token
# softmax is affine on the cloud only in the mean-field limit (the loophole derived above, "why the network meets
# it"). A network can drive some layers' attention to $\kappa \gg 1/2$, where each token attends to a handful of
# others, the importance weights of the softmax average have infinite variance, and $N$ tokens no longer follow
# their Gaussian dynamics at all: its cloud leaves the plane and fills the missing direction. The paper's rank
# invariance is a statement about the Gaussian (mean-field) dynamics, and such a network does not contradict it
# when the same learned controls, applied to the Gaussian through the exact layer maps, keep rank 2 and end at
# least $F_2$ from the target (claim 2 below).
#
# The claims, over **every** network trained from the rank-2 start with attention in this chapter (the ensemble,
# the $N$ ladder and the depth ladder): each stays at or above the wall or its tokens have left their own
# Gaussian dynamics; the exact layer maps of every learned set of controls keep rank 2 and end at least $F_2$
# from the target; and the planarity statistic sees the finite-$N$ bending (a control).
#
# ```{dropdown} The three claims in full
# 1. (**reproduces**, `rank_invariance`) each either stays at or above the wall ($\bar\ell > q_1$ of the
#    wall's floor) or its tokens have left its own Gaussian dynamics: the moments of its output cloud are
#    farther from the exact layer maps' endpoint $N(\mu_L, \Sigma_L)$ than $N$ i.i.d. samples of that endpoint
#    are in 99% of draws (`mean_field_departure`). The Gaussian reduction predicts that no network gets
#    below the wall while its tokens follow their Gaussian dynamics; this can fail.
# 2. (**consistency**, `rank_invariance`) the exact layer maps of every learned set of controls keep rank 2
#    and end at a squared Bures–Wasserstein distance $\ge F_2$ from the target (a theorem: the mean-field
#    statement for the learned controls; checked to a relative $10^{-6}$, since the Bures formula takes square
#    roots of the round-off eigenvalues of a rank-2 product, an error of about $10^{-7}$).
# 3. (**control**, `rank_invariance`) with attention, the planarity statistic does see the finite-$N$ bending
#    of every such network ($\sigma_3/\sigma_1 > 10^{-6}$, where $V = 0$ gave round-off).
# ```

# %% mystnb={"figure": {"name": "fig-escape", "caption": "Every network trained from the rank-2 start to a full-rank target: its mean test loss over the lower edge $q_1$ of the wall's noise floor (below 1: through the wall), against the largest $\\kappa$ of its layers along the Gaussian's path. Filled: its tokens left its own Gaussian dynamics; open: they follow them; crosses: $V = 0$."}, "image": {"alt": "Scatter plot on a logarithmic kappa axis: crosses at the left edge and open or filled circles, most of them above a dashed horizontal line at one; any point below the line is a filled circle far to the right of a dotted vertical line at one half."}}
escape = grid.escape(clouds=bend_clouds, repeats=null_repeats, seed=seed + 9)
grid.escape_figure(escape);

# %% tags=["hide-output"]
escape.table()

# %% tags=["hide-input"]
glue("n_below", escape.n_below)
glue("n_behind", len(escape.rows))
glue("kappa_deep", float(max(m.kappa for *_, m in escape.rows)))
glue("deep_attended", float(grid.attended(escape, seed=seed + 10).min()))
glue("deep_n", escape.deepest[1].training.n_tokens)
claim("attention, rank-2 start: every network stays at the wall or has left its Gaussian dynamics",
      escape.at_wall_or_departed, statement="rank_invariance", kind="reproduces", scope=TM, sides=escape.sides)
claim("learned controls on the Gaussian (exact layer maps): least W2^2 to the target over F_2",
      escape.least_endpoint_over_floor, gt=1.0 - 1e-6, statement="rank_invariance", kind="consistency",
      scope=dict(TM, system="moment ODE"))
claim("learned controls on the Gaussian keep rank 2", escape.endpoints_keep_rank, statement="rank_invariance",
      kind="consistency", scope=dict(TM, system="moment ODE"))
claim("attention on: the planarity statistic sees the finite-N bending, least sigma_3 / sigma_1",
      escape.least_bending(seed=seed + 5), gt=1e-6, statement="rank_invariance", kind="control", scope=TM)

# %% [markdown]
# Of the {glue:text}`n_behind` networks trained with attention from the rank-2 start, {glue:text}`n_below`
# ended below the lower edge of the wall's noise floor ({numref}`fig-escape`); the largest $\kappa$ any of them
# reached is {glue:text}`kappa_deep:.3g`. In the network that got lowest relative to the wall, the layer with
# the sharpest attention lets a query attend to {glue:text}`deep_attended:.1f` of its
# {glue:text}`deep_n` tokens (the median of $1/\sum_j P_{ij}^2$). Does the loophole close as $N$ grows? The derivation says it must
# in the limit, where the softmax average becomes the Gaussian tilt; but for weights of infinite variance the
# approach can be slow. {numref}`fig-bending` (in the collapsed output below) runs the network of
# {numref}`fig-escape` with the lowest ratio on fresh clouds of other sizes (its controls unchanged), and the next
# output, also collapsed, gives its numbers.

# %% tags=["hide-output"] mystnb={"figure": {"name": "fig-bending", "caption": "The network trained with attention from the rank-2 start that got lowest relative to the wall, run on fresh clouds of several sizes $N$ with its controls unchanged. Left: how far its output bends out of the plane, $\\sigma_3/\\sigma_1$ (dots: clouds; line: their mean; dashed: $N^{-1/2}$). Right: its loss against a fresh target sample of the same size, with $F_2$ (dashed) and the samples' floors $F_2(\\hat\\Sigma_Y)$."}, "image": {"alt": "Left: the bending of one network's output against the number of tokens on log-log axes, beside a dashed falling reference line. Right: its loss against the number of tokens beside a dashed horizontal line and a dotted line of floors."}}
bending = grid.bending(escape, bend_ns, clouds=bend_clouds, seed=seed + 8)
grid.bending_figure(bending);

# %% tags=["hide-output"]
bend_floor = grid.floors[escape.deepest[2].name]
{"N": bending.n_tokens.tolist(), "mean sigma_3/sigma_1": np.round(bending.ratios.mean(axis=1), 4).tolist(),
 "mean loss": np.round(bending.losses.mean(axis=1), 4).tolist(), "F_2": round(bend_floor, 4)}

# %% tags=["hide-input"]
glue("bend_slope", bending.slope)
glue("bend_name", escape.deepest[0])
glue("bend_loss_first", float(bending.losses[0].mean()))
glue("bend_loss_last", float(bending.losses[-1].mean()))
glue("bend_n_first", int(bend_ns[0]))
glue("bend_n_last", int(bend_ns[-1]))
glue("bend_prediction", float(escape.deepest[4].endpoint_w2sq))
glue("bend_floor", bend_floor)

# %% [markdown]
# For this network ({glue:text}`bend_name`) the mean bending changes with $N$ at a log–log slope of
# {glue:text}`bend_slope:.2f` over the sizes tried, against the $N^{-1/2}$ of a well-behaved softmax average
# (dashed), and its loss goes from {glue:text}`bend_loss_first:.3f` at $N$ = {glue:text}`bend_n_first` to
# {glue:text}`bend_loss_last:.3f` at $N$ = {glue:text}`bend_n_last`, against $F_2$ = {glue:text}`bend_floor:.3f`.
# Its Gaussian prediction, the exact layer maps' endpoint, is at {glue:text}`bend_prediction:.3g` from the
# target: the limit $N \to \infty$ of this network, which no $N$ tried here comes near when attention is this
# sharp. No claim is made on these numbers; the loophole is a property of finite $N$ and strong attention, not
# of the Gaussian dynamics the paper studies.
#
# ## (g) Energies: learned, constructive, minimum
#
# For each same-rank target, the energy $\int_0^T\lVert A\rVert_F^2 + \lVert b\rVert^2\,dt$ of the learned
# controls (the Riemann sum $h\sum_l$, constant on each layer) beside chapter 3's constructive controls
# (`steer`) and minimum-energy controls (`steer_min_energy`, `energy_pieces` equal pieces, one per layer)
# for the same start and target ({numref}`fig-learning-energy` and the table after it, both in collapsed outputs).
#
# ```{dropdown} The two energies of attention, the wall and what differs by $O(h)$
# With attention on, part of the motion is done by attention, so we also
# give the energy of the affine velocity the layers apply to the Gaussian,
# $h\sum_l \lVert A_l + V_l\Sigma_lB_l\rVert_F^2 + \lVert b_l + V_l\mu_l\rVert^2$ along the exact layer maps:
# what attention-free controls moving the Gaussian in the same way would cost. Behind the wall (table only),
# chapter 3's controls steer to the nearest reachable Gaussian $N(\mu_1, P_E\Sigma_1P_E)$. The learned controls
# are Euler layers, chapter 3's are exact flows on pieces of the same length, so the numbers differ by $O(h)$
# even for the same motion. No claim is made on these numbers; the minimum-energy controls, used as a
# reference, must hit their targets (endpoint error below $10^{-6}$, **consistency**).
# ```

# %% tags=["hide-output"] mystnb={"figure": {"name": "fig-learning-energy", "caption": "Energies per same-rank target: the learned controls with attention (their feed-forward part, and the affine velocity they apply to the Gaussian, hatched) and with $V = 0$, beside chapter 3's constructive and minimum-energy controls for the same start and target."}, "image": {"alt": "Grouped bar chart, five bars per target: three shades of blue for the learned controls, orange for the constructive and red for the minimum-energy controls."}}
grid.energy_figure(energies);

# %% tags=["hide-output"]
{n: {k: round(float(v), 3) for k, v in vars(e).items() if k != "min_energy_error"}
 for n, e in [*energies.items(), *((f"{n} (wall)", e) for n, e in wall_energies.items())]}

# %% tags=["hide-input"]
ratio_v0 = np.array([e.learned_no_attention / e.min_energy for e in energies.values()])
glue("v0_ratio_lo", float(ratio_v0.min()))
glue("v0_ratio_hi", float(ratio_v0.max()))
claim("minimum-energy reference controls hit their targets: largest endpoint error",
      max(e.min_energy_error for e in [*energies.values(), *wall_energies.values()]), lt=1e-6,
      statement="beyond_min_energy", kind="consistency", scope=dict(system="moment ODE", d=d, V="zero"))

# %% [markdown]
# Gradient descent on the loss alone, with nothing in it about energy, finds attention-free controls of
# {glue:text}`v0_ratio_lo:.2f` to {glue:text}`v0_ratio_hi:.2f` times chapter 3's minimum energy
# ({numref}`fig-learning-energy`). The loss fixes only the output distribution; the controls that produce it
# are far from unique (any rotation of the input Gaussian about its mean, any reshuffling of the work between
# layers), and training picks one of them by where it started and by the noise of its samples, not by cost.
#
# ## What we saw
#
# A Transformer of $N$ tokens with softmax attention, trained by Adam through its tokens on a loss that
# assumes nothing Gaussian, reached every same-rank target of a seeded ensemble (full rank, and rank 2 from a
# rank-2 start) as closely as two independent samples of the target are to each other, at every $N$ and
# every depth tried, and equally without attention. Without attention, from a rank-2 start to full-rank
# targets, it stopped at the rank floor $F_2$ derived above (the smallest eigenvalue of the target) plus a
# finite-$N$ slack: in the noise floor of the nearest rank-2 Gaussian, never below the exact floor, shrinking
# with $N$ at the rate of that Gaussian ({glue:text}`trained_slope:.2f` against {glue:text}`null_slope:.2f`
# on log–log axes); from a full-rank start the same training went below the wall. With attention the wall
# binds only while the $N$ tokens follow their Gaussian dynamics: every network that ended below it
# ({glue:text}`n_below` of {glue:text}`n_behind` here) had left them (largest $\kappa$ reached:
# {glue:text}`kappa_deep:.3g`), and the same controls applied to the Gaussian itself keep its rank and stay
# at least $F_2$ from the target: the rank invariance of the paper is a statement about the Gaussian dynamics,
# and training at finite $N$ with sharp attention is not bound by it. The learned controls were not the cheap
# ones: without attention they cost {glue:text}`v0_ratio_lo:.2f`–{glue:text}`v0_ratio_hi:.2f` times chapter 3's
# minimum energy.
#
# ## How these checks were designed
#
# ```{dropdown} Revisions, seeds and the mutations behind these claims
# *The optimiser's settings* (`steps`, `lr`, `final_lr`, `init_scale`) were chosen on a pilot target of another
# seed, before this chapter's targets were drawn.
#
# *The rank wall with attention (f).* The chapter first claimed, for every full-rank target, that the network
# trained **with attention** from the rank-2 start also ends inside $[q_1, q_{99}]$ of the wall's floor. When the
# chapter was first run in its full profile that failed: for one target of three the trained network ended well
# below the wall, below $F_2$ itself, by sharpening its attention to $\kappa \gg 1/2$. Nothing was retuned. The
# three claims of (f) replaced it; they were set after seeing that failure (the quick profile had not shown it).
#
# *What the attention-free claims count for.* The claims of (c), and the attention-free claims of (d) and (e),
# were first counted for the paper's rank invariance. Every attention-free layer is affine, so the cloud stays in
# its plane by construction and the exact floor holds whatever the training does: they cannot fail the paper's
# statement. They are counted for this book's learning statement (`beyond_learning`), which is about training,
# with their values, thresholds and seeds unchanged.
#
# *Measured without the trainer's code.* Each reproduction records the library functions its two sides ran: the
# observed side is the training and the trained network on its test inputs (and, in (f), on fresh clouds); the
# predicted side is the noise floor it is compared with, counted whole (the reachable law, its samples, the
# statistic on them), the exact floors $F_2(\hat\Sigma_Y)$ and, in (f), the exact layer maps. The statistic applied
# to the network's output is the comparison and counts on neither side. Traced this way with the floors as they
# were first computed, every claim against a noise floor was refused (checked on small runs): the trainer's loss
# is $W_2^2$ by the optimal assignment of {py:func}`gtcore.training.optimal_assignment`, and the noise floors
# measured $W_2^2$ with the same code ({py:func}`gtcore.training.w2_squared`), so a wrong assignment would have made a collapsed network and its floor
# agree; and in (f) the floor of the departure used {py:func}`gtcore.stats.gaussianity.bures_wasserstein`, which
# the trainer runs to record the Gaussian part of its loss. The test losses, the noise floors, the departure and
# its floor are since computed by {py:mod}`gtbook.studies.learning.statistics`, which reaches the same numbers by
# another route (SciPy's assignment on its own cost matrix; the Bures term from the eigenvalues of
# $\Sigma_1\Sigma_2$). No threshold, seed or size changed; every claim's value, and every number the page shows,
# came out the same (the $W_2^2$ values are identical to the last bit, the Bures distances agree to about
# $10^{-8}$ relative, below the digits shown).
#
# *Seeds.* The targets are drawn with `seed + 1` (full rank) and `seed + 2` (rank 2); each network's training seed
# is `seed + 1_000_000 group + 100_000 k + 100 N + L` (group 1: full-rank start, 2: rank-2 start to a full-rank
# target, 3: rank-2 target; `k` the target, `N` the tokens, `L` the layers) and its test pairs `training seed +
# 7919`; the noise floors `seed + 50_000 + k`, `+ 60_000 + k`, `+ 70_000 + k` and, on the ladder, `+ 80_000 + N`,
# `+ 90_000 + N` ({py:mod}`gtbook.studies.learning.grid`); the figures and checks on fresh clouds `seed + 3` to
# `seed + 10`.
# ```
