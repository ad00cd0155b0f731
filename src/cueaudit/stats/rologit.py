"""Rank-ordered (exploded) logit with ties and bundle-clustered standard errors.

Each bundle is one ranking of its rows (candidates); ``rank`` 1 is best and equal ranks are
ties. With worth ``w_i = exp(x_i' beta)``, a strict ranking has the Plackett-Luce probability
``prod_s w_(s) / sum_{j ranked s or worse} w_j``. Tie groups are taken in rank order; for a
group G, "Rest" is every candidate ranked strictly worse. Three likelihoods for a tie:

- ``"exact"`` (exact-marginal; Stata ``rologit, ties(exactm)``): the order within a tie is
  unknown, so its probability is the sum of the Plackett-Luce probabilities of every strict
  order consistent with it (at most 4! = 24 for four candidates), each term on the log scale.
  A group with nothing ranked below it (the bottom group; a fully tied bundle) has
  probability 1 and contributes nothing.
- ``"breslow"``: ``sum_{i in G} x_i' beta - |G| log sum_{G and Rest} w``.
- ``"efron"``: ``sum_{i in G} x_i' beta - sum_{l<|G|} log(sum_Rest w + (1 - l/|G|) sum_G w)``.

For ``"breslow"`` and ``"efron"`` the bottom group is censored by default
(``censor_bottom=True``): the approximations would otherwise add a spurious negative term for
every tied bottom group, counting fully tied bundles as evidence. Exact correspondence
(validated in tests/unit/test_stats_rologit.py): these modes are statsmodels
``PHReg(time=rank, status, strata=bundle, ties=...)`` and R
``coxph(Surv(rank, status) ~ x + strata(bundle), ties=...)`` with ``status = 0`` for the rows
of each bundle's bottom group (``status = 1`` everywhere with ``censor_bottom=False``). Rank
as time makes each risk set the candidates not yet placed, so strata = bundle suffices; the
exploded ``ConditionalLogit`` needs one group per bundle x stage instead. With no ties the
three modes coincide.

Standard errors: ``se_model`` from the inverse observed information; ``se_cluster`` is the CR1
sandwich ``G/(G-1) H^-1 (sum_c s_c s_c') H^-1`` with ``s_c`` the exact score of cluster c
(summed over its bundles; clusters default to the bundles) and G the number of clusters with
at least one informative bundle. R's ``coxph(..., cluster=)`` reports the same sandwich
without ``G/(G-1)``; statsmodels ``PHReg.fit(groups=)`` too, but its score residuals are
Breslow's even under Efron ties. The fit is Newton-Raphson with analytic gradient and Hessian
and step halving.

What the data cannot identify is refused with an ``InputError`` naming the regressor rather
than given a number: a regressor without variation inside any informative bundle (the
likelihood does not depend on it, and its "clustered SE" would be pure rounding), regressors
that are collinear within the bundles, and complete separation (the rankings are ordered
exactly by a combination of the regressors, so the likelihood rises towards 1 as that
combination's coefficients grow without bound: Newton does not converge and the log-likelihood
ends within 1e-6 of 0 or the coefficients beyond ``SEPARATION_BOUND``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from cueaudit.errors import InputError

Ties = Literal["exact", "breslow", "efron"]
TIES: tuple[str, ...] = ("exact", "breslow", "efron")
MAX_EXACT_TIE = 6  # 6! = 720 orders: beyond this the enumeration is refused
SEPARATION_BOUND = 20.0  # a log-worth difference of e^20: no ranking data identifies that


@dataclass(frozen=True)
class RankLogitResult:
    names: list[str]
    coef: np.ndarray
    se_model: np.ndarray
    se_cluster: np.ndarray
    cov_model: np.ndarray
    cov_cluster: np.ndarray
    loglik: float
    n_bundles: int
    n_informative: int  # bundles that contribute a likelihood term
    n_clusters: int  # clusters with at least one informative bundle
    ties: str
    converged: bool
    n_iter: int


@dataclass(frozen=True)
class _Terms:
    """Every factor ``w_chosen / sum_j mask_j w_j`` of the likelihood, as flat arrays.

    Terms are sorted by order (a strict order consistent with a tie group; one per group
    except under exact-marginal ties) and orders by group, so each is a contiguous segment.
    """

    rows: np.ndarray  # (n_bundles, width) row index of each sorted position, -1 for padding
    bundle: np.ndarray  # (T,) bundle of each term
    chosen: np.ndarray  # (T,) sorted position of the chosen candidate
    mask: np.ndarray  # (T, width) weight of each position in the denominator
    order_start: np.ndarray  # first term of each order
    order_group: np.ndarray  # group of each order
    group_start: np.ndarray  # first order of each group
    group_bundle: np.ndarray  # bundle of each group


Stage = tuple[int, np.ndarray]  # (chosen position, denominator weights over positions)


def _template(sizes: tuple[int, ...], ties: str, censor_bottom: bool) -> list[list[list[Stage]]]:
    """Terms of one tie pattern: per group, per order, its list of stages."""
    width = sum(sizes)
    groups: list[list[list[Stage]]] = []
    start = 0
    for t, size in enumerate(sizes):
        members = list(range(start, start + size))
        rest = np.zeros(width)
        rest[start + size :] = 1.0
        start += size
        bottom = t == len(sizes) - 1
        if bottom and (ties == "exact" or censor_bottom or size == 1):
            continue
        orders: list[list[Stage]] = []
        if ties == "exact":
            for perm in itertools.permutations(members):
                stages: list[Stage] = []
                for s, item in enumerate(perm):
                    mask = rest.copy()
                    mask[list(perm[s:])] = 1.0
                    stages.append((item, mask))
                orders.append(stages)
        elif ties == "breslow":
            mask = rest.copy()
            mask[members] = 1.0
            orders.append([(item, mask) for item in members])
        else:
            stages = []  # Efron: the l-th of |G| events removes l/|G| of the group
            for step, item in enumerate(members):
                mask = rest.copy()
                mask[members] = 1.0 - step / size
                stages.append((item, mask))
            orders.append(stages)
        groups.append(orders)
    return groups


def _terms(bundle_codes: np.ndarray, rank: np.ndarray, ties: str, censor_bottom: bool) -> _Terms:
    order = np.lexsort((rank, bundle_codes))
    b_sorted, r_sorted = bundle_codes[order], rank[order]
    n_bundles = int(bundle_codes.max()) + 1
    counts = np.bincount(bundle_codes, minlength=n_bundles)
    width = int(counts.max())
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    pos = np.arange(len(order)) - first[b_sorted]
    rows = np.full((n_bundles, width), -1, dtype=np.int64)
    rows[b_sorted, pos] = order
    # a new tie group starts wherever the rank changes within a bundle
    new_group = np.ones(len(order), dtype=bool)
    new_group[1:] = (b_sorted[1:] != b_sorted[:-1]) | (r_sorted[1:] != r_sorted[:-1])
    group_id = np.cumsum(new_group) - 1
    group_size = np.bincount(group_id)
    group_owner = b_sorted[new_group]
    patterns: dict[tuple[int, ...], list[int]] = {}
    split = np.split(group_size, np.cumsum(np.bincount(group_owner, minlength=n_bundles))[:-1])
    for b, group_sizes in enumerate(split):
        patterns.setdefault(tuple(int(s) for s in group_sizes), []).append(b)

    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("bundle", "chosen", "mask", "order")}
    order_group: list[np.ndarray] = []
    group_bundle: list[np.ndarray] = []
    n_orders = n_groups = 0
    for sizes, members in sorted(patterns.items()):
        if ties == "exact" and max(sizes[:-1], default=0) > MAX_EXACT_TIE:
            raise InputError("rank-ordered logit", f"a tie of more than {MAX_EXACT_TIE}", "rank")
        template = _template(sizes, ties, censor_bottom)
        if not template:
            continue
        chosen: list[int] = []
        masks: list[np.ndarray] = []
        t_order: list[int] = []
        o_group: list[int] = []
        for g, orders in enumerate(template):
            for stages in orders:
                for item, mask in stages:
                    chosen.append(item)
                    masks.append(np.pad(mask, (0, width - len(mask))))
                    t_order.append(len(o_group))
                o_group.append(g)
        bs = np.asarray(members, dtype=np.int64)
        per_orders, per_groups = len(o_group), len(template)
        parts["bundle"].append(np.repeat(bs, len(chosen)))
        parts["chosen"].append(np.tile(chosen, len(bs)))
        parts["mask"].append(np.tile(np.asarray(masks), (len(bs), 1)))
        offsets = n_orders + per_orders * np.arange(len(bs))
        parts["order"].append((np.asarray(t_order)[None, :] + offsets[:, None]).ravel())
        g_offsets = n_groups + per_groups * np.arange(len(bs))
        order_group.append((np.asarray(o_group)[None, :] + g_offsets[:, None]).ravel())
        group_bundle.append(np.repeat(bs, per_groups))
        n_orders += per_orders * len(bs)
        n_groups += per_groups * len(bs)
    if n_orders == 0:
        raise InputError("rank-ordered logit", "no bundle carries information", "rank")
    term_order = np.concatenate(parts["order"])
    sort = np.argsort(term_order, kind="stable")
    o_group_all = np.concatenate(order_group)
    return _Terms(
        rows=rows,
        bundle=np.concatenate(parts["bundle"])[sort],
        chosen=np.concatenate(parts["chosen"])[sort],
        mask=np.concatenate(parts["mask"])[sort],
        order_start=np.searchsorted(term_order[sort], np.arange(n_orders)),
        order_group=o_group_all,
        group_start=np.searchsorted(o_group_all, np.arange(n_groups)),
        group_bundle=np.concatenate(group_bundle),
    )


def _evaluate(
    terms: _Terms, xp: np.ndarray, beta: np.ndarray
) -> tuple[float, np.ndarray, np.ndarray]:
    """Log-likelihood, per-bundle scores (n_bundles, k) and Hessian at ``beta``.

    ``xp`` is the padded design (n_bundles, width, k) in sorted positions.
    """
    n_bundles, width, k = xp.shape
    eta = xp @ beta
    eta = np.where(terms.rows >= 0, eta, -np.inf)
    eta = eta - eta.max(axis=1, keepdims=True)
    e_t = eta[terms.bundle]  # (T, width)
    with np.errstate(divide="ignore"):
        logit = e_t + np.log(terms.mask)
    top = logit.max(axis=1, keepdims=True)
    prob = np.exp(logit - top)
    total = prob.sum(axis=1, keepdims=True)
    prob /= total
    log_denominator = top[:, 0] + np.log(total[:, 0])
    term_ll = e_t[np.arange(len(e_t)), terms.chosen] - log_denominator

    x_t = xp[terms.bundle]  # (T, width, k)
    xbar = np.einsum("tj,tjk->tk", prob, x_t)
    term_grad = x_t[np.arange(len(e_t)), terms.chosen] - xbar

    order_ll = np.add.reduceat(term_ll, terms.order_start)
    order_grad = np.add.reduceat(term_grad, terms.order_start, axis=0)
    group_ll = _segment_logsumexp(order_ll, terms.group_start)
    order_p = np.exp(order_ll - group_ll[terms.order_group])
    group_grad = np.add.reduceat(order_p[:, None] * order_grad, terms.group_start, axis=0)
    scores = np.zeros((n_bundles, k))
    np.add.at(scores, terms.group_bundle, group_grad)

    # Hessian: sum_G [-sum_o p_o sum_s Cov_s + sum_o p_o g_o g_o' - g_G g_G']
    term_p = np.repeat(order_p, np.diff(np.append(terms.order_start, len(term_ll))))
    weight = term_p[:, None] * prob  # (T, width)
    cell = np.zeros((n_bundles, width))
    np.add.at(cell, terms.bundle, weight)
    flat = xp.reshape(-1, k)
    second = flat.T @ (cell.reshape(-1)[:, None] * flat)
    second -= xbar.T @ (term_p[:, None] * xbar)
    hess = -second + order_grad.T @ (order_p[:, None] * order_grad) - group_grad.T @ group_grad
    return float(group_ll.sum()), scores, hess


def _segment_logsumexp(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    top = np.maximum.reduceat(values, starts)
    owner = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(values))))
    return top + np.log(np.add.reduceat(np.exp(values - top[owner]), starts))


def _newton_step(hess: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """Newton step for a maximum; shifted towards gradient ascent where -H is not positive."""
    info = -hess
    lowest = float(np.linalg.eigvalsh(info)[0])
    if lowest <= 1e-12 * max(1.0, float(np.abs(info).max())):
        info = info + (abs(lowest) + 1e-6 * max(1.0, float(np.abs(info).max()))) * np.eye(len(grad))
    return np.linalg.solve(info, grad)


def fit_rologit(
    x: np.ndarray,
    bundle: np.ndarray,
    rank: np.ndarray,
    ties: Ties = "exact",
    *,
    cluster: np.ndarray | None = None,
    names: Sequence[str] | None = None,
    censor_bottom: bool = True,
    start: np.ndarray | None = None,
    max_iter: int = 100,
    tol: float = 1e-10,
) -> RankLogitResult:
    """Fit the rank-ordered logit of ``rank`` (1 = best, ties as equal ranks) on ``x``.

    ``bundle`` labels the ranking each row belongs to; ``cluster`` (default: the bundle) labels
    the clusters of the sandwich and must be constant within a bundle. Ranks need only be
    ordered: 1, 1, 3, 4 and 1, 1, 2, 3 are the same ranking. Newton starts at ``start``
    (default 0; with ``max_iter=0`` the result holds the log-likelihood and scores there) and
    stops when the largest full Newton step is below ``tol``.
    """
    if ties not in TIES:
        raise InputError("rank-ordered logit", f"ties must be one of {TIES}, not {ties!r}")
    rank = np.asarray(rank)
    n = len(rank)
    x = np.asarray(x, dtype=np.float64).reshape(n, -1)
    k = x.shape[1]
    names = [f"x{j}" for j in range(k)] if names is None else list(names)
    if len(names) != k:
        raise InputError("rank-ordered logit", f"{k} regressors but {len(names)} names")
    bundle = np.asarray(bundle)
    if n == 0 or bundle.shape != (n,):
        raise InputError("rank-ordered logit", "bundle and rank need one value per row")
    if not (np.isfinite(x).all() and np.isfinite(rank.astype(np.float64)).all()):
        raise InputError("rank-ordered logit", "non-finite regressor or rank")
    _, b = np.unique(bundle, return_inverse=True)
    terms = _terms(b.astype(np.int64), rank, ties, censor_bottom)
    if cluster is None:
        c_of_bundle = np.arange(terms.rows.shape[0])
    else:
        cluster = np.asarray(cluster)
        if cluster.shape != (n,):
            raise InputError("rank-ordered logit", "cluster needs one value per row", "cluster")
        _, c = np.unique(cluster, return_inverse=True)
        c_of_bundle = np.full(terms.rows.shape[0], -1)
        c_of_bundle[b] = c
        if np.any(c_of_bundle[b] != c):
            raise InputError("rank-ordered logit", "a bundle spans clusters", "cluster")
    xp = np.where(terms.rows[:, :, None] >= 0, x[terms.rows], 0.0)
    _check_within(xp, terms, names)

    beta = np.zeros(k) if start is None else np.asarray(start, dtype=np.float64).reshape(k)
    ll, scores, hess = _evaluate(terms, xp, beta)
    converged, it = False, 0
    while it < max_iter:
        it += 1
        step = _newton_step(hess, scores.sum(axis=0))
        if np.max(np.abs(step)) < tol:
            converged = True
            break
        for _ in range(60):
            new_ll, new_scores, new_hess = _evaluate(terms, xp, beta + step)
            if new_ll >= ll:
                break
            step /= 2.0
        else:
            break  # no step improves: beta is a maximum to machine precision or the fit failed
        beta = beta + step
        stalled = new_ll - ll <= 1e-12 * max(1.0, abs(ll))
        ll, scores, hess = new_ll, new_scores, new_hess
        if stalled and np.max(np.abs(beta)) > SEPARATION_BOUND:
            # separated rankings: a coefficient diverges while the likelihood stops moving;
            # the remaining iterations would each halve the step some 20 times for nothing
            break

    if max_iter > 0 and not converged and (ll > -1e-6 or np.max(np.abs(beta)) > SEPARATION_BOUND):
        worst = names[int(np.argmax(np.abs(beta)))]
        raise InputError(
            "rank-ordered logit",
            f"complete separation: the rankings are ordered exactly by the regressors "
            f"(log-likelihood {ll:.3g}, coefficient {np.max(np.abs(beta)):.3g} after {it} "
            "iterations), so the coefficients have no finite estimate",
            worst,
        )
    cov_model = np.linalg.inv(-hess)
    informative = np.zeros(terms.rows.shape[0], dtype=bool)
    informative[terms.group_bundle] = True
    used = c_of_bundle[informative]
    n_clusters = len(np.unique(used))
    cluster_scores = np.zeros((int(c_of_bundle.max()) + 1, k))
    np.add.at(cluster_scores, c_of_bundle, scores)
    meat = cluster_scores.T @ cluster_scores
    factor = n_clusters / (n_clusters - 1) if n_clusters > 1 else np.nan
    cov_cluster = factor * cov_model @ meat @ cov_model
    return RankLogitResult(
        names=names,
        coef=beta,
        se_model=np.sqrt(np.diag(cov_model)),
        se_cluster=np.sqrt(np.diag(cov_cluster)),
        cov_model=cov_model,
        cov_cluster=cov_cluster,
        loglik=ll,
        n_bundles=int(terms.rows.shape[0]),
        n_informative=int(informative.sum()),
        n_clusters=n_clusters,
        ties=ties,
        converged=converged,
        n_iter=it,
    )


def _check_within(xp: np.ndarray, terms: _Terms, names: Sequence[str]) -> None:
    """Refuse regressors the likelihood cannot see: constant inside every informative bundle,
    or collinear with the others inside the bundles."""
    informative = np.zeros(xp.shape[0], dtype=bool)
    informative[terms.group_bundle] = True
    present = terms.rows[informative] >= 0
    rows = xp[informative]
    counts = present.sum(axis=1, keepdims=True)
    means = rows.sum(axis=1) / counts
    within = np.where(present[:, :, None], rows - means[:, None, :], 0.0).reshape(-1, xp.shape[2])
    scale = np.sqrt((within**2).sum(axis=0))
    for j, name in enumerate(names):
        if scale[j] <= 1e-12 * max(1.0, float(np.abs(rows[..., j]).max(initial=0.0))):
            raise InputError(
                "rank-ordered logit",
                "no variation inside any informative ranking: the likelihood does not depend on "
                "it, so it has no estimate",
                name,
            )
    normed = within / scale
    singular = np.linalg.svd(normed, compute_uv=False)
    if singular[-1] < 1e-9 * singular[0]:
        _, _, vt = np.linalg.svd(normed, full_matrices=False)
        involved = [names[j] for j in np.flatnonzero(np.abs(vt[-1]) > 1e-6)]
        raise InputError(
            "rank-ordered logit",
            f"regressors collinear inside the rankings: {', '.join(involved)}",
            involved[0],
        )


def expected_rank_gain(delta: float, n_items: int) -> float:
    """Positions gained by a candidate whose log-worth exceeds its n_items - 1 equal rivals'.

    Under Plackett-Luce with worth ``a = exp(delta)`` against rivals of worth 1, the candidate
    is first with probability ``a / (a + n - 1)``, and placed at stage s given not yet placed
    with probability ``a / (a + n - s)``. Returns ``(n + 1) / 2 - E[rank]``: positive is better,
    in the units of a rank-position contrast.
    """
    a = float(np.exp(delta))
    alive, expected = 1.0, 0.0
    for s in range(1, n_items + 1):
        p_here = a / (a + n_items - s)
        expected += s * alive * p_here
        alive *= 1.0 - p_here
    return (n_items + 1) / 2.0 - expected


def expected_rank_gain_se(delta: float, se: float, n_items: int) -> float:
    """Delta-method standard error of :func:`expected_rank_gain` (central difference)."""
    h = 1e-6 * max(1.0, abs(delta))
    slope = (expected_rank_gain(delta + h, n_items) - expected_rank_gain(delta - h, n_items)) / (
        2 * h
    )
    return abs(slope) * se
