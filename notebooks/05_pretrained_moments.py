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
# # 5. Transformers fed Gaussian tokens: how close to Gaussian?
#
# The reduction of the paper rests on one modelling choice: the tokens are Gaussian, and for
# self-attention with an affine feed-forward layer the Gaussian family is invariant, so the measure
# dynamics collapse to the moment system (eq. 1.1)
#
# $$
# \mu' = (A + V)\,\mu + V\Sigma B\,\mu + b, \qquad
# \Sigma' = A\Sigma + \Sigma A^\top + V\Sigma B\Sigma + \Sigma B^\top \Sigma V^\top .
# $$
#
# Real networks have LayerNorm, GELU feed-forward blocks, many heads and positions, so invariance
# cannot hold exactly. The paper's empirical statement, in its abstract (arXiv:2606.07600):
# "practical Transformers with Gaussian inputs remain close to moment-matched Gaussian distributions
# through early and intermediate layers", checked there on pretrained ModernBERT and Tiny-DeiT.
#
# *Close* is a matter of degree. An earlier version of this chapter asked instead whether each layer's
# token cloud is *exactly* Gaussian (inside the noise band of a true Gaussian sample of the same size),
# and that verdict depends on the sample size: with more tokens any non-Gaussian law leaves its band.
# This chapter measures **how far** from Gaussian each layer is, as an effect size, and compares it with
# a fixed moderate departure: moment-matched Student-$t$ tokens with $\nu = 20$ degrees of freedom.
#
# **Models.** all-MiniLM-L6-v2 with its real pretrained weights (a 6-block post-LayerNorm BERT of width
# $d = 384$), and the paper's two architectures **trained here, not the paper's pretrained
# checkpoints** (their weights cannot be obtained on the machines that build this book): a ViT with
# DeiT-tiny's width 192, depth 12, 3 heads and MLP ratio 4, trained on scikit-learn's bundled 8×8
# digits, and a small ModernBERT (width 128, 6 blocks) trained by masked-language modelling on the
# documentation topics that ship with Python (`pydoc_data`), each also (in the full profile) with its
# random initialisation.
#
# **Inputs.** $S$ independent sequences of $T = 512$ i.i.d. tokens $x_{s,t} \sim N(0, I_d)$, in two
# input modes ({py:mod}`gtcore.models`): **pure**, the first block sees exactly the Gaussian tokens (no
# embedding LayerNorm, no positions: the model is permutation equivariant, like the mean-field flow),
# and **embedding**, the Gaussian vectors replace the token-embedding lookup (for the ViT, the patch
# projection) and pass through the model's own positions and embedding LayerNorm (the ViT's $T = 512$
# patches form a $16 \times 32$ grid; its position table is interpolated from the $4 \times 4$ grid it
# was trained on). Layer $\ell = 0$ is what block 1 sees; $\ell = 1..L$ are the block outputs.
#
# ## The criterion, registered before any run
#
# It was fixed in the book's issue 23 before any of the runs below, and is implemented as written in
# {py:mod}`gtbook.studies.pretrained.criterion` (the effect sizes in
# {py:mod}`gtbook.studies.pretrained.effects`). For each layer $\ell$, input mode and statistic $s$ among
# the sliced $W_2$ distance to the moment-matched Gaussian in whitened coordinates ($SW_2$), Mardia's
# kurtosis relative excess $\kappa_M = (b_{2,r} - r(r+2))/(r(r+2))$ and the mean absolute excess kurtosis
# of the coordinates $\bar\kappa$, all computed **within sequences** (each sequence centred on its own
# mean; attention couples the tokens of a sequence, so the sampling unit is the sequence):
#
# * the **debiased effect size** $\Delta_s(\ell)$ is the statistic minus its mean over true Gaussian
#   samples of the same shape $(S, T)$ and rank; for the sliced $W_2$,
#   $\Delta = \sqrt{\max(0,\ SW_2^2 - \mathbb{E}[SW_{2,\mathrm{null}}^2])}$; with a 95% confidence interval
#   from a bootstrap over sequences;
# * the **reference** $\Delta_s(\mathrm{ref})$ is the same effect size, with its own interval, for
#   moment-matched multivariate Student-$t$ tokens with $\nu = 20$ of the same shape (every coordinate
#   with excess kurtosis $6/(\nu-4) = 0.375$);
# * layer $\ell$ is **close** iff, for every statistic, the upper end of $\Delta_s(\ell)$'s interval is
#   below the lower end of $\Delta_s(\mathrm{ref})$'s;
# * the statement **holds for a model** iff it is close at every block output
#   $\ell = 1, \dots, \lceil L/2 \rceil$ in both modes, and the last block is not close (the departure grows
#   with depth, which is what gives "early and intermediate" its meaning). The first block that is not
#   close is reported per statistic and mode;
# * **confirmatory run**: everything claimed below is computed on seeds never used before in this
#   repository (checked with `git grep` and `git log -S` over the whole history): $S = 8$ sequences with
#   seed 8231, $S = 32$ with seed 32771 (the sweep over $S$ of {numref}`fig-criteria-sizes` adds $S = 4$,
#   seed 4127, and, in the full profile, $S = 16$, seed 16453; training uses seed 2311). The verdict must
#   be the same at both sizes, and the effect sizes must agree within their intervals across the two
#   sizes;
# * **sensitivity** (reported, not claimed): the same verdicts with $\nu = 10$ and $\nu = 50$ as references.
#
# Readings the implementation had to make, also fixed before any model was run (the module's docstring
# has the details): the two kurtosis effect sizes are **magnitudes** $|\,s - \mathbb{E}_{\rm null}s\,|$ (a
# light-tailed departure is a departure too); the interval is $\theta \pm t_{S-1,0.975}\,\mathrm{se}$ on the
# debiased scale with the bootstrap standard error over $B$ resamples of the $S$ sequences, each resample
# debiased by Gaussian samples resampled with the same multiplicities (a resample repeats sequences,
# and in dimension 383 repeated points move these statistics far more than sampling does: without
# that, an exact Gaussian sample would not even count as close at $S = 8$); "the last block is not
# close" is required in each mode; "agree within their intervals" means that the two 95% intervals of
# every block, mode and statistic overlap. The interval's coverage was measured on synthetic data
# first: 91–97% with attention-coupled tokens, but only 74–82% when sequences differ strongly in scale.
#
# **Claims** (their thresholds are the criterion's, fixed above): for each model, the verdict at $S = 8$
# and $S = 32$, that both sizes give the same verdict, that no interval pair disagrees; the controls that
# the reference's departure is resolved (its lower ends are positive), that an independent draw of the
# reference law is not called close, and that the Gaussian input (layer 0 of the pure mode) is called
# close; and that each trained-here model beats its trivial baseline.

# %% tags=["parameters"]
tokens = 512
confirm_sequences = [8, 32]
confirm_seeds = [8231, 32771]
sweep_sequences = [4, 16]
sweep_seeds = [4127, 16453]
n_boot = 48
null_repeats = 16
null_pool = 4
n_projections = 128
train_seed = 2311
vit_steps = 300
mlm_steps = 500
cluster_sequences = 4
cluster_threshold = 0.9
initialisations = True
sensitivity = True

# %%
import math
import time

import numpy as np

from gtbook import claim
from gtbook.glue import glue
from gtbook.studies.pretrained import figures as figs
from gtbook.studies.pretrained.clustering import clustering_profile
from gtbook.studies.pretrained.criterion import (
    FRACTION_HEADER,
    REFERENCE_NU,
    SENSITIVITY_NU,
    VERDICT_HEADER,
    band_verdict_block,
    effect_verdict_block,
    study_model,
)
from gtbook.studies.pretrained.effects import STATISTICS, Settings
from gtbook.studies.pretrained.side_by_side import train_side_by_side
from gtbook.studies.pretrained.training import (
    TRAINED_HERE,
    mlm_schedule,
    vit_schedule,
)
from gtcore.models import load_transformer

settings = Settings(n_projections=n_projections, n_boot=n_boot, null_repeats=null_repeats,
                    null_pool=null_pool)
started = time.perf_counter()
minilm = load_transformer("minilm", device="cpu")
vit, mlm = train_side_by_side(vit_schedule(vit_steps, train_seed), mlm_schedule(mlm_steps, train_seed))
print(settings)
for t in (vit, mlm):
    print(t.record)

# %% [markdown]
# ## The models trained here
#
# Both are trained on the CPU with one thread each, side by side, seeded, and cached as safetensors (a
# second build loads them). {numref}`fig-training` shows the held-out metric during training against the trivial baseline:
# the ViT's accuracy on a stratified 20% of the digits against chance (the most frequent class), the
# ModernBERT's masked-character cross-entropy on the held-out last 10% of every topic against a unigram
# model of the training text.

# %% mystnb={"figure": {"name": "fig-training", "caption": "Training of the two models trained here (not the paper's pretrained checkpoints): held-out metric (blue) and training loss (orange) against the step, with the trivial baseline (dashed)."}, "image": {"alt": "Two panels: the ViT's held-out accuracy rises from chance to above 0.9; the ModernBERT's held-out masked-token loss falls well below the unigram baseline."}}
fig_train = figs.training_figure([vit.record, mlm.record])
for name, t in (("vit", vit), ("mlm", mlm)):
    glue(f"{name}_metric", t.record.final)
    glue(f"{name}_baseline", t.record.baseline)
    glue(f"{name}_steps", int(t.record.steps[-1]))
    glue(f"{name}_cold_s", t.record.seconds)

# %% [markdown]
# After {glue:text}`vit_steps` steps the ViT classifies {glue:text}`vit_metric:.3f` of the held-out digits
# (chance: {glue:text}`vit_baseline:.3f`); after {glue:text}`mlm_steps` steps the ModernBERT's held-out
# masked-character loss is {glue:text}`mlm_metric:.2f` nats (unigram model: {glue:text}`mlm_baseline:.2f`).
# Trained cold, on one thread of a shared machine, they took {glue:text}`vit_cold_s:.0f` s and
# {glue:text}`mlm_cold_s:.0f` s; later builds load them from the cache.

# %%
sizes = list(confirm_sequences)
run = dict(sizes=sizes, seeds=confirm_seeds, tokens=tokens, settings=settings)
nus = (REFERENCE_NU, *SENSITIVITY_NU) if sensitivity else (REFERENCE_NU,)
studies = {"MiniLM": study_model(minilm, nus=nus, **run),
           "ViT": study_model(vit.model, nus=nus, **run),
           "ModernBERT": study_model(mlm.model, nus=nus, **run)}
initial = {key: study_model(t.initial, sizes=sizes[:1], seeds=confirm_seeds[:1], tokens=tokens,
                            settings=settings, nus=(REFERENCE_NU,), controls=False)
           for key, t in (("ViT", vit), ("ModernBERT", mlm))} if initialisations else {}
sweep = study_model(minilm, sizes=sweep_sequences, seeds=sweep_seeds, tokens=tokens, settings=settings,
                    nus=(REFERENCE_NU,), controls=False)
for st in studies.values():
    print(st)
print(f"criterion runs: {time.perf_counter() - started:.0f} s so far")

# %% [markdown]
# ## MiniLM, layer by layer
#
# The tables give, per layer, each effect size $\Delta_s(\ell)$ with its 95% interval; `*` marks a
# statistic whose upper end is not below the reference's lower end. {numref}`fig-minilm-effects` draws
# the same numbers with the reference's interval shaded.

# %%
ref = {S: studies["MiniLM"].references[REFERENCE_NU, S] for S in sizes}
for S in sizes:
    for mode in ("pure", "embedding"):
        print(studies["MiniLM"].effects[S][mode].table(ref[S]))
        print()
q = int(studies["MiniLM"].effects[sizes[-1]]["pure"].null_rank[1])
for S in sizes:
    print(f"reference (Student-t, nu = {REFERENCE_NU:g}), S = {S}:", ref[S][q])

# %% mystnb={"figure": {"name": "fig-minilm-effects", "caption": "MiniLM (pretrained): the effect sizes of the three statistics per layer with their 95% intervals, both modes, at S = 8 and S = 32 sequences; shaded, the interval of the Student-t reference (nu = 20) of the same shape. A layer is close when, for every statistic, its interval lies below the shaded band."}, "image": {"alt": "Three panels of effect sizes against the layer index, four series each with error bars, and shaded reference bands; the series stay below the bands in the early layers and approach or cross them later."}}
series = {f"{m}, S={S}": studies["MiniLM"].effects[S][m] for S in sizes for m in ("pure", "embedding")}
fig_eff = figs.effect_size_figure(series, {f"{m}, S={S}": ref[S] for S in sizes
                                           for m in ("pure", "embedding")})

# %% [markdown]
# ## The verdicts
#
# Per model and sample size: the verdict, the largest ratio of an upper end of $\Delta_s(\ell)$ to the
# reference's lower end over the early and intermediate blocks and both modes ("early", close iff below
# 1), the same ratio at the last block (the smaller of the two modes: "last", not close iff at least 1), and
# the first block not close per mode and statistic ("-": none). The second table gives the effect sizes
# as fractions of the reference's, $\Delta_s(\ell)/\Delta_s(\mathrm{ref})$, at blocks 1, $\lceil L/2\rceil$ and $L$.

# %%
print(VERDICT_HEADER)
for key in studies:
    print("\n".join(studies[key].verdict_rows()))
for key in initial:
    print("\n".join(initial[key].verdict_rows()))
print()
print(FRACTION_HEADER)
for key in studies:
    for S in sizes:
        print("\n".join(studies[key].fraction_rows(S)))
for key in initial:
    print("\n".join(initial[key].fraction_rows(sizes[0])))
print()
for st in studies.values():
    print(f"{st.model}: interval disagreements between S = {sizes[0]} and S = {sizes[1]}: "
          f"{ {m: d for m, d in st.disagreements().items()} }")

# %% [markdown]
# ## Sensitivity to the reference
#
# The same verdicts with a heavier reference ($\nu = 10$, coordinate excess kurtosis 1) and a lighter one
# ($\nu = 50$, 0.13). Reported, not claimed (and run in the full profile only).

# %%
if sensitivity:
    print(VERDICT_HEADER)
    for nu in SENSITIVITY_NU:
        for key in studies:
            print("\n".join(studies[key].verdict_rows(nu)))
else:
    print("not run in this profile (sensitivity = False)")

# %% [markdown]
# ## The two criteria across sample sizes
#
# {numref}`fig-criteria-sizes` puts the old criterion (every statistic inside the 99% noise band of a
# true Gaussian sample of the same size) and the effect-size criterion side by side for MiniLM, as the
# number of sequences grows (each size its own fresh seed): the first block at which each fails, over
# statistics, per mode. The dotted line separates the blocks at which a failure contradicts the statement
# (at or below $\lceil L/2\rceil$) from those at which it is allowed.

# %% mystnb={"figure": {"name": "fig-criteria-sizes", "caption": "MiniLM: the first block at which the noise-band criterion of exact Gaussianity (dashed) and the effect-size criterion (solid) fail, against the number of sequences S of 512 tokens, per mode."}, "image": {"alt": "First failing block against the number of sequences for two criteria and two modes: the noise-band criterion fails at block 1 at every size, the effect-size criterion's first failing block moves later as the number of sequences grows."}}
by_size = {**{S: sweep.effects[S] for S in sweep.sizes}, **{S: studies["MiniLM"].effects[S] for S in sizes}}
refs_by_size = {**{S: sweep.references[REFERENCE_NU, S] for S in sweep.sizes},
                **{S: studies["MiniLM"].references[REFERENCE_NU, S] for S in sizes}}
all_sizes = sorted(by_size)
band_blocks = {m: [band_verdict_block({m: by_size[S][m]}) for S in all_sizes] for m in ("pure", "embedding")}
effect_blocks = {m: [effect_verdict_block({m: by_size[S][m]}, refs_by_size[S]) for S in all_sizes]
                 for m in ("pure", "embedding")}
L_mini = studies["MiniLM"].n_blocks
fig_sizes = figs.criteria_across_sizes_figure(all_sizes, band_blocks, effect_blocks, L_mini,
                                              title="all-MiniLM-L6-v2")
for m in ("pure", "embedding"):
    print(f"{m:>9}: S = {all_sizes}: first block out of band {band_blocks[m]}, "
          f"first block not close {effect_blocks[m]} ({L_mini + 1} = none)")

# %% [markdown]
# ## After "early and intermediate": clustering
#
# The mean-field analyses of self-attention predict that tokens cluster at depth. For each model, in the
# pure mode, {numref}`fig-clustering` shows on one depth axis how close to Gaussian the cloud is (the
# largest ratio of an upper end of $\Delta_s(\ell)$ to the reference's lower end: close below 1, at
# $S = 8$ for the trained model and its random initialisation alike), the histogram of the pairwise
# cosine similarities of the tokens of a sequence, and a cluster count: the connected components of the
# graph that joins two tokens of a sequence when their cosine similarity is at least 0.9, averaged over
# 4 sequences (512 for independent Gaussian tokens, 1 for tokens that all point the same way).

# %%
S0 = sizes[0]
columns, profiles = {}, {}


def worst_ratio(study, S):
    """max over statistics of upper Delta / lower Delta_ref, pure mode, per layer."""
    res = study.effects[S]["pure"]
    return np.max([res.ratio(study.references[REFERENCE_NU, S], s) for s in STATISTICS], axis=0)


for key, model, init in (("MiniLM", minilm, None), ("ViT", vit.model, vit.initial),
                         ("ModernBERT", mlm.model, mlm.initial)):
    prof = clustering_profile(model, mode="pure", sequences=cluster_sequences, tokens=tokens,
                              seed=confirm_seeds[0], threshold=cluster_threshold)
    iprof = (clustering_profile(init, mode="pure", sequences=cluster_sequences, tokens=tokens,
                                seed=confirm_seeds[0], threshold=cluster_threshold)
             if init is not None and initialisations else None)
    profiles[key] = (prof, iprof)
    title = {"MiniLM": "all-MiniLM-L6-v2 (pretrained)", "ViT": "DeiT-tiny-configured ViT",
             "ModernBERT": "small ModernBERT"}[key] + ("" if init is None else f"\n({TRAINED_HERE})")
    columns[title] = {"ratio": worst_ratio(studies[key], S0), "profile": prof,
                      "initial_ratio": worst_ratio(initial[key], S0) if key in initial else None,
                      "initial_profile": iprof}
    print(prof.table())
    if iprof is not None:
        print(iprof.table())
    print()

# %% mystnb={"figure": {"name": "fig-clustering", "caption": "Closeness to Gaussian and clustering on one depth axis, pure mode: top, the largest ratio of an upper end of the effect size to the Student-t reference's lower end (close below 1; dashed grey: the random initialisation); middle, the histogram of pairwise cosine similarities of the tokens of a sequence per layer (white: the mean); bottom, the number of clusters at cosine similarity 0.9."}, "image": {"alt": "Three columns of three panels against relative depth: a closeness ratio, a heat map of cosine similarities and a cluster count, for MiniLM and the two models trained here."}}
print(f"chapter computations: {time.perf_counter() - started:.0f} s")
fig_clu = figs.closeness_and_clustering_figure(columns)

# %% [markdown]
# ## Claims
#
# The verdicts are recorded as they came out of the confirmatory run, each with its kind: *reproduces*
# where a part of the registered test came out as the statement predicts, *not_reproduced* where it came
# out against it (so a later run in which it came out otherwise fails the claim and is noticed). The
# thresholds are the criterion's own (a ratio below or above 1), fixed before the run.

# %%
STATEMENT = {"MiniLM": "pretrained_gaussian", "ViT": "trained_here_architectures",
             "ModernBERT": "trained_here_architectures"}
LABEL = {"MiniLM": "MiniLM (pretrained)", "ViT": f"ViT ({TRAINED_HERE})",
         "ModernBERT": f"ModernBERT ({TRAINED_HERE})"}
small, large = sizes
mini = studies["MiniLM"]
half_mini = math.ceil(mini.n_blocks / 2)
claim("ViT trained here: held-out digits accuracy above chance", vit.record.final,
      gt=vit.record.baseline, statement="trained_here_architectures", kind="consistency")
claim("ModernBERT trained here: held-out masked-character loss (nats) below the unigram model's",
      mlm.record.final, lt=mlm.record.baseline, statement="trained_here_architectures", kind="consistency")

# MiniLM: holds at S = 32, not close at block 3 at S = 8: the registered confirmation fails
claim(f"MiniLM (pretrained): not reproduced by the confirmatory run, whose two sizes give different "
      f"verdicts (S = {small}: {mini.verdict(small).verdict}; S = {large}: {mini.verdict(large).verdict})",
      mini.verdict(small).verdict is not mini.verdict(large).verdict, statement="pretrained_gaussian",
      kind="not_reproduced")
claim(f"MiniLM (pretrained), S = {small}: not close at some block 1-{half_mini} (largest upper end over "
      "the reference's lower end, both modes)", mini.verdict(small).early_ratio, gt=1.0,
      statement="pretrained_gaussian", kind="not_reproduced")
claim(f"MiniLM (pretrained), S = {large}: close at every block 1-{half_mini} in both modes (largest upper "
      "end over the reference's lower end)", mini.verdict(large).early_ratio, lt=1.0,
      statement="pretrained_gaussian", kind="reproduces")
for S in sizes:
    claim(f"MiniLM (pretrained), S = {S}: the last block is not close in either mode (smallest over the "
          "modes of the largest ratio)", mini.verdict(S).last_ratio, gt=1.0, statement="pretrained_gaussian",
          kind="reproduces")

# the two architectures trained here: close at every block, the last one included
for key in ("ViT", "ModernBERT"):
    st = studies[key]
    for S in sizes:
        claim(f"{LABEL[key]}, S = {S}: close at every block 1-{math.ceil(st.n_blocks / 2)} in both modes "
              "(largest ratio)", st.verdict(S).early_ratio, lt=1.0, statement=STATEMENT[key],
              kind="reproduces")
        claim(f"{LABEL[key]}, S = {S}: not reproduced, the last block is still close in both modes (the "
              "departure does not grow; largest ratio at the last block, larger mode)",
              max(float(st.effects[S][m].ratio(st.references[REFERENCE_NU, S], s)[-1])
                  for m in st.effects[S] for s in STATISTICS), lt=1.0, statement=STATEMENT[key],
              kind="not_reproduced")

for key, st in studies.items():
    stmt, label = STATEMENT[key], LABEL[key]
    if key != "MiniLM":
        claim(f"{label}: the same verdict at S = {small} and S = {large}",
              st.verdict(small).verdict is st.verdict(large).verdict, statement=stmt, kind="consistency")
    claim(f"{label}: effect-size intervals at S = {small} and S = {large} that do not overlap "
          "(every block, mode and statistic)", sum(len(d) for d in st.disagreements().values()),
          lt=0.5, statement=stmt, kind="consistency")
    for S in sizes:
        claim(f"control, {label}, S = {S}: the Student-t (nu = 20) reference's departure is resolved "
              "(smallest lower end of its effect sizes)", st.reference_low(S), gt=0.0, statement=stmt,
              kind="control")
        claim(f"control, {label}, S = {S}: an independent Student-t (nu = 20) sample is not close "
              "(largest upper end over the reference's lower end)", st.control_ratio(S), gt=1.0,
              statement=stmt, kind="control")
        claim(f"{label}, S = {S}: the Gaussian input (pure mode, layer 0) is close (largest upper end "
              "over the reference's lower end)", st.gaussian_ratio(S), lt=1.0, statement=stmt,
              kind="consistency")

# %%
def first_blocks(v):
    """'block b (statistic, mode; ...)' for the earliest block not close, over statistics and modes."""
    firsts = {k: f for k, f in v.first_not_close.items() if f is not None}
    if not firsts:
        return "none"
    b = min(firsts.values())
    which = "; ".join(f"{STATISTICS[s]}, {m} mode" for (m, s), f in firsts.items() if f == b)
    return f"block {b} ({which})"


def fraction_range(st, S, block):
    """min-max over modes and statistics of Delta(block) / Delta(ref)."""
    vals = [f for m in st.effects[S] for fr in st.fractions(S, m, [block]).values() for f in fr]
    return f"{min(vals):.2f}-{max(vals):.2f}"


for S in sizes:
    v = mini.verdict(S)
    glue(f"mini_verdict_{S}", str(v.verdict))
    glue(f"mini_early_{S}", v.early_ratio)
    glue(f"mini_last_{S}", v.last_ratio)
    glue(f"mini_first_{S}", first_blocks(v))
    for block, name in ((1, "b1"), (half_mini, "bh"), (mini.n_blocks, "bl")):
        glue(f"mini_frac_{name}_{S}", fraction_range(mini, S, block))
glue("mini_half", half_mini)
lay0 = mini.effects[small]["pure"]
null0 = lay0.nulls[int(lay0.null_rank[0])]
ratios0 = [lay0.effects[0].se[s] / null0.sd_sq[s] for s in STATISTICS]
glue("gauss_se_ratio", f"{min(ratios0):.1f}-{max(ratios0):.1f}")
glue("mini_L", mini.n_blocks)
for key, short in (("ViT", "vit"), ("ModernBERT", "mlm")):
    st = studies[key]
    glue(f"{short}_L", st.n_blocks)
    glue(f"{short}_early_max", max(st.verdict(S).early_ratio for S in sizes))
    glue(f"{short}_frac_max", max(float(x) for S in sizes for m in st.effects[S]
                                  for fr in st.fractions(S, m, list(range(1, st.n_blocks + 1))).values()
                                  for x in fr))
    prof = profiles[key][0]
    glue(f"{short}_update", f"{np.nanmin(prof.update):.2f}-{np.nanmax(prof.update):.2f}")
glue("mini_update", f"{np.nanmin(profiles['MiniLM'][0].update):.2f}-{np.nanmax(profiles['MiniLM'][0].update):.2f}")
glue("mini_cos_max", float(np.max(profiles["MiniLM"][0].mean_cosine)))
glue("clusters_min", float(min(np.min(p[0].clusters) for p in profiles.values())))
glue("disagreements", int(sum(len(d) for st in studies.values() for d in st.disagreements().values())))
glue("sizes_swept", ", ".join(map(str, all_sizes)))
glue("band_blocks", ", ".join(map(str, band_blocks["pure"])))
glue("effect_blocks", ", ".join(map(str, effect_blocks["pure"])))
if sensitivity:
    glue("sens_10", "; ".join(f"S = {S}: {mini.verdict(S, 10.0).verdict}" for S in sizes))
    glue("sens_50", "; ".join(f"S = {S}: {mini.verdict(S, 50.0).verdict}" for S in sizes))
else:
    glue("sens_10", "not run in this profile")
    glue("sens_50", "not run in this profile")
if initial:
    glue("init_verdicts", "; ".join(f"{k}: {initial[k].verdict(small).verdict}" for k in initial))
else:
    glue("init_verdicts", "not run in this profile")

# %% [markdown]
# **What we saw.** The statement is **not reproduced** here, on any of the three models, by the
# criterion registered before the runs.
#
# *MiniLM (pretrained, real weights).* With $S = 32$ sequences the statement holds: every block from 1
# to {glue:text}`mini_half` is closer to Gaussian than the Student-$t$ reference in both modes (largest
# ratio {glue:text}`mini_early_32:.2f`), and the last block is not (smallest ratio
# {glue:text}`mini_last_32:.1f`): as fractions of the reference's effect sizes, block 1 lies at
# {glue:text}`mini_frac_b1_32`, block {glue:text}`mini_half` at {glue:text}`mini_frac_bh_32` and block
# {glue:text}`mini_L` at {glue:text}`mini_frac_bl_32` (over statistics and modes). With $S = 8$ the
# verdict is "{glue:text}`mini_verdict_8`": the first block not close is {glue:text}`mini_first_8`
# (largest ratio {glue:text}`mini_early_8:.2f`). The confirmatory run requires the same verdict at both
# sizes, so it does not confirm the statement. The point estimates barely move between the sizes (all
# intervals of the two sizes overlap: {glue:text}`disagreements` pairs do not, over the three models): what
# changes is the width of the intervals, too wide at $S = 8$ for block {glue:text}`mini_half` to count as
# close. These intervals are conservative by construction, which weighs most with 8 sequences: for the
# Gaussian input itself (layer 0, pure mode, $S = 8$) the bootstrap standard error is
# {glue:text}`gauss_se_ratio` times the spread of the same statistics over the null's Gaussian samples.
#
# *The two architectures trained here* (not the paper's pretrained checkpoints). The DeiT-tiny-configured
# ViT ({glue:text}`vit_L` blocks) and the small ModernBERT ({glue:text}`mlm_L` blocks) learned their tasks
# ({numref}`fig-training`), but on these Gaussian tokens they are close to Gaussian at every block, the last
# one included, at both sizes (effect sizes at most {glue:text}`vit_frac_max:.2f` and
# {glue:text}`mlm_frac_max:.2f` of the reference's), so the departure that gives "early and intermediate"
# its meaning never appears and the statement is not reproduced with them. Each block changes the tokens by
# {glue:text}`vit_update` (ViT) and {glue:text}`mlm_update` (ModernBERT) of their norm, against
# {glue:text}`mini_update` for MiniLM: the networks act nearly linearly on these inputs, as their random
# initialisations do ({glue:text}`init_verdicts`).
#
# *Sensitivity* (not claimed). With the heavier reference $\nu = 10$, MiniLM's verdicts are
# {glue:text}`sens_10`; with the lighter $\nu = 50$, {glue:text}`sens_50`.
#
# *The two criteria across sizes* ({numref}`fig-criteria-sizes`). For $S$ = {glue:text}`sizes_swept`, the
# old noise-band criterion fails first at blocks {glue:text}`band_blocks` (pure mode): it rejects exact
# Gaussianity from block 1 at every size tried, so in this range its verdict does not move. The effect-size
# criterion fails first at blocks {glue:text}`effect_blocks`: its verdict moves with $S$, because showing
# that a layer is *closer* than the reference needs intervals narrower than the gap, which few sequences do
# not give. The expectation stated with the criterion, that the band verdict would move with $S$ and the
# effect-size verdict would not, is the opposite of what this run shows.
#
# *Clustering* ({numref}`fig-clustering`). No model clusters: at cosine similarity 0.9 the fewest clusters
# at any layer is {glue:text}`clusters_min:.0f` of 512 tokens. MiniLM's tokens align partly with depth (mean
# cosine similarity up to {glue:text}`mini_cos_max:.2f`); the trained-here models' stay near orthogonal.
#
# What this chapter cannot say: the paper's statement concerns its pretrained ModernBERT and Tiny-DeiT,
# whose weights are not on the machines that build this book; one pretrained model and two small models
# trained here say nothing about them.
