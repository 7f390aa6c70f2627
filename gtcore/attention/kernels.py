r"""Blocked torch primitives of attention with a per-key bias (private; used by :mod:`gtcore.attention`).

Both primitives take queries :math:`q_i \in \mathbb{R}^k` (n, k), keys :math:`k_j \in \mathbb{R}^k`
(m, k) and a bias :math:`\beta_j` (m,) per key, i.e. the logits :math:`s_{ij} = q_i^\top k_j + \beta_j`:

* :func:`softmax_average`: :math:`\sum_j \operatorname{softmax}_j(s_{ij})\, v_j`;
* :func:`attend`: the same average and :math:`\log \sum_j e^{s_{ij}}`, in one pass.

Two methods, never materialising the n x m logits:

``"sdpa"``
    torch's fused ``scaled_dot_product_attention`` (scale 1) on augmented vectors
    :math:`\tilde q_i = (q_i, 1)`, :math:`\tilde k_j = (k_j, \beta_j)`, so that
    :math:`\tilde q_i^\top\tilde k_j = s_{ij}`; widths are zero-padded to one head size so that
    torch's blocked (flash) kernel applies. The log-sum-exp, which the public function does not
    return, comes from one extra key :math:`\tilde k_0 = (0, 0, 1)` met by
    :math:`\tilde q_i = (q_i, 1, c_i)` (logit :math:`c_i`, a guess of the result) with value
    :math:`e_0`, while the real keys carry :math:`(v_j, 1, 0)`: the output's last two slots are
    :math:`w_0 = e^{c_i}/Z_i` and :math:`1 - w_0 = \sum_j e^{s_{ij}}/Z_i`, each with relative
    precision, so :math:`\log\sum_j e^{s_{ij}} = c_i + \log((1-w_0)/w_0)`. Rows whose answer is
    far from the guess (an exponent near under/overflow) are recomputed by ``"blocked"``.
``"blocked"``
    ``block`` query rows at a time: memory :math:`O(m \cdot \mathrm{block})`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gtcore.attention.base import BLOCK, _check_method


def _pad(x: torch.Tensor, width: int) -> torch.Tensor:
    return F.pad(x, (0, width - x.shape[1])) if x.shape[1] < width else x


def softmax_average(
    q: torch.Tensor, k: torch.Tensor, bias: torch.Tensor, values: torch.Tensor, method: str = "sdpa", block: int = BLOCK
) -> torch.Tensor:
    r""":math:`\sum_j \operatorname{softmax}_j(q_i^\top k_j + \beta_j)\, v_j` for every query: (n, dv).

    Parameters
    ----------
    q : (n, k) tensor
        The queries :math:`q_i`.
    k : (m, k) tensor
        The keys :math:`k_j`.
    bias : (m,) tensor
        The per-key bias :math:`\beta_j`.
    values : (m, dv) tensor
        The values :math:`v_j`.
    method : ``"sdpa"`` or ``"blocked"``
        The fused kernel on augmented vectors, or ``block`` query rows at a time (see the module).
    block : int
        Query rows per block of ``"blocked"``.

    Returns
    -------
    (n, dv) tensor
        The average at each query.

    Raises
    ------
    ValueError
        An unknown ``method``.
    """
    _check_method(method)
    if method == "blocked":
        out = torch.empty(q.shape[0], values.shape[1], dtype=values.dtype, device=values.device)
        for s in range(0, q.shape[0], block):
            w = torch.softmax(q[s : s + block] @ k.T + bias, dim=1)
            out[s : s + block] = w @ values
        return out
    n, dv = q.shape[0], values.shape[1]
    width = max(q.shape[1] + 1, dv)
    qa = _pad(torch.cat([q, q.new_ones(n, 1)], 1), width)
    ka = _pad(torch.cat([k, bias[:, None]], 1), width)
    va = _pad(values, width)
    return F.scaled_dot_product_attention(qa[None, None], ka[None, None], va[None, None], scale=1.0)[0, 0, :, :dv]


def _attend_blocked(q, k, bias, values, block):
    lse = torch.empty(q.shape[0], dtype=q.dtype, device=q.device)
    avg = None if values is None else torch.empty(q.shape[0], values.shape[1], dtype=q.dtype, device=q.device)
    for s in range(0, q.shape[0], block):
        S = torch.addmm(bias, q[s : s + block], k.T)
        top = S.amax(dim=1, keepdim=True)
        top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
        E = S.sub_(top).exp_()  # one exponential per entry, in place
        total = E.sum(dim=1)
        lse[s : s + block] = top[:, 0] + torch.log(total)
        if avg is not None:  # avg is None exactly when values is
            avg[s : s + block] = (E @ values) / total[:, None]
    return avg, lse


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    bias: torch.Tensor,
    values: torch.Tensor | None = None,
    guess: torch.Tensor | None = None,
    method: str = "sdpa",
    block: int = BLOCK,
) -> tuple[torch.Tensor | None, torch.Tensor]:
    r"""``(average, lse)``: :math:`\sum_j \operatorname{softmax}_j(s_{ij})\,v_j` (None without ``values``) and
    :math:`\log\sum_j e^{s_{ij}}`, :math:`s_{ij} = q_i^\top k_j + \beta_j`, in one pass.

    Parameters
    ----------
    q : (n, k) tensor
        The queries :math:`q_i`.
    k : (m, k) tensor
        The keys :math:`k_j`.
    bias : (m,) tensor
        The per-key bias :math:`\beta_j`.
    values : (m, dv) tensor, optional
        The values :math:`v_j`; without them only the log-sum-exp is computed.
    guess : (n,) tensor, optional
        The dummy key's logit :math:`c_i` of the ``"sdpa"`` method (any value within a few hundred
        of the answer; by default the Cauchy--Schwarz bound :math:`\|q_i\|\max_j\|k_j\| + \max_j\beta_j`).
    method : ``"sdpa"`` or ``"blocked"``
        The fused kernel on augmented vectors, or ``block`` query rows at a time (see the module).
    block : int
        Query rows per block of ``"blocked"`` (and of the rows ``"sdpa"`` recomputes).

    Returns
    -------
    average : (n, dv) tensor or None
        The softmax average (None without ``values``).
    lse : (n,) tensor
        :math:`\log\sum_j e^{s_{ij}}`.

    Raises
    ------
    ValueError
        An unknown ``method``.
    """
    _check_method(method)
    if method == "blocked":
        return _attend_blocked(q, k, bias, values, block)
    n, m, dq = q.shape[0], k.shape[0], q.shape[1]
    dv = 0 if values is None else values.shape[1]
    if guess is None:
        guess = q.norm(dim=1) * k.norm(dim=1).max() + bias.max()
    width = max(dq, dv) + 2
    qa = _pad(torch.cat([q, q.new_ones(n, 1), guess[:, None]], 1), width)
    ka = torch.cat([_pad(torch.cat([k, bias[:, None]], 1), width), _unit(width, dq + 1, k)], 0)
    real = k.new_ones(m, 1) if values is None else torch.cat([values, k.new_ones(m, 1)], 1)
    va = torch.cat([_pad(real, width), _unit(width, dv + 1, k)], 0)
    o = F.scaled_dot_product_attention(qa[None, None], ka[None, None], va[None, None], scale=1.0)[0, 0]
    lse = guess + torch.log(o[:, dv] / o[:, dv + 1])
    avg = None if values is None else o[:, :dv] / o[:, dv : dv + 1]
    # exponents beyond this margin come near the floating-point range: recompute those rows exactly
    margin = 600.0 if q.dtype == torch.float64 else 60.0
    bad = ~torch.isfinite(lse) | ((lse - guess).abs() > margin)
    if bool(bad.any()):
        a, lse[bad] = _attend_blocked(q[bad], k, bias, values, block)
        if avg is not None:  # avg is None exactly when values is
            avg[bad] = a
    return avg, lse


def _unit(width: int, i: int, like: torch.Tensor) -> torch.Tensor:
    e = like.new_zeros(1, width)
    e[0, i] = 1.0
    return e
