"""Cluster-robust covariances of (generalised) least-squares coefficients: CR1 and the
bias-reduced CR2 with Satterthwaite degrees of freedom.

The coefficients are ``beta = M X' W y`` with ``M = (X' W X)^-1`` and ``W = Phi^-1`` for a
working covariance ``Phi = I + sum_k theta_k^2 Z_k Z_k'`` (random intercepts with relative SDs
``theta``: the REML fit of :func:`cueaudit.stats.mixed.fit_crossed_lmm`; no factors gives OLS).
``s_j = (W X)_j' e_j`` is cluster j's score (``e = y - X beta``), and

- **CR1** (Liang-Zeger with Stata's factor): ``c M (sum_j s_j s_j') M``,
  ``c = G/(G-1) (N-1)/(N-p)``;
- **CR2** (Bell & McCaffrey 2002; Pustejovsky & Tipton 2018): ``M (sum_j (W X)_j' A_j e_j
  e_j' A_j' (W X)_j) M`` with ``A_j = D_j' (D_j E_j D_j')^{-1/2} D_j``, ``Phi_jj = D_j' D_j``
  and ``E_j = Phi_jj - X_j M X_j'``, the expectation of ``e_j e_j'`` under the working model.
  So the variance estimate is unbiased when the working model is right and Phi is
  block-diagonal by cluster.

A contrast's **Satterthwaite degrees of freedom** (Pustejovsky & Tipton's, clubSandwich's
``coef_test(test = "Satterthwaite")``): the CR2 variance of ``c' beta`` is ``sum_j (g_j' y)^2``
with ``g_j = (I - H)_j' A_j' (W X)_j M c``; under the working model its mean is
``sum_j S_jj`` and its variance ``2 sum_ij S_ij^2`` for ``S_ij = g_i' Phi g_j``, so
``df = (tr S)^2 / ||S||_F^2``. With ``(I - H) Phi (I - H)' = Phi - X M X'``,
``S_ij = u_i' Phi_ij u_j - (X_i' u_i)' M (X_j' u_j)`` for ``u_j = A_j' (W X)_j M c``, computed
without any N x N matrix (Phi_ij for i != j comes from the shared random-effect levels).

Validated against R clubSandwich (``vcovCR(type = "CR2")``, ``coef_test(test =
"Satterthwaite")``) for ``lm`` and for ``lmer`` with a random intercept nested in the clusters
(tests/unit/test_stats_robust.py); clubSandwich refuses crossed random effects, for which the
same formulas apply with the Phi_ij terms above.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from scipy import linalg, sparse
from scipy.sparse import linalg as splinalg

from cueaudit.errors import InputError
from cueaudit.stats.multiplicity import TTest, WaldTest, f_test, t_test, wald_statistic


def _indicators(groups: Mapping[str, np.ndarray], theta: Mapping[str, float], n: int) -> list:
    """``theta_k Z_k`` of every factor with a positive theta, as sparse matrices."""
    blocks = []
    for name, labels in groups.items():
        t = float(theta.get(name, 0.0))
        if t > 0:
            codes = np.unique(np.asarray(labels), return_inverse=True)[1].reshape(-1)
            shape = (n, int(codes.max()) + 1)
            blocks.append(sparse.csr_matrix((np.full(n, t), (np.arange(n), codes)), shape=shape))
    return blocks


def gls_weights(
    x: np.ndarray, groups: Mapping[str, np.ndarray] | None, theta: Mapping[str, float] | None
) -> np.ndarray:
    """``W X = Phi^-1 X`` for the working covariance of random intercepts (Woodbury on the
    sparse random-effect design; ``X`` itself without factors)."""
    x = np.asarray(x, dtype=np.float64)
    blocks = _indicators(groups or {}, theta or {}, len(x))
    if not blocks:
        return x
    u = sparse.hstack(blocks).tocsc()
    m = (sparse.identity(u.shape[1], format="csc") + u.T @ u).tocsc()
    return x - u @ splinalg.splu(m).solve(np.asarray(u.T @ x))


def influence(
    x: np.ndarray, wx: np.ndarray, residual: np.ndarray, contrast: np.ndarray
) -> np.ndarray:
    """Each observation's term of ``c' (beta - beta_true) = sum_i psi_i``: ``psi = (W X M c) *
    e``, the linear influence that cluster-robust sums and cross-covariances add up."""
    bread = np.linalg.inv(x.T @ wx)
    return (wx @ (bread @ contrast)) * residual


def cross_covariance(
    psi_a: np.ndarray,
    labels_a: Mapping[str, np.ndarray],
    psi_b: np.ndarray,
    labels_b: Mapping[str, np.ndarray],
    *,
    units_a: np.ndarray | None = None,
    units_b: np.ndarray | None = None,
) -> float:
    """The covariance of two estimates from different observations that share levels of the
    factors in ``labels`` (a name pair, a profile): ``sum_F sum_g s^a_g s^b_g``, over each
    factor ``F`` and each of its levels ``g``, of the summed influences ``s_g`` of each estimate
    in ``g``. Observations of one estimate that share no level with the other's add nothing.

    A **unit** (``units``: one id per observation; by default each observation is its own) is a
    set of observations whose outcomes are drawn together, such as the candidates of one
    ranking: their points sum to a constant, so each candidate's points depend on the names and
    profiles of the others too. A unit is a member of every level its observations show, and
    ``s_g`` sums the influences of the units that are members of ``g``.

    These are the one-way terms of Cameron, Gelbach & Miller's (2011) multiway sum without
    its intersection terms (``- sum_g s^a_g s^b_g`` over the levels of the profile x pair
    cells), the variant Davezies, D'Haultfoeuille & Guyonvarch (2021) and MacKinnon, Nielsen &
    Webb (2021) discuss. The intersection would subtract covariance that the one-way terms of
    residuals never counted: where every name pair is shown with every profile, the fit's
    intercept removes each profile's effect from the pair sums (every pair sees every profile)
    but not from the profile x pair cells. The profile variance, large next to the names', was
    then subtracted from a covariance that never held it: on the decision-audit simulator the
    correlation of crossed Rate and Decide contrasts came out -0.42 (clipped at -1 in 96% of
    the studies with weaker name effects) where it was +0.50 (+0.13), and the SE of their
    difference 1.5-1.6 times its empirical SD (benchmarks/interaction_calibration.py). What
    the one-way terms count twice is covariance specific to one level of each factor at once
    (one name on one profile).
    """
    factors = list(labels_a)
    if set(factors) != set(labels_b):
        raise InputError("cross-covariance", "the same factors for both estimates", "labels")
    total = 0.0
    for factor in factors:
        sums_a = _level_sums(psi_a, labels_a[factor], units_a)
        sums_b = _level_sums(psi_b, labels_b[factor], units_b)
        total += sum(value * sums_b[level] for level, value in sums_a.items() if level in sums_b)
    return total


def _level_sums(psi: np.ndarray, labels: np.ndarray, units: np.ndarray | None) -> dict[str, float]:
    """Each level's sum of the influences of the units that are members of it."""
    psi = np.asarray(psi, dtype=np.float64)
    labels = np.asarray(labels).astype(str)
    units = np.arange(len(psi)) if units is None else np.asarray(units).astype(str)
    if psi.shape != labels.shape or units.shape != psi.shape:
        raise InputError("cross-covariance", "one influence, label and unit per observation")
    unit_ids, unit_of = np.unique(units, return_inverse=True)
    unit_sums = np.bincount(unit_of, psi, len(unit_ids))
    levels, level_of = np.unique(labels, return_inverse=True)
    member = np.unique(unit_of * len(levels) + level_of)  # distinct (unit, level) pairs
    sums = np.bincount(member % len(levels), unit_sums[member // len(levels)], len(levels))
    return dict(zip(levels.tolist(), sums.tolist(), strict=True))


def _inverse_sqrt(m: np.ndarray) -> np.ndarray:
    values, vectors = linalg.eigh(m)
    keep = values > 1e-12 * max(1.0, float(values.max()))
    return (vectors[:, keep] / np.sqrt(values[keep])) @ vectors[:, keep].T


@dataclass(frozen=True)
class ClusterRobust:
    """The cluster-robust covariances of ``beta`` (fit by :func:`cluster_robust`)."""

    coef: np.ndarray
    cov_cr1: np.ndarray
    cov_cr2: np.ndarray
    n_clusters: int
    _u_parts: tuple[np.ndarray, ...] = field(repr=False, compare=False)  # A_j' (W X)_j M
    _x_parts: tuple[np.ndarray, ...] = field(repr=False, compare=False)  # X_j
    _z_parts: tuple[tuple[np.ndarray, ...], ...] = field(repr=False, compare=False)
    _bread: np.ndarray = field(repr=False, compare=False)

    @functools.cached_property
    def se_cr2(self) -> np.ndarray:
        return np.sqrt(np.clip(np.diag(self.cov_cr2), 0.0, None))

    def df(self, contrast: np.ndarray) -> float:
        """Satterthwaite's degrees of freedom of the CR2 variance of ``contrast @ coef``."""
        c = np.asarray(contrast, dtype=np.float64)
        u = [part @ c for part in self._u_parts]
        r = np.array([x.T @ v for x, v in zip(self._x_parts, u, strict=True)])
        s = -(r @ self._bread @ r.T)
        s[np.diag_indices_from(s)] += np.array([v @ v for v in u])
        for k in range(len(self._z_parts[0]) if self._z_parts else 0):
            zk = np.array([zs[k].T @ v for zs, v in zip(self._z_parts, u, strict=True)])
            s += zk @ zk.T
        total = float(np.sum(s**2))
        return float(np.trace(s) ** 2 / total) if total > 0 else np.nan

    def test(self, contrast: np.ndarray, *, cov: str = "cr2") -> TTest:
        """The t test of ``contrast @ coef`` by CR2 with Satterthwaite's df, or by CR1 with
        ``G - 1`` degrees of freedom (``cov="cr1"``)."""
        c = np.asarray(contrast, dtype=np.float64).reshape(-1)
        if c.shape != self.coef.shape:
            raise InputError("cluster-robust", f"a contrast of {len(self.coef)} coefficients")
        matrix = self.cov_cr2 if cov == "cr2" else self.cov_cr1
        variance = float(c @ matrix @ c)
        if not variance > 0:
            return t_test(float(c @ self.coef), np.nan, np.nan)
        df = self.df(c) if cov == "cr2" else float(self.n_clusters - 1)
        return t_test(float(c @ self.coef), float(np.sqrt(variance)), df)

    def wald_test(self, matrix: np.ndarray, *, cov: str = "cr2") -> WaldTest:
        """The joint Wald test of ``matrix @ coef = 0`` by CR2 (or CR1) referred to
        F(q, G - 1), q the rank of ``L V L'``: clubSandwich's ``Wald_test(test = "Naive-F")``
        and statsmodels' cluster-robust ``f_test``."""
        c = np.atleast_2d(np.asarray(matrix, dtype=np.float64))
        if c.shape[1] != len(self.coef):
            raise InputError("cluster-robust", f"a matrix of {len(self.coef)} columns")
        f, rotated = wald_statistic(self.coef, self.cov_cr2 if cov == "cr2" else self.cov_cr1, c)
        return f_test(f, len(rotated), float(self.n_clusters - 1))


def cluster_robust(
    x: np.ndarray,
    y: np.ndarray,
    clusters: np.ndarray,
    *,
    coef: np.ndarray | None = None,
    groups: Mapping[str, np.ndarray] | None = None,
    theta: Mapping[str, float] | None = None,
    cr2: bool = True,
) -> ClusterRobust:
    """CR1 and CR2 covariances of the GLS coefficients of ``y`` on ``x`` under the working
    covariance of random intercepts ``groups`` with relative SDs ``theta`` (OLS without them),
    clustered by ``clusters``; ``coef`` defaults to the GLS coefficients themselves (pass the
    REML fit's, which are the same at its theta). ``cr2=False`` skips the per-cluster CR2
    adjustment (its covariance is then NaN)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    n, p = x.shape
    if y.shape != (n,) or np.asarray(clusters).shape != (n,):
        raise InputError("cluster-robust", "x, y and clusters need one row per observation")
    codes = np.unique(np.asarray(clusters), return_inverse=True)[1].reshape(-1)
    n_clusters = int(codes.max()) + 1 if n else 0
    if n_clusters < 2:
        raise InputError("cluster-robust", "fewer than two clusters", "clusters")
    blocks = [b.tocsr() for b in _indicators(groups or {}, theta or {}, n)]
    wx = gls_weights(x, groups, theta)
    u_rows = sparse.hstack(blocks).tocsr() if blocks else None
    info = x.T @ wx
    if np.linalg.matrix_rank(info) < p:
        raise InputError("cluster-robust", "the regressors are collinear", "x")
    bread = np.linalg.inv(info)
    beta = bread @ (wx.T @ y) if coef is None else np.asarray(coef, dtype=np.float64)
    e = y - x @ beta
    order = np.argsort(codes, kind="stable")
    starts = np.searchsorted(codes[order], np.arange(n_clusters + 1))
    scores1 = np.zeros((n_clusters, p))
    scores2 = np.zeros((n_clusters, p))
    u_parts, x_parts, z_parts = [], [], []
    for j in range(n_clusters):
        rows = order[starts[j] : starts[j + 1]]
        xj, wxj, ej = x[rows], wx[rows], e[rows]
        scores1[j] = wxj.T @ ej
        if not cr2:
            continue
        phi = np.eye(len(rows))
        zs: tuple[np.ndarray, ...] = ()
        if u_rows is not None:
            zj = u_rows[rows]
            phi = phi + (zj @ zj.T).toarray()
            zs = tuple(b[rows].toarray() for b in blocks)
        d = linalg.cholesky(phi, lower=False)  # Phi_jj = D' D
        expected = phi - xj @ bread @ xj.T
        adjust = d.T @ _inverse_sqrt(d @ expected @ d.T) @ d
        scores2[j] = wxj.T @ (adjust @ ej)
        u_parts.append(adjust.T @ wxj @ bread)
        x_parts.append(xj)
        z_parts.append(zs)
    factor = n_clusters / (n_clusters - 1) * (n - 1) / (n - p)
    return ClusterRobust(
        coef=beta,
        cov_cr1=factor * bread @ (scores1.T @ scores1) @ bread,
        cov_cr2=bread @ (scores2.T @ scores2) @ bread if cr2 else np.full((p, p), np.nan),
        n_clusters=n_clusters,
        _u_parts=tuple(u_parts),
        _x_parts=tuple(x_parts),
        _z_parts=tuple(z_parts),
        _bread=bread,
    )
