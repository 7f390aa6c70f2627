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
# # 3. Rank invariance and exact finite-time reachability
#
# On $N$ softmax tokens with a general head held fixed, a cloud steered to a random target of its own rank
# reaches it at the rate $N^{-1/2}$ (pooled slope {glue:text}`ms_slope_D:.2f`) even when the head's drift is
# compensated with its response measured on other tokens, and eq. (1.1) predicts where the cloud goes
# ({numref}`fig-measured`). With $A = 0$, the attention controls alone steer the covariance exactly on eq.
# (1.1), but open loop on tokens they put the cloud on the target as precisely as attention-free steering
# for {glue:text}`ao_reached` of {glue:text}`ao_draws` random targets ({numref}`fig-attention-only`).
#
# The abstract {cite}`alcalde2026gaussian`: "we prove exact finite-time reachability of any target Gaussian
# distribution whose covariance matrix has the same rank as the initial one, this rank constraint being an
# intrinsic invariant of the dynamics." In eq. (1.1), $\Sigma' = M\Sigma + \Sigma M^\top$ with $M = A + V\Sigma B$:
# the covariance moves by a congruence and keeps its rank, and $\Sigma_1 = (RP)\Sigma_0(RP)^\top$ is reached by
# $A = \log P/\tau$, then $\log R/\tau$ ({py:func}`gtcore.reachability.steer`); a head held fixed is absorbed
# along the reference, $A = \tilde A - V\Sigma_\text{ref}B$, $b = \tilde b - V\mu_\text{ref}$.

# %% tags=["parameters"]
seed, energy_seed, rt_seed, rt_boot_seed, st_seed, st_boot_seed, ms_seed, ms_boot_seed, ao_seed = (
    0, 10, 2231, 2232, 2233, 2234, 2235, 2236, 2238)
T, n_boot = 1.0, 2000
# (a) random controls along eq. (1.1); rank-r clouds of N tokens through general layers
rank = {"d": 5, "r": 2, "pieces": 6, "T": 3.0, "times": 241, "A_scale": 0.4, "attention_scale": 0.2}
rank_tokens = {"d": 4, "r": 2, "Ns": [250, 500, 1000, 2000, 4000], "draws": 10, "seeds": 6,
               "control_seeds": 2, "layers": 8, "kappa": 0.15, "kappa_cap": 0.25}
# (b) attention-free controls of the examples on N tokens; (c) a fixed head on the d = 2 example
token_run = {"Ns": [100, 300, 1000, 3000, 10000], "repeats": 16, "steps": 100}
head_example = {"V": [[0.6, 0.0], [0.0, 0.6]], "B": [[0.5, 0.2], [0.2, 0.5]], "tokens": 2000,
                "steps": 100}
# (c) random targets and Ginibre heads: compensated by eq. (1.1), and by a measured response
steered = {"d": 3, "r": 2, "Ns": [250, 500, 1000, 2000], "draws": 10, "seeds": 4,
           "control_seeds": 2, "steps": 20, "head_scale": 0.5}
measured = {"d": 3, "Ns": [250, 500, 1000, 2000], "draws": 10, "seeds": 4, "control_seeds": 2,
            "steps": 20, "kappa": 0.2}
# (d) minimum energy; (e) the attention alone
energy = {"pieces": 16, "start_pieces": 8, "starts": 4, "start_scale": 0.5, "energy_rtol": 1e-6}
attention_only = {"d": 3, "Ns": [250, 500, 1000, 2000], "draws": 12, "seeds": 3,
                  "perturbations": 8, "steps": 25, "beta": 0.5, "theta": 0.6, "cut": 3.0}

# %%
import numpy as np

from gtbook import claim
from gtbook.glue import glue
from gtbook.studies import reachability as study

# %% [markdown]
# ## (a) The rank is invariant
#
# On eq. (1.1): a rank-2 covariance in $d = 5$ under random piecewise-constant controls with a random head on,
# integrated by the general adaptive solver at several tolerances. On $N$ softmax tokens: a rank-$r$ cloud stays
# in an $r$-dimensional subspace exactly when its softmax averages are affine in the token, as the Gaussian tilt
# is; at finite $N$ they carry an $N^{-1/2}$ fluctuation, so the **excess spread**
# $\epsilon = \sqrt{\lambda_{r+1}(\hat\Sigma)/\lambda_1(\hat\Sigma)}$ after `layers` general residual layers should
# fall like $N^{-1/2}$; a uniform law with the same two moments is the control (its average is not affine).

# %% mystnb={"figure": {"name": "fig-rank", "caption": "Rank invariance. Left: the singular values of $\\Sigma(t)$ along eq. (1.1) under random controls with attention on. Middle: the largest relative null singular value $\\eta$ against the solver's tolerance. Right: on $N$ softmax tokens, each draw's excess spread outside $r$ dimensions after the residual layers (mean over clouds, relative to the smallest $N$), Gaussian clouds and the moment-matched uniform control, with $N^{-1/2}$ (dashed)."}, "image": {"alt": "Three panels. Left: two singular value curves that rise and fall over time, and three flat curves near ten to the minus sixteen. Middle: a line falling with the solver tolerance down to round-off. Right: log-log lines against the number of tokens, a Gaussian bundle falling parallel to a dashed line and a flat uniform bundle."}}
rank_ode = study.rank_on_ode(**rank, seed=seed)
rank_tok = study.rank_tokens_study(**rank_tokens, seed=rt_seed, boot_seed=rt_boot_seed, n_boot=n_boot)
rank_ode.figure(rank_tok);

# %% [markdown]
# Along eq. (1.1) the singular values that start at zero stay at round-off (at most {glue:text}`rank_eta:.0e` of
# the largest) and follow the solver's tolerance down (derivations: the proof against eq. (1.1)). On tokens the
# pooled slope is {glue:text}`rt_slope:.2f` (SE {glue:text}`rt_se:.2f`), the uniform control's
# {glue:text}`rt_uniform_slope:.2f` ({numref}`fig-rank`; the largest sampling strength $\kappa$ along any draw's
# path is {glue:text}`rt_kappa_max:.2f`, inside the regime $\kappa < 1/4$ where this rate is predicted).

# %% tags=["hide-input"]
ode_scope = dict(system="moment ODE", d=rank["d"])
glue("rank_eta", rank_ode.eta)
claim("rank invariant: null singular values at round-off", rank_ode.eta, lt=1e-12, statement="rank_invariance",
      kind="derivation", scope=ode_scope)
claim("numerical rank of Sigma(t) constant", rank_ode.rank_constant, statement="rank_invariance",
      kind="derivation", scope=ode_scope)
tok_scope = dict(system="tokens", d=rank_tokens["d"])  # A, B, V general (Ginibre draws)
glue("rt_slope", rank_tok.gauss.slope)
glue("rt_se", rank_tok.se)
glue("rt_uniform_slope", rank_tok.uniform.slope)
glue("rt_kappa_max", rank_tok.gauss.kappa_max)
claim(f"rank on tokens, {rank_tokens['draws']} general draws: pooled slope of the excess spread in N",
      rank_tok.gauss.slope, gt=-0.5 - 3 * rank_tok.se, lt=-0.5 + 3 * rank_tok.se, statement="rank_invariance",
      kind="reproduces", scope=tok_scope, sides=rank_tok.gauss.sides)
claim("rank on tokens, uniform law (same moments): excess spread slope above the band", rank_tok.uniform.slope,
      gt=-0.5 + 3 * rank_tok.se, statement="rank_invariance", kind="control", scope=tok_scope)

# %% [markdown]
# ## (b) Exact steering on the moment ODE
#
# A full-rank Gaussian in $d = 2$ and a rank-1 Gaussian in $d = 3$ (a stretch, then a rotation); the endpoint
# error $\max(\|\mu(T) - \mu_1\|, \|\Sigma(T) - \Sigma_1\|_F)$ is measured by integrating eq. (1.1).

# %% mystnb={"figure": {"name": "fig-steering", "caption": "Exact steering on the moment ODE. Left: the $2\\sigma$ ellipse of a $d = 2$ Gaussian (colour: time) on its way to the dashed target. Right: a rank-1 Gaussian in $d = 3$ (a segment) stretched, then rotated onto the dashed target segment."}, "image": {"alt": "Left: a sequence of ellipses coloured by time, moving from the origin and ending on a dashed target ellipse. Right: a three-dimensional plot of segments that stretch along a line and then rotate onto a dashed target segment."}}
ex = study.steering_examples(T)  # the d = 2 ellipse and the rank-1 segments of study.EXAMPLES
ex.figure();

# %% [markdown]
# The segment stretches, then rotates onto its target, and never acquires width ({numref}`fig-steering`); the
# endpoint errors are {glue:text}`err_2d:.0e` and {glue:text}`err_3d:.0e`. A rank-2 target from the rank-1
# start is refused: "{glue:text}`refusal`".
#
# **On $N$ tokens.** Without attention the $d = 2$ controls move $N$ sampled tokens
# ({py:func}`gtcore.particles.simulate`) by an affine flow, so their distance to the target is the initial
# sampling error carried along: its slope in $N$, {glue:text}`token_slope:.2f`, should lie in
# $[-0.65, -0.35]$ (a consistency check).

# %% tags=["hide-input"]
glue("err_2d", ex.errors["2d"])
glue("err_3d", ex.errors["3d"])
glue("refusal", ex.refusal or "not refused")
claim("d=2 steering endpoint error", ex.errors["2d"], lt=1e-8, statement="reachability", kind="derivation",
      scope=dict(system="moment ODE", d=2, A="normal", B="zero", V="zero"))
claim("d=3 rank-1 steering endpoint error", ex.errors["3d"], lt=1e-8, statement="reachability",
      kind="derivation", scope=dict(system="moment ODE", d=3, A="normal", B="zero", V="zero"))
claim("rank-changing target raises RankMismatchError", ex.refusal is not None, statement="rank_invariance",
      kind="consistency", scope=dict(system="closed form", d=3, A="normal", B="zero", V="zero"))

# %% tags=["hide-input"]
free_tokens = study.token_distance_study(ex, T, **token_run, seed=seed)
glue("token_slope", free_tokens.slope)
claim("token distance to target vs N: log-log slope", free_tokens.slope, gt=-0.65, lt=-0.35,
      statement="reachability", kind="consistency", scope=dict(system="tokens", d=2, A="normal", B="zero", V="zero"))

# %% [markdown]
# ## (c) Steering with a head held fixed
#
# The paper's controls subtract $V\Sigma_\text{ref}B$, the ODE's own attention term, so on eq. (1.1) they reach
# the target whatever that term is (consistency claims; {numref}`anim-steering` plays the $d = 2$ example). The
# test is on $N$ tokens, over random targets in $d = 3$ with Ginibre heads: a cloud's distance $D_N$ to the
# target and $E_N$ to eq. (1.1) under the same controls (from its own moments) should fall like $N^{-1/2}$,
# with two compensations: the paper's, and one that never consults eq. (1.1): a **pilot cloud** of $N$ tokens
# moved by the attention-free flow measures its softmax average's response $\hat c + \hat Kx_i$ and the controls
# subtract $V\hat K$, $V\hat c$ ({py:mod}`gtbook.studies.reachability.measured`), so that $E_N$ tests the tilt
# formula $V\Sigma B$ itself. Controls: $B^\top$ in the tokens' head, and in eq. (1.1).

# %% mystnb={"figure": {"name": "anim-steering", "caption": "Exact steering with attention on: the tokens (dots, a fixed subset) under the compensated controls and softmax attention over the cloud, the moment ODE's $2\\sigma$ ellipse (red) and the target (dashed), which both reach at $t = T$; the box gives the distance of the cloud's mean to the target mean."}}
att_ex = study.attention_example(ex, T, **head_example, seed=seed)
att_ex.animation(alt="Animation of a token cloud steered onto a target: the cloud and a red ellipse turn, stretch "
                     "and travel together onto a dashed target ellipse, which they cover at the last frame.")

# %% mystnb={"figure": {"name": "fig-measured", "caption": "Steering on $N$ softmax tokens with a general head held fixed, over random targets: top, the head compensated by eq. (1.1); bottom, by its response measured on a pilot cloud. Left: each draw's distance to the target $D_N$; right: its distance $E_N$ to eq. (1.1) under the same controls from the cloud's own moments; mean over clouds relative to the smallest $N$, with the controls ($B^\\top$ in the tokens' head or in eq. (1.1)) and $N^{-1/2}$ (dashed)."}, "image": {"alt": "Four log-log panels of thin lines against the number of tokens: the token bundles fall parallel to a dashed line of slope minus one half; the control bundles in the right panels stay flat."}}
st = study.steered_study(**steered, seed=st_seed, boot_seed=st_boot_seed, n_boot=n_boot)
meas = study.measured_steering(**measured, seed=ms_seed)
study.heads_figure(st, meas);

# %% tags=["hide-input"]
general3 = dict(system="tokens", d=3)  # general A, B, V
ms_se = {w: meas.standard_error(w, n_boot=n_boot, seed=ms_boot_seed + k) for k, w in enumerate(("distance", "dynamic"))}
for key, value in (("err_att", att_ex.error), ("cloud_over_unc", att_ex.cloud_over_uncompensated),
                   ("ms_slope_D", meas.slope()), ("ms_se_D", ms_se["distance"]), ("ms_slope_E", meas.slope("dynamic")),
                   ("ms_se_E", ms_se["dynamic"]), ("ms_slope_DT", meas.slope("distance_transposed")),
                   ("ms_slope_ET", meas.slope("dynamic_transposed"))):
    glue(key, value)
claim("attention-on steering endpoint error", att_ex.error, lt=1e-8, statement="reachability", kind="consistency",
      scope=dict(system="moment ODE", d=2, A="general", B="symmetric", V="scalar"))
claim("measured compensation: pooled slope of the distance to the target in N", meas.slope(),
      gt=-0.5 - 3 * ms_se["distance"], lt=-0.5 + 3 * ms_se["distance"], statement="reachability",
      kind="reproduces", scope=general3, sides=meas.sides("distance"))
claim("measured compensation: pooled slope of the distance to eq. (1.1) in N", meas.slope("dynamic"),
      gt=-0.5 - 3 * ms_se["dynamic"], lt=-0.5 + 3 * ms_se["dynamic"], statement="reachability",
      kind="reproduces", scope=general3, sides=meas.sides("dynamic"))
claim("measured compensation, tokens' head with B^T (control): distance slope above the band",
      meas.slope("distance_transposed"), gt=-0.5 + 3 * ms_se["distance"], statement="reachability",
      kind="control", scope=general3)
claim("measured compensation, eq. (1.1) with B^T (control): its distance slope above the band",
      meas.slope("dynamic_transposed"), gt=-0.5 + 3 * ms_se["dynamic"], statement="reachability",
      kind="control", scope=general3)

g = st.gauss
for key, value in (("st_slope_D", g.slope), ("st_se_D", st.se_distance), ("st_slope_E", g.dynamic_slope),
                   ("st_se_E", st.se_dynamic), ("st_slope_T", st.transposed.dynamic_slope),
                   ("st_ode_error", g.ode_error), ("st_kappa_max", g.kappa_max)):
    glue(key, value)
claim(f"{steered['draws']} random same-rank targets: constructive controls reach each on the moment ODE (max relative W2)",
      g.ode_error, lt=1e-4, statement="reachability", kind="consistency", scope=dict(system="moment ODE", d=3))
claim("steered tokens: pooled slope of the distance to the target in N", g.slope, gt=-0.5 - 3 * st.se_distance,
      lt=-0.5 + 3 * st.se_distance, statement="reachability", kind="reproduces", scope=general3,
      sides=g.sides("distance"))
claim("steered tokens: pooled slope of the dynamic error in N", g.dynamic_slope, gt=-0.5 - 3 * st.se_dynamic,
      lt=-0.5 + 3 * st.se_dynamic, statement="reachability", kind="consistency", scope=general3)
claim("tokens' head with B^T (control): dynamic error slope above the band", st.transposed.dynamic_slope,
      gt=-0.5 + 3 * st.se_dynamic, statement="reachability", kind="control", scope=general3)

# %% [markdown]
# The $d = 2$ example lands on the target on eq. (1.1) to {glue:text}`err_att:.0e`, its cloud at
# {glue:text}`cloud_over_unc:.3f` of the uncompensated miss. With the paper's compensation the pooled slopes are
# {glue:text}`st_slope_D:.2f` (SE {glue:text}`st_se_D:.2f`) for $D_N$ and {glue:text}`st_slope_E:.2f` (SE
# {glue:text}`st_se_E:.2f`) for $E_N$, the control's {glue:text}`st_slope_T:.2f`; with the measured one
# {glue:text}`ms_slope_D:.2f` (SE {glue:text}`ms_se_D:.2f`) and {glue:text}`ms_slope_E:.2f` (SE
# {glue:text}`ms_se_E:.2f`), the controls' {glue:text}`ms_slope_DT:.2f` and {glue:text}`ms_slope_ET:.2f`
# ({numref}`fig-measured`). The $E_N$ controls are far outside their bands. The $D_N$ control of the measured
# compensation is barely outside: at $\kappa = 0.2$ a head with $B^\top$ moves the endpoint by little more than
# the sampling error at these $N$, so $D_N$ alone hardly sees a transposition; $E_N$ tests the tilt formula.
#
# ## (d) Minimum-energy controls
#
# Beyond the paper, `steer_min_energy` minimises $\int_0^T \|A\|_F^2 + \|b\|^2\,dt$ over piecewise-constant
# controls that hit the target exactly (SLSQP through the exact flow), from the construction and from seeded
# random starts, on the rank-1 example; all on eq. (1.1), so the claims check the optimiser (consistency).

# %% mystnb={"figure": {"name": "fig-energy", "caption": "Constructive (dashed) and minimum-energy (solid) piecewise-constant controls for the rank-1 $d = 3$ example, entry by entry over time, with their energies."}, "image": {"alt": "Panels of control entries against time: dashed step curves with a jump at half time, and smaller, nearly flat solid curves."}}
opt = study.min_energy_study(ex, T, **energy, seed=energy_seed)
opt.figure();

# %% tags=["hide-input"]
opt_scope = dict(system="moment ODE", d=3, B="zero", V="zero")
b = opt.best
glue("energy_ratio", b.constructive_energy / b.energy)
glue("energy_agree", opt.agree)
glue("energy_best_random", opt.best_random / opt.from_construction.constructive_energy)
claim("min-energy controls endpoint error", b.endpoint_error, lt=1e-6, statement="beyond_min_energy",
      kind="consistency", scope=opt_scope)
claim("min-energy (started at the construction) / constructive energy", b.energy / b.constructive_energy,
      lt=1.0 + 1e-12, statement="beyond_min_energy", kind="consistency", scope=opt_scope)
claim("random starts: lowest min-energy / constructive energy", opt.best_random / opt.from_construction.constructive_energy,
      lt=1.0, statement="beyond_min_energy", kind="consistency", scope=opt_scope)
claim("starts (random and constructive) reaching the lowest energy within 1e-6", opt.agree, gt=1.5,
      statement="beyond_min_energy", kind="consistency", scope=opt_scope)

# %% [markdown]
# The optimum moves, stretches and turns at once, with {glue:text}`energy_ratio:.1f` times less energy
# ({numref}`fig-energy`); the best random start ends at {glue:text}`energy_best_random:.2f` of the constructive
# energy, and {glue:text}`energy_agree` starts share the lowest energy found (`opt.table()` lists them).
#
# ## (e) Steering by the attention alone (beyond the paper)
#
# With $A$ free, reachability follows from $GL^+(d)$ being connected. With $A = 0$ the covariance moves only
# through $M = V\Sigma B$; for a full-rank $\Sigma$, $B(t) = \beta\Sigma_\text{ref}^{-1/2}O\Sigma_\text{ref}^{-1/2}$
# and $V(t) = \beta^{-1}\tilde A\Sigma_\text{ref}^{1/2}O^\top\Sigma_\text{ref}^{-1/2}$ give $V\Sigma_\text{ref}B = \tilde A$
# ($O$ a fixed rotation, $\kappa = \beta^2$); the mean is held at 0 and then moved by $b$ alone
# ({py:mod}`gtbook.studies.reachability.attention_only`). This is exact on eq. (1.1), but open loop: $B(t)$
# whitens the reference, not the cloud. On random full-rank targets in $d = 3$, a target is **reached** when
# the cloud's distance to it at the largest $N$ is below `cut` $= 3$ times that of the same cloud under
# attention-free steering (its sampling error alone); beside it, the amplification eq. (1.1) predicts from
# independently perturbed starts; the control uses $B^\top$ in the tokens' head.

# %% mystnb={"figure": {"name": "fig-attention-only", "caption": "Steering by the attention alone ($A = 0$) on $N$ tokens, over random full-rank targets. Left: each draw's distance to the target against $N$, relative to the smallest $N$ (reached: solid). Right: each draw's amplification at the largest $N$ (distance over the attention-free steering's) against the amplification eq. (1.1) predicts from perturbed starts (right edge: eq. (1.1) blows up), with the control using $B^\\top$ (crosses)."}, "image": {"alt": "Left: log-log lines against the number of tokens, some falling like a dotted reference line, some flat or erratic. Right: a scatter of dots near a dashed diagonal and crosses far above it."}}
ao = study.attention_only_steering(**attention_only, seed=ao_seed)
ao.figure();

# %%
ao.table()

# %% tags=["hide-input"]
k, n, (lo, hi) = ao.fraction()
kc, _, _ = ao.fraction("control")
for key, value in (("ao_reached", k), ("ao_draws", n), ("ao_lo", lo), ("ao_hi", hi), ("ao_control", kc),
                   ("ao_ode_error", ao.ode_error), ("ao_amp_max", float(np.max(ao.amplification))),
                   ("ao_pred_reached", float(np.max(ao.predicted[ao.reached], initial=0.0))),
                   ("ao_pred_missed", float(np.min(ao.predicted[~ao.reached], initial=np.inf)))):
    glue(key, value)
glue("ao_separation", "the two ranges do not overlap: the open-loop path's own sensitivity tells the misses"
     if np.max(ao.predicted[ao.reached], initial=0.0) < np.min(ao.predicted[~ao.reached], initial=np.inf)
     else "the two ranges overlap: the path's sensitivity explains the misses only in part")
only = dict(d=3, A="zero")  # B and V general and time-varying
claim(f"attention alone: {n} random full-rank targets reached on eq. (1.1) (max relative W2)", ao.ode_error, lt=1e-4,
      statement="beyond_attention_steering", kind="consistency", scope=dict(system="moment ODE", **only))
claim("attention alone on tokens: fraction of targets reached within 3x the attention-free steering's error",
      k / n, **({"gt": 0.999} if k == n else {"lt": 0.999}), statement="beyond_attention_steering",
      kind="reproduces" if k == n else "not_reproduced", scope=dict(system="tokens", **only), sides=ao.sides)
claim("attention alone, tokens' head with B^T (control): fraction of targets reached", kc / n, lt=0.5,
      statement="beyond_attention_steering", kind="control", scope=dict(system="tokens", **only))

# %% [markdown]
# On eq. (1.1) every target is reached to {glue:text}`ao_ode_error:.0e`. On tokens {glue:text}`ao_reached` of
# {glue:text}`ao_draws` targets are reached (Wilson 95 % interval {glue:text}`ao_lo:.2f`–{glue:text}`ao_hi:.2f`);
# the others are missed by up to {glue:text}`ao_amp_max:.0f` times the attention-free steering's error
# ({numref}`fig-attention-only`). Eq. (1.1) itself, started from covariances perturbed by the sampling error
# alone, amplifies that error by at most {glue:text}`ao_pred_reached:.1f` on the reached draws and by at least
# {glue:text}`ao_pred_missed:.1f` on the missed ones ({glue:text}`ao_separation`); the tokens, whose softmax adds
# its own fluctuation, are amplified at least as much (right panel). With $B^\top$ in the tokens' head
# {glue:text}`ao_control` targets still pass the cut, a coarse test; the table gives every draw.
#
# ## What we saw
#
# The rank is invariant along eq. (1.1) to round-off, and on $N$ softmax tokens through general layers in the
# limit (excess spread $\propto N^{-1/2}$, a uniform cloud's does not fall). Targets of the initial rank are
# reached exactly on eq. (1.1), and by $N$ tokens with a general head held fixed at a rate consistent with
# $N^{-1/2}$, whether the head is compensated by the paper's formula or by its response measured on other
# tokens; eq. (1.1) predicts where the measured-compensation cloud goes, and a transposed tilt formula is
# caught by that prediction (the distance to the target alone barely sees it). Cheaper exact controls exist and
# an optimiser finds them from random starts. By the attention alone, steering is exact on eq. (1.1), but open
# loop on tokens it reached {glue:text}`ao_reached` of {glue:text}`ao_draws` targets as precisely as
# attention-free steering and amplified the error of the others: with the bilinear term as the only lever,
# reachability becomes sensitive where with $A$ free it is not.
#
# ## How these checks were designed
#
# ```{dropdown} Revisions, seeds and the mutations behind these claims
# - *Relabelled.* The optimiser run of (d) on eq. (1.1), once a `reproduces` claim of `beyond_min_energy`, is a
#   consistency check: both sides are eq. (1.1). The endpoint claims of (c) on eq. (1.1), once
#   derivations, are consistency checks: the controls subtract the ODE's own attention term, so the ODE reaches
#   the target whatever the tilt formula is. The evidence with attention on is on tokens. The dynamic error
#   $E_N$ of (c) under the paper's compensation, once a `reproduces` claim, is a consistency check since the
#   sides were traced: the controls subtract $V\Sigma_\text{ref}B$ computed by the library's tilt formula, so
#   the token run and eq. (1.1) both run that formula, the code the claim would test. The measured compensation's
#   $E_N$, whose controls come from the pilot's NumPy regression, is the reproduction.
# - *Traced sides.* Each reproduction records the library functions its two sides ran: the observed side is the
#   steering controls (the paper's or the measured compensation, the attention-only controls) and the tokens
#   moved by the $N$-token simulator; the predicted side is eq. (1.1) under the same controls from the cloud's
#   own moments ($E_N$), the attention-free steering's exact flow of the same cloud (the reference of (e),
#   computed by the book from the steering's stages) or nothing: the excess spread of (a) and $D_N$ are compared
#   with the target and the rate $N^{-1/2}$ itself. The distances are the comparison and count on neither side.
#   The book refuses a reproduction whose two sides share model code; none of this chapter's reproductions do.
# - *The measured compensation of (c)* was added so that steering with a head held fixed is tested by a
#   compensation that does not reuse the ODE's attention function (the pilot's response is regressed in NumPy,
#   not by the library's kernel). The head's $B$ is scaled per draw to $\kappa = 0.2$ along the reference
#   path, in the finite-variance regime, instead of redrawing: every draw is kept. Thresholds ($\pm 3$
#   bootstrap SE around $-1/2$, controls above the band's upper edge) and the seeds 2235 (draws and clouds) and 2236 (bootstrap) were fixed
#   before the run. Under an error that transposes $B$ in the tilt formula of eq. (1.1) the $E_N$ slope is the
#   control's ($\approx 0$), outside the band.
# - *The attention-alone ensemble of (e)* is new. A pilot on other seeds showed that moving the mean while the
#   attention steers the covariance fails for targets far from the origin in the cloud's units (the logits are
#   not translation invariant, and the mean's linearisation carries $V \propto 1/\beta$), so the mean is held
#   at 0 by antithetic clouds and moved by $b$ at the end; the pilot also showed that some targets are missed
#   even so, which is the finding reported. The reached criterion (amplification below 3 at the largest $N$),
#   $\beta = 0.5$, $\theta = 0.6$ and seed 2238 were fixed before the run; its claim records the outcome
#   against "every target reached" (`reproduces` if all are, `not_reproduced` otherwise).
# - *Scopes.* (a)'s token ensemble keeps draws whose path has $\kappa < 1/4$ (redrawing the others: a
#   condition on the layer, not on the outcome), and (c)'s ensemble with the paper's compensation keeps
#   $\kappa < 0.45$: the $N^{-1/2}$ rate is
#   predicted only there. Seeds 2231–2234 and the thresholds of these two are those of the previous version.
# - *Mutations.* An earlier version claimed the $d = 2$ cloud of (c) within 0.2 of the uncompensated
#   distance: a bound with no band and no control, now only reported.
# ```
