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
# On all-MiniLM-L6-v2 with its real pretrained weights, the token cloud's departure from the moment-matched
# Gaussian, as a fraction of a moderate reference departure, rises steadily with depth: with 32 sequences it is
# {glue:text}`mini_b1_32` of the reference at block 1, {glue:text}`mini_bh_32` at block {glue:text}`mini_half`
# and {glue:text}`mini_bl_32` at block {glue:text}`mini_L` ({numref}`fig-profile`), which reads
# {glue:text}`mini_reading`. The two architectures trained here move their tokens by only
# {glue:text}`trained_update` of their norm per block, so they cannot test the statement, and the paper's own
# pretrained models (ModernBERT, Tiny-DeiT) were not tested.
#
# The paper's reduction rests on one modelling choice: the tokens are Gaussian, and for self-attention with
# an affine feed-forward layer the Gaussian family is invariant, so the measure dynamics collapse to the
# moment system (eq. 1.1)
#
# $$
# \mu' = (A + V)\,\mu + V\Sigma B\,\mu + b, \qquad
# \Sigma' = A\Sigma + \Sigma A^\top + V\Sigma B\Sigma + \Sigma B^\top \Sigma V^\top .
# $$
#
# Real networks have LayerNorm, GELU feed-forward blocks, many heads and positions, so invariance cannot
# hold exactly. The paper's empirical statement, in its abstract (arXiv:2606.07600): "practical Transformers
# with Gaussian inputs remain close to moment-matched Gaussian distributions through early and intermediate
# layers", checked there on pretrained ModernBERT and Tiny-DeiT. *Close* is a matter of degree, so this
# chapter measures **how far** from Gaussian each layer is, as an effect size, against a fixed moderate
# departure: moment-matched Student-$t$ tokens with $\nu = 20$ degrees of freedom.
#
# **Models and inputs** ({py:mod}`gtcore.models`). all-MiniLM-L6-v2 with its real pretrained weights (6
# post-LayerNorm blocks, $d = 384$, 12 heads), and the paper's two architectures **trained here, not the
# paper's pretrained checkpoints** (those cannot be obtained on the machines that build this book): a ViT of
# DeiT-tiny's shape trained on scikit-learn's 8×8 digits, and a small ModernBERT ($d = 128$, 6 blocks) trained
# by masked-language modelling on Python's `pydoc_data` topics. Each is fed $S$ sequences of $T = 512$ i.i.d.
# tokens $N(0, I_d)$, in two modes: **pure** (block 1 sees exactly the Gaussian tokens) and **embedding**
# (they replace the token-embedding lookup and pass through the model's positions and embedding LayerNorm).
# Layer $\ell = 0$ is what block 1 sees, $\ell = 1..L$ the block outputs.
#
# ## The criterion, registered before any run
#
# Implemented in {py:mod}`gtbook.studies.pretrained.criterion`, with the effect sizes of
# {py:mod}`gtbook.studies.pretrained.effects`. Three statistics $s$, computed **within sequences** (each
# sequence centred on its own mean: attention couples the tokens of a sequence, so the sampling unit is the
# sequence): the sliced $W_2$ distance to the moment-matched Gaussian in whitened coordinates, Mardia's
# kurtosis relative excess, and the mean absolute excess kurtosis of the coordinates.
#
# * The **effect size** $\Delta_s(\ell)$ is the statistic minus its mean over true Gaussian samples of the
#   same shape and rank (for the sliced $W_2$, $\sqrt{\max(0,\ SW_2^2 - \mathbb{E}[SW_{2,\mathrm{null}}^2])}$),
#   with a 95% interval from a bootstrap over sequences; the **reference** $\Delta_s(\mathrm{ref})$ is the same
#   for moment-matched Student-$t$ tokens ($\nu = 20$, coordinate excess kurtosis $0.375$) of the same shape.
# * Layer $\ell$ is **close** iff, for every statistic, the upper end of $\Delta_s(\ell)$'s interval is below
#   the lower end of the reference's.
# * The statement **holds for a model** iff it is close at every block $\ell = 1, \dots, h = \lceil L/2
#   \rceil$ in both modes, and the last block is not close (the departure grows with depth, which gives
#   "early and intermediate" its meaning).
# * **Confirmatory run**: fresh seeds, $S = 8$ and $S = 32$ sequences; the verdict must be the same at both
#   sizes, and the effect sizes must agree within their intervals. **Sensitivity** (reported, not claimed):
#   the same verdicts with $\nu = 10$ and $\nu = 50$ as references.
#
# **The profile** ({py:mod}`gtbook.studies.pretrained.profile`) reads the same numbers over depth:
# $F(\ell)$ is the largest fraction $\Delta_s(\ell)/\Delta_s(\mathrm{ref})$ over statistics and modes, with
# an interval whose upper end is below 1 exactly when the criterion calls the block close. Each part of the
# statement then reads **consistent**, **against** or **inconclusive** at each size: *close through blocks
# $1..h$* (every upper end below 1; against: some lower end at least 1) and *the departure grows* (the last
# block's lower end above block $h$'s upper end; against: its upper end below block $h$'s lower end).

# %% tags=["parameters"]
tokens = 512
confirm_sequences = [8, 32]
sweep_sequences = [4, 16]
seeds = {"confirm": [8231, 32771], "sweep": [4127, 16453], "train": 2311}
n_boot = 48
null_repeats = 16
null_pool = 4
n_projections = 128
vit_steps = 300
mlm_steps = 500
cluster_sequences = 4
cluster_threshold = 0.9
initialisations = True
sensitivity = True

# %%
from gtbook import claim
from gtbook.glue import glue
from gtbook.studies import pretrained
from gtbook.studies.pretrained import figures as figs
from gtcore.models import load_transformer

settings = pretrained.Settings(n_projections=n_projections, n_boot=n_boot, null_repeats=null_repeats,
                               null_pool=null_pool)
minilm = load_transformer("minilm", device="cpu")
vit, mlm = pretrained.train_side_by_side(pretrained.vit_schedule(vit_steps, seeds["train"]),
                                         pretrained.mlm_schedule(mlm_steps, seeds["train"]))

# %% [markdown]
# ## The models trained here
#
# Both are trained on the CPU with one thread each, side by side, seeded, and cached as safetensors.
# {numref}`fig-training` shows the held-out metric against the trivial baseline: the ViT's accuracy on a
# stratified 20% of the digits against chance (the most frequent class), the ModernBERT's masked-character
# cross-entropy on the held-out last 10% of every topic against a unigram model of the training text. After
# {glue:text}`vit_steps` steps the ViT classifies {glue:text}`vit_metric:.3f` of the held-out digits (chance:
# {glue:text}`vit_baseline:.3f`); after {glue:text}`mlm_steps` steps the ModernBERT's held-out loss is
# {glue:text}`mlm_metric:.2f` nats (unigram model: {glue:text}`mlm_baseline:.2f`).

# %% mystnb={"figure": {"name": "fig-training", "caption": "Training of the two models trained here (not the paper's pretrained checkpoints): held-out metric (blue) and training loss (orange) against the step, with the trivial baseline (dashed)."}, "image": {"alt": "Two panels: the ViT's held-out accuracy rises from chance to well above it; the ModernBERT's held-out masked-token loss falls below the unigram baseline."}}
fig_train = figs.training_figure([vit.record, mlm.record])

# %% [markdown]
# ## The effect-size profile
#
# The criterion runs on every model at both sizes, in both modes (and, in the full profile, on the random
# initialisations of the two models trained here, and with the sensitivity references); beside it, how far
# each block moves its tokens ({py:func}`gtbook.studies.pretrained.profile.update_norms`).

# %%
models = {"MiniLM": minilm, "ViT": vit.model, "ModernBERT": mlm.model}
nu = pretrained.REFERENCE_NU
nus = (nu, *pretrained.SENSITIVITY_NU) if sensitivity else (nu,)
confirm = dict(sizes=confirm_sequences, seeds=seeds["confirm"], tokens=tokens, settings=settings)
studies = {key: pretrained.study_model(model, nus=nus, **confirm) for key, model in models.items()}
first = dict(confirm, sizes=confirm_sequences[:1], seeds=seeds["confirm"][:1], nus=(nu,), controls=False)
initial = {key: pretrained.study_model(t.initial, **first) for key, t in (("ViT", vit), ("ModernBERT", mlm))
           if initialisations}
criterion = pretrained.CriterionRun(studies, initial)
profile = criterion.profile()
moved = {**models, "ViT (init.)": vit.initial, "ModernBERT (init.)": mlm.initial}
updates = {key: pretrained.update_norms(model, sequences=cluster_sequences, tokens=tokens, seed=seeds["confirm"][0])
           for key, model in moved.items()}

# %% [markdown]
# {numref}`fig-profile` draws $F(\ell)$, the largest departure over statistics and modes as a fraction of the
# reference's, with its interval, and in each title how far the model's blocks move their tokens; below it,
# each model's reading in plain words with $F$ at blocks 1, $h$ and $L$ (expand the second output for every
# block, with the range of the point estimates over statistics and modes).

# %% mystnb={"figure": {"name": "fig-profile", "caption": "The departure from the moment-matched Gaussian as a fraction of the Student-t reference's (nu = 20), per block: the largest over the three statistics and the two input modes, with its interval, at S = 8 and S = 32 sequences (dashed: the random initialisation, when run). Shaded: the early and intermediate blocks; a block is close when its whole interval lies below the line at 1."}, "image": {"alt": "Three panels on a log scale against the block: for MiniLM the departure rises from about a tenth of the reference at block 1 to several times it at the last block; for the two models trained here it stays far below the reference at every block."}}
notes = {key: f"blocks move tokens by {100 * u.smallest:.2g}-{100 * u.largest:.2g} %" for key, u in updates.items()}
fig_profile = profile.figure(initial=criterion.initial_profiles(), notes=notes)

# %%
print(profile.summary())

# %% tags=["hide-output"]
print(profile.table())

# %% [markdown]
# ## The registered verdict
#
# Per model and size: the verdict, the largest ratio of an upper end of $\Delta_s(\ell)$ to the reference's
# lower end over blocks $1..h$ and both modes ("early", close iff below 1), the same ratio at the last block
# (the smaller of the two modes: "last", not close iff at least 1), and the first block not close per mode
# and statistic ("-": none); then, reported and not claimed (full profile only), the same verdicts with a
# heavier reference ($\nu = 10$, coordinate excess kurtosis 1) and a lighter one ($\nu = 50$, 0.13).

# %%
print(criterion.verdict_table())
print(f"\ninterval pairs of S = 8 and S = 32 that do not overlap: {criterion.disagreements()}")
print(criterion.verdict_table(pretrained.SENSITIVITY_NU) if sensitivity else "sensitivity: not run in this profile")

# %% [markdown]
# ## How far each block moves its tokens
#
# The relative update of each block, $\|x^{(\ell)} - x^{(\ell-1)}\| / \|x^{(\ell-1)}\|$ averaged over the
# tokens of {glue:text}`cluster_sequences` sequences (pure mode), for each model and for the random
# initialisations of the two trained here (the titles of {numref}`fig-profile` give its range; expand the
# output for every block).

# %% tags=["hide-output"]
print(pretrained.update_table(updates))

# %% [markdown]
# ## MiniLM, layer by layer
#
# Each effect size $\Delta_s(\ell)$ with its 95% interval (`*`: not below the reference's lower end), and the
# fractions of the reference at blocks 1, $h$ and $L$ for every model (expand the output).

# %% tags=["hide-output"]
print(criterion.detail_table("MiniLM"))
print(criterion.fraction_table())

# %% [markdown]
# ## The two criteria across sample sizes
#
# {numref}`fig-criteria-sizes` puts the old criterion (every statistic inside the 99% noise band of a true
# Gaussian sample of the same size) and the effect-size criterion side by side for MiniLM, as the number of
# sequences grows (each size its own fresh seed): the first block at which each fails. The dotted line
# separates the blocks at which a failure contradicts the statement (at or below $h$) from those at which it
# is allowed.

# %% mystnb={"figure": {"name": "fig-criteria-sizes", "caption": "MiniLM: the first block at which the noise-band criterion of exact Gaussianity (dashed) and the effect-size criterion (solid) fail, against the number of sequences S of 512 tokens, per mode."}, "image": {"alt": "First failing block against the number of sequences for two criteria and two modes: the noise-band criterion fails at block 1 at every size, the effect-size criterion's first failing block moves later as the number of sequences grows."}}
sweep = pretrained.study_model(minilm, sizes=sweep_sequences, seeds=seeds["sweep"], tokens=tokens,
                               settings=settings, nus=(nu,), controls=False)
by_size = pretrained.size_sweep(sweep, studies["MiniLM"])
fig_sizes = by_size.figure(title="all-MiniLM-L6-v2")

# %% tags=["hide-output"]
print(by_size.table())

# %% [markdown]
# ## After "early and intermediate": clustering
#
# The mean-field analyses of self-attention predict that tokens cluster at depth. {numref}`fig-clustering`, in the
# collapsed output below, shows, in the pure mode and on one depth axis, the criterion's ratio (close below 1),
# the histogram of the pairwise cosine similarities of the tokens of a sequence, and a cluster count: the
# connected components of the graph joining two tokens whose cosine similarity is at least
# {glue:text}`cluster_threshold`, averaged over {glue:text}`cluster_sequences` sequences (512 for independent
# Gaussian tokens, 1 for tokens that all point the same way).

# %% tags=["hide-output"] mystnb={"figure": {"name": "fig-clustering", "caption": "Closeness to Gaussian and clustering on one depth axis, pure mode: top, the largest ratio of an upper end of the effect size to the Student-t reference's lower end (close below 1; dashed grey: the random initialisation, when run); middle, the histogram of pairwise cosine similarities of the tokens of a sequence per layer (white: the mean); bottom, the number of clusters."}, "image": {"alt": "Three columns of three panels against relative depth: a closeness ratio, a heat map of cosine similarities and a cluster count, for MiniLM and the two models trained here."}}
here = pretrained.TRAINED_HERE
titles = {"MiniLM": "all-MiniLM-L6-v2 (pretrained)", "ViT": f"DeiT-tiny-configured ViT\n({here})",
          "ModernBERT": f"small ModernBERT\n({here})"}
pairs = {"MiniLM": (minilm, None), **{k: (t.model, t.initial if initialisations else None)
                                      for k, t in (("ViT", vit), ("ModernBERT", mlm))}}
clusters = pretrained.clustering_run(pairs, criterion, titles, sequences=cluster_sequences, tokens=tokens,
                                     seed=seeds["confirm"][0], threshold=cluster_threshold)
fig_clu = clusters.figure()

# %% [markdown]
# ## Claims
#
# MiniLM's registered verdict, as it came out (*not_reproduced* where a part of the registered test came out
# against the statement, *reproduces* where it came out as predicted), and the statement's two parts as
# separate claims. Every threshold is the criterion's own (a ratio below or above 1), fixed before the run.

# %% tags=["hide-input"]
small, large = confirm_sequences
mini, half = studies["MiniLM"], profile.profiles["MiniLM"][small].half
MINI = pretrained.model_scope(minilm, "model code", "all-MiniLM-L6-v2")
RULE = dict(MINI, family="MiniLM's registered two-size confirmation")
TRAINED = {"ViT": pretrained.model_scope(vit.model, "trained model", "DeiT-tiny-configured ViT trained here"),
           "ModernBERT": pretrained.model_scope(mlm.model, "trained model", "small ModernBERT trained here")}
LABEL = {"MiniLM": "MiniLM (pretrained)", "ViT": f"ViT ({here})", "ModernBERT": f"ModernBERT ({here})"}
STATEMENT = {"MiniLM": "pretrained_gaussian", "ViT": "trained_here_architectures",
             "ModernBERT": "trained_here_architectures"}
SCOPE = {"MiniLM": MINI, **TRAINED}

# MiniLM, the registered verdict: holds at S = 32, not close at block 3 at S = 8, so the confirmation fails
claim(f"MiniLM (pretrained): not reproduced by the confirmatory run, whose two sizes give different "
      f"verdicts (S = {small}: {mini.verdict(small).verdict}; S = {large}: {mini.verdict(large).verdict})",
      mini.verdict(small).verdict is not mini.verdict(large).verdict, statement="pretrained_gaussian",
      kind="not_reproduced", scope=RULE, sides=mini.sides(small, large))
# the statement's first part: close through the early and intermediate blocks
claim(f"MiniLM (pretrained), S = {small}: not close at some block 1-{half} (largest upper end over "
      "the reference's lower end, both modes)", mini.verdict(small).early_ratio, gt=1.0,
      statement="pretrained_gaussian", kind="not_reproduced", scope=RULE, sides=mini.sides(small))
claim(f"MiniLM (pretrained), S = {large}: close at every block 1-{half} in both modes (largest upper "
      "end over the reference's lower end)", mini.verdict(large).early_ratio, lt=1.0,
      statement="pretrained_gaussian", kind="reproduces", scope=MINI, sides=mini.sides(large))
# the statement's second part: the departure grows with depth
for S in confirm_sequences:
    claim(f"MiniLM (pretrained), S = {S}: the last block is not close in either mode (smallest over the "
          "modes of the largest ratio)", mini.verdict(S).last_ratio, gt=1.0, statement="pretrained_gaussian",
          kind="reproduces", scope=MINI, sides=mini.sides(S))
    claim(f"MiniLM (pretrained), S = {S}: the departure grows with depth: the last block's largest fraction of "
          f"the reference, lower end, over block {half}'s, upper end", profile.profiles["MiniLM"][S].growth,
          gt=1.0, statement="pretrained_gaussian", kind="reproduces", scope=MINI, sides=mini.sides(S))

# %% [markdown]
# The checks behind them (expand the output): on the models trained here, whose blocks barely move their
# tokens, the verdict's parts are *consistency* checks (they could not have come out otherwise), beside two
# power *controls* on how far those blocks move the tokens; and, on every model, the criterion's own power
# (*controls*) and calibration (*instrument*).

# %% tags=["hide-input", "hide-output"]
claim("ViT trained here: held-out digits accuracy above chance", vit.record.final, gt=vit.record.baseline,
      statement="trained_here_architectures", kind="consistency", scope=TRAINED["ViT"])
claim("ModernBERT trained here: held-out masked-character loss (nats) below the unigram model's",
      mlm.record.final, lt=mlm.record.baseline, statement="trained_here_architectures", kind="consistency",
      scope=TRAINED["ModernBERT"])

# the two architectures trained here: their blocks barely move the tokens, so they cannot test the statement
for key in ("ViT", "ModernBERT"):
    st, h = studies[key], profile.profiles[key][small].half
    claim(f"control (power), {LABEL[key]}: every block moves its tokens less than MiniLM's least-moving block "
          "(largest mean update |x_out - x_in| / |x_in| over MiniLM's smallest)",
          updates[key].largest / updates["MiniLM"].smallest, lt=1.0, statement=STATEMENT[key], kind="control",
          scope=SCOPE[key])
    for S in confirm_sequences:
        claim(f"{LABEL[key]}, S = {S}: close at every block 1-{h} in both modes (largest ratio)",
              st.verdict(S).early_ratio, lt=1.0, statement=STATEMENT[key], kind="consistency", scope=SCOPE[key])
        claim(f"{LABEL[key]}, S = {S}: the last block is still close in both modes (largest ratio at the last "
              "block, larger mode)", max(float(criterion.worst_ratio(key, S, m)[-1]) for m in st.effects[S]),
              lt=1.0, statement=STATEMENT[key], kind="consistency", scope=SCOPE[key])
    claim(f"{LABEL[key]}: the same verdict at S = {small} and S = {large}",
          st.verdict(small).verdict is st.verdict(large).verdict, statement=STATEMENT[key], kind="consistency",
          scope=SCOPE[key])

for key, st in studies.items():
    claim(f"{LABEL[key]}: effect-size intervals at S = {small} and S = {large} that do not overlap "
          "(every block, mode and statistic)", sum(len(d) for d in st.disagreements().values()),
          lt=0.5, statement=None, kind="instrument", scope="instrument")
    for S in confirm_sequences:
        claim(f"control, {LABEL[key]}, S = {S}: the Student-t (nu = 20) reference's departure is resolved "
              "(smallest lower end of its effect sizes)", st.reference_low(S), gt=0.0, statement=STATEMENT[key],
              kind="control", scope="instrument")
        claim(f"control, {LABEL[key]}, S = {S}: an independent Student-t (nu = 20) sample is not close "
              "(largest upper end over the reference's lower end)", st.control_ratio(S), gt=1.0,
              statement=STATEMENT[key], kind="control", scope="instrument")
        claim(f"{LABEL[key]}, S = {S}: the Gaussian input (pure mode, layer 0) is close (largest upper end "
              "over the reference's lower end)", st.gaussian_ratio(S), lt=1.0, statement=None,
              kind="instrument", scope="instrument")

# %% tags=["hide-input"]
for name, t in (("vit", vit), ("mlm", mlm)):
    glue(f"{name}_metric", t.record.final)
    glue(f"{name}_baseline", t.record.baseline)
    glue(f"{name}_steps", int(t.record.steps[-1]))
for S in confirm_sequences:
    p, v = profile.profiles["MiniLM"][S], mini.verdict(S)
    for block, name in ((1, "b1"), (half, "bh"), (mini.n_blocks, "bl")):
        a, b = p.point_range(block)
        glue(f"mini_{name}_{S}", f"{a:.2f}–{b:.2f}")
    glue(f"mini_verdict_{S}", str(v.verdict))
    glue(f"mini_early_{S}", v.early_ratio)
    glue(f"mini_early_low_{S}", p.early_low)
    glue(f"mini_growth_{S}", p.growth)
    glue(f"mini_last_{S}", v.last_ratio)
glue("mini_half", half)
glue("mini_L", mini.n_blocks)
glue("mini_reading", profile.reading("MiniLM"))
lay0 = mini.effects[small]["pure"]
ratios0 = [lay0.effects[0].se[s] / lay0.nulls[int(lay0.null_rank[0])].sd_sq[s] for s in lay0.effects[0].se]
glue("gauss_se_ratio", f"{min(ratios0):.1f}–{max(ratios0):.1f}")
pct = {k: f"{100 * u.smallest:.2g}–{100 * u.largest:.2g} %" for k, u in updates.items()}
glue("trained_update", f"{pct['ViT']} (ViT) and {pct['ModernBERT']} (ModernBERT)")
glue("mini_update", pct["MiniLM"])
glue("init_update", f"{pct['ViT (init.)']} (ViT) and {pct['ModernBERT (init.)']} (ModernBERT)")
for key, short in (("ViT", "vit"), ("ModernBERT", "mlm")):
    glue(f"{short}_L", studies[key].n_blocks)
    glue(f"{short}_frac_max", max(float(profile.profiles[key][S].largest()[0][1:].max()) for S in confirm_sequences))
    glue(f"{short}_verdict", str(studies[key].verdict(small).verdict))
glue("cluster_sequences", cluster_sequences)
glue("cluster_threshold", cluster_threshold)
glue("mini_cos_max", clusters.largest_mean_cosine("MiniLM"))
glue("clusters_min", clusters.fewest_clusters)
glue("disagreements", criterion.disagreements())
glue("sizes_swept", ", ".join(map(str, by_size.sizes)))
glue("band_blocks", ", ".join(map(str, by_size.band_blocks["pure"])))
glue("effect_blocks", ", ".join(map(str, by_size.effect_blocks["pure"])))
for alt in pretrained.SENSITIVITY_NU:
    glue(f"sens_{alt:g}", "; ".join(f"S = {S}: {mini.verdict(S, alt).verdict}" for S in confirm_sequences)
         if sensitivity else "not computed in this profile")
glue("init_verdicts", "; ".join(f"{k}: {st.verdict(small).verdict}" for k, st in initial.items())
     if initial else "not run in this profile")

# %% [markdown]
# ## What we saw
#
# *MiniLM (pretrained, real weights).* The departure from Gaussian grows with depth at both sizes
# ({numref}`fig-profile`): as fractions of the reference's (over statistics and modes), blocks 1,
# {glue:text}`mini_half` and {glue:text}`mini_L` lie at {glue:text}`mini_b1_32`, {glue:text}`mini_bh_32` and
# {glue:text}`mini_bl_32` with 32 sequences, and at {glue:text}`mini_b1_8`, {glue:text}`mini_bh_8` and
# {glue:text}`mini_bl_8` with 8. The point estimates barely move between the sizes ({glue:text}`disagreements`
# interval pairs of the two sizes fail to overlap, over the three models); the intervals do. With 32 sequences
# the registered criterion says the statement holds (largest early ratio {glue:text}`mini_early_32:.2f`, last
# block {glue:text}`mini_last_32:.1f`). With 8 it says "{glue:text}`mini_verdict_8`": the largest upper end over
# blocks 1 to {glue:text}`mini_half` reaches {glue:text}`mini_early_8:.2f` of the reference's lower end, while no
# early block is resolved as far from Gaussian as the reference (largest lower end
# {glue:text}`mini_early_low_8:.2f`): an interval too wide to decide, not a departure. These intervals are
# conservative, most of all with 8 sequences (for the Gaussian input the bootstrap standard error is
# {glue:text}`gauss_se_ratio` times the spread over Gaussian samples). The registered confirmation needs one
# verdict at both sizes, so it does not confirm the statement; part by part, the profile reads
# {glue:text}`mini_reading`. The growth is resolved at both sizes: the last block's lower end is
# {glue:text}`mini_growth_8:.1f` (S = 8) and {glue:text}`mini_growth_32:.1f` (S = 32) times block
# {glue:text}`mini_half`'s upper end.
#
# *The two architectures trained here* (not the paper's pretrained checkpoints). They learned their tasks
# ({numref}`fig-training`), but each block moves its tokens by only {glue:text}`trained_update` of their norm,
# against {glue:text}`mini_update` for MiniLM (random initialisations: {glue:text}`init_update`). Networks
# whose blocks are this close to the identity act almost linearly on their tokens and keep a Gaussian cloud
# close to Gaussian at every block whatever the statement says: effect sizes at most
# {glue:text}`vit_frac_max:.2f` (ViT, {glue:text}`vit_L` blocks) and {glue:text}`mlm_frac_max:.2f` (ModernBERT,
# {glue:text}`mlm_L` blocks) of the reference's. The registered verdict on them is "{glue:text}`vit_verdict`"
# (ViT) and "{glue:text}`mlm_verdict`" (ModernBERT): they could not fail the statement's first part and
# could not pass its second, so these models test nothing about it (random initialisations:
# {glue:text}`init_verdicts`).
#
# *Sensitivity* (not claimed). With the heavier reference $\nu = 10$, MiniLM's verdicts are
# {glue:text}`sens_10`; with the lighter $\nu = 50$, {glue:text}`sens_50`. The verdict is a comparison with
# a chosen reference; the profile shows where each block lies relative to it.
#
# *The two criteria across sizes* ({numref}`fig-criteria-sizes`). For $S$ = {glue:text}`sizes_swept`, the
# noise-band criterion fails first at blocks {glue:text}`band_blocks` (pure mode): it rejects exact
# Gaussianity from block 1 at every size tried. The effect-size criterion fails first at blocks
# {glue:text}`effect_blocks`: showing that a layer is *closer* than the reference needs intervals narrower
# than the gap, which few sequences do not give.
#
# *Clustering* ({numref}`fig-clustering`). No model clusters: at cosine similarity
# {glue:text}`cluster_threshold` the fewest clusters at any layer is {glue:text}`clusters_min:.0f` of 512
# tokens. MiniLM's tokens align partly with depth (mean cosine similarity up to
# {glue:text}`mini_cos_max:.2f`); the trained-here models' stay near orthogonal.
#
# What this chapter cannot say: the paper's statement concerns its pretrained ModernBERT and Tiny-DeiT,
# whose weights are not on the machines that build this book; one pretrained model and two small models
# trained here say nothing about them.
#
# ## How these checks were designed
#
# ````{dropdown} Registration, revisions, seeds and what each claim records
# **Registration.** The criterion above was fixed and written down before any of the runs on this page, and is
# implemented as written. An earlier version of this chapter asked whether each layer's token cloud is
# *exactly* Gaussian (inside the noise band of a true Gaussian sample of the same size); that verdict moves
# with the sample size, since with more tokens any non-Gaussian law leaves its band, so it was replaced by
# the effect-size criterion (the old one is kept for comparison in {numref}`fig-criteria-sizes`). The
# expectation stated with the criterion, that the band verdict would move with $S$ and the effect-size
# verdict would not, is the opposite of what the run showed.
#
# **Readings the implementation had to make**, fixed before any model was run (the docstring of
# {py:mod}`gtbook.studies.pretrained.effects` has the details): the two kurtosis effect sizes are
# **magnitudes** $|\,s - \mathbb{E}_{\rm null}s\,|$ (a light-tailed departure is a departure too); the
# interval is $\theta \pm t_{S-1,0.975}\,\mathrm{se}$ on the debiased scale with the bootstrap standard error
# over $B$ resamples of the $S$ sequences, each resample debiased by Gaussian samples resampled with the same
# multiplicities (a resample repeats sequences, and in dimension 383 repeated points move these statistics far
# more than sampling does: without that, an exact Gaussian sample would not even count as close at $S = 8$);
# "the last block is not close" is required in each mode; "agree within their intervals" means that the two
# 95% intervals of every block, mode and statistic overlap. The interval's coverage was measured on synthetic
# data first: 91–97% with attention-coupled tokens, but only 74–82% when sequences differ strongly in scale.
#
# **Seeds.** Everything claimed is computed on seeds never used before in this repository (checked with
# `git grep` and `git log -S` over the whole history): $S = 8$ sequences with seed 8231, $S = 32$ with seed
# 32771; the sweep over $S$ adds $S = 4$, seed 4127, and, in the full profile, $S = 16$, seed 16453; training
# uses seed 2311. The quick profile trains the two models for fewer steps (another cache entry) and skips the
# reported-only extras (the random initialisations' criterion, the sensitivity references, $S = 16$).
#
# **What changed after the first confirmatory run, and why.** The registered verdict's claims keep their
# values and thresholds. Added afterwards, knowing the earlier run's numbers: the effect-size profile and its
# three-way readings (rules in {py:mod}`gtbook.studies.pretrained.profile`), the two "the departure grows"
# claims on MiniLM (threshold 1, the criterion's), and the update norms with their two power controls
# (threshold: MiniLM's smallest per-block update, not chosen from the trained-here values). Relabelled, with
# the same values: on the models trained here, "close at every early block" was a *reproduces* claim and "the
# last block is still close" a *not_reproduced* claim; both are now *consistency* checks, because blocks that
# move their tokens by a few per cent cannot fail the first part nor pass the second (the earlier name of the
# second began "not reproduced, ..."). The Gaussian input being called close and the agreement of the two
# sizes' intervals were *consistency* claims; they check the criterion's own calibration and are now
# *instrument* claims. No second confirmatory run was made: one, with $S$ fixed by a power calculation from
# the $S = 8$ and $S = 32$ pilot and fresh seeds, would have to be written here before it runs.
#
# **Traced sides.** Each of MiniLM's claims records the library functions its two sides ran: the observed side is
# the model's forward pass on the Gaussian tokens ({py:func}`gtcore.models.iter_layers`); the predicted side is
# what the criterion compares it with, the nulls (true Gaussian samples and the statistics on them) and the
# Student-$t$ reference's effect sizes, each recorded when it was computed (a null or a reference read back from
# the disk cache carries the record of the run that computed it). The statistics of the model's layers are the
# comparison and count on neither side. The book refuses a claim of these kinds whose two sides share model
# code; none of this chapter's do.
# ````
