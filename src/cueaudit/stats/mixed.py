"""Linear mixed model with crossed random intercepts, fitted by profiled REML.

    y = X beta + sum_k Z_k b_k + e,   b_k ~ N(0, sigma^2 theta_k^2 I),   e ~ N(0, sigma^2 I)

The formulation is lme4's (Bates, Maechler, Bolker & Walker 2015, section 3): for relative
standard deviations theta, the penalized least-squares system
``[Lambda'Z'Z Lambda + I, Lambda'Z'X; X'Z Lambda, X'X]`` is factored, beta and sigma^2 are
profiled out, and the REML criterion

    d(theta) = log|L|^2 + log|R_X|^2 + (n - p) (1 + log(2 pi PRSS / (n - p)))

is minimized over the relative variances phi = theta^2 >= 0 (L-BFGS-B with an analytic
gradient, started at theta = 1 as lme4 does, or at the caller's ``start``; in phi the criterion
is smooth at the boundary, where in theta every point with a zero component is stationary).

The random-effect factor with the most levels (the bundle, in the decision audit) is eliminated
exactly: each observation belongs to one of its levels, so its block of Z'Z is diagonal. The
remaining factors (profile, name pair: tens of levels) and the fixed effects form a small
dense system whose Cholesky factor yields every term of d(theta). The cost is linear in the
number of observations and in the levels of the largest factor, cubic in the levels of the
others; more than ``MAX_DENSE_LEVELS`` levels outside the largest factor is refused.

Conventions (validated against R ``lme4::lmer(REML=TRUE)`` and statsmodels ``MixedLM`` in
tests/unit/test_stats_mixed.py):

- ``cov`` is ``sigma^2 (X' V^-1 X)^-1`` at the REML estimates, lme4's ``vcov``; ``se`` its
  square-root diagonal.
- ``z = coef / se`` and ``p`` is two-sided from the standard normal (statsmodels' convention;
  lme4 reports no p-value). :meth:`MixedResult.test` gives lmerTest's t test of a linear
  combination instead, with Satterthwaite's degrees of freedom (below).
- ``variance_components`` maps every factor name to its variance ``sigma^2 theta_k^2`` and
  ``"residual"`` to ``sigma^2``.
- ``reml_criterion`` is lme4's "REML criterion at convergence" (minus twice the restricted
  log-likelihood).

Satterthwaite's degrees of freedom follow lmerTest (Kuznetsova, Brockhoff & Christensen 2017):
for a contrast ``L``, ``df = 2 (L' C L)^2 / (g' A g)`` with ``C`` the covariance of the fixed
effects, ``g_k = L' (dC / d varpar_k) L`` and ``A = 2 H^+`` the asymptotic covariance of the
variance parameters ``varpar = (theta, sigma)``, ``H`` the Hessian of the (unprofiled) REML
deviance and ``H^+`` its inverse over eigenvalues above 1e-8. Both derivatives are numDeriv's
Richardson differences (:mod:`cueaudit.stats.numdiff`), as lmerTest computes them, and are
computed once per fit, on the first test (validated against ``lmerTest::contest`` in
tests/unit/test_stats_satterthwaite.py).

Identifiability is checked before fitting, as lme4 checks it: a factor with as many levels as
observations (its variance cannot be told from the residual's), and two factors that partition
the observations the same way (their variances cannot be told apart), are refused.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import linalg, optimize, sparse, stats

from cueaudit.errors import InputError
from cueaudit.stats import numdiff
from cueaudit.stats.multiplicity import TTest, WaldTest, f_test, t_test, wald_statistic

MAX_DENSE_LEVELS = 5000  # levels outside the largest factor that the dense step accepts
SINGLE_THREAD_BELOW = 1000  # reduced systems smaller than this run on one BLAS thread
RESIDUAL = "residual"
EIGEN_TOL = 1e-8  # lmerTest's tolerance for the Hessian's eigenvalues


@dataclass(frozen=True)
class _Design:
    n: int
    p: int
    n_big: np.ndarray  # observations per level of the largest factor
    # Z2'Z1 diag(w) Z1'Z2 = sum over levels l of w_l c_l c_l' (c_l the l-th row of Z1'Z2):
    # every product of two nonzeros of one row, its level and its flat (i * r + j) position
    pair_level: np.ndarray
    pair_value: np.ndarray
    pair_cell: np.ndarray
    rest_big: sparse.csr_matrix  # Z2'Z1
    big_xy: np.ndarray  # Z1'[X y]
    cross: np.ndarray  # [Z2 X y]'[Z2 X y]
    rest_factor: np.ndarray  # for each column of Z2, the index of its factor in phi[1:]
    rest_levels: np.ndarray  # levels of each factor of Z2


@dataclass(frozen=True)
class MixedResult:
    names: list[str]
    coef: np.ndarray
    se: np.ndarray
    z: np.ndarray
    p: np.ndarray
    cov: np.ndarray
    variance_components: dict[str, float]
    theta: dict[str, float]
    n_levels: dict[str, int]
    n_obs: int
    reml_criterion: float
    converged: bool
    n_evaluations: int
    _design: _Design | None = field(default=None, repr=False, compare=False)
    _phi: np.ndarray | None = field(default=None, repr=False, compare=False)

    def conf_int(self, level: float = 0.95) -> np.ndarray:
        """Wald intervals, one row ``(low, high)`` per coefficient."""
        half = stats.norm.ppf(0.5 + level / 2) * self.se
        return np.column_stack([self.coef - half, self.coef + half])

    @functools.cached_property
    def _varpar(self) -> tuple[np.ndarray, np.ndarray]:
        """``(A, J)``: the covariance of ``varpar = (theta, sigma)`` and the Jacobian of the
        fixed-effect covariance in it (shape ``(p, p, K + 1)``)."""
        if self._design is None or self._phi is None:
            raise InputError("mixed model", "the fit holds no design to differentiate")
        d = self._design
        at = np.concatenate([np.sqrt(self._phi), [np.sqrt(self.variance_components[RESIDUAL])]])
        with _blas_threads(len(d.rest_factor) + d.p + 1):
            h = numdiff.hessian(lambda v: _deviance(d, v), at)
            jac = numdiff.jacobian(lambda v: _covbeta(d, v), at)
        values, vectors = np.linalg.eigh(h)
        keep = values > EIGEN_TOL
        inverse = (vectors[:, keep] / values[keep]) @ vectors[:, keep].T
        return 2.0 * inverse, jac

    def test(self, contrast: np.ndarray) -> TTest:
        """The t test of ``contrast @ coef`` with Satterthwaite's degrees of freedom
        (lmerTest's ``contest1D(ddf = "Satterthwaite")``)."""
        c = np.asarray(contrast, dtype=np.float64).reshape(-1)
        if c.shape != self.coef.shape:
            raise InputError("mixed model", f"a contrast of {len(self.coef)} coefficients")
        variance = float(c @ self.cov @ c)
        if not variance > 0:
            return t_test(float(c @ self.coef), np.nan, np.nan)
        a, jac = self._varpar
        grad = np.einsum("i,ijk,j->k", c, jac, c)
        denominator = float(grad @ a @ grad)
        df = 2.0 * variance**2 / denominator if denominator > 0 else np.inf
        return t_test(float(c @ self.coef), float(np.sqrt(variance)), df)

    def wald_test(self, matrix: np.ndarray) -> WaldTest:
        """The joint F test of ``matrix @ coef = 0`` (one row per hypothesis) with
        Satterthwaite's denominator degrees of freedom, lmerTest's ``contestMD``: in the
        eigenbasis of ``L C L'`` each independent direction has its Satterthwaite df
        ``nu_m`` (:meth:`test`), and ``df2 = 2 E / (E - q)`` with ``E = sum nu_m / (nu_m - 2)``
        (2 when some ``nu_m <= 2``; the common value when all are equal; ``nu`` itself for one
        row)."""
        f, rotated = wald_statistic(self.coef, self.cov, matrix)
        q = len(rotated)
        if q == 0:
            return f_test(np.nan, 0, np.nan)
        nu = np.array([self.test(row).df for row in rotated])
        return f_test(f, q, satterthwaite_f_df(nu))


def satterthwaite_f_df(nu: np.ndarray, tol: float = 1e-8) -> float:
    """lmerTest's ``get_Fstat_ddf``: the denominator df of an F test from the Satterthwaite
    df of its independent directions."""
    nu = np.asarray(nu, dtype=np.float64)
    if len(nu) == 1:
        return float(nu[0])
    if np.all(np.abs(np.diff(nu)) < tol):
        return float(nu.mean())
    if np.any(nu <= 2):
        return 2.0
    e = float(np.sum(nu / (nu - 2)))
    return 2.0 * e / (e - len(nu))


def _codes(values: np.ndarray, name: str, n: int) -> np.ndarray:
    values = np.asarray(values)
    if values.shape != (n,):
        raise InputError("mixed model", f"{values.shape} labels for {n} observations", name)
    _, codes = np.unique(values, return_inverse=True)
    return codes.astype(np.int64)


def _indicators(codes: list[np.ndarray], n: int) -> sparse.csr_matrix:
    offsets = np.cumsum([0] + [int(c.max()) + 1 for c in codes])
    if not codes:
        return sparse.csr_matrix((n, 0))
    cols = np.concatenate([c + o for c, o in zip(codes, offsets, strict=False)])
    rows = np.tile(np.arange(n), len(codes))
    return sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, int(offsets[-1])))


def _row_pairs(m: sparse.csr_matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lengths = np.diff(m.indptr)
    row_of = np.repeat(np.arange(m.shape[0]), lengths)
    first = np.repeat(np.arange(m.nnz), lengths[row_of])  # each entry once per row partner
    block_start = np.repeat(np.cumsum(lengths[row_of]) - lengths[row_of], lengths[row_of])
    second = m.indptr[row_of[first]] + np.arange(len(first)) - block_start
    cell = m.indices[first] * m.shape[1] + m.indices[second]
    return row_of[first], m.data[first] * m.data[second], cell


def _design(y: np.ndarray, x: np.ndarray, codes: list[np.ndarray]) -> _Design:
    n, p = x.shape
    rest_levels = np.array([int(c.max()) + 1 for c in codes[1:]], dtype=np.int64)
    r = int(rest_levels.sum())
    if r > MAX_DENSE_LEVELS:
        raise InputError(
            "mixed model", f"{r} levels outside the largest factor (at most {MAX_DENSE_LEVELS})"
        )
    z1t = _indicators(codes[:1], n).T.tocsr()
    z2 = _indicators(codes[1:], n)
    z2t = z2.T.tocsr()
    xy = np.column_stack([x, y])
    rest_xy = np.asarray(z2t @ xy)
    cross = np.block([[(z2t @ z2).toarray(), rest_xy], [rest_xy.T, xy.T @ xy]])
    big_rest = (z1t @ z2).tocsr()
    big_rest.sort_indices()
    level, value, cell = _row_pairs(big_rest)
    return _Design(
        n=n,
        p=p,
        n_big=np.asarray(z1t.sum(axis=1)).ravel(),
        pair_level=level,
        pair_value=value,
        pair_cell=cell,
        rest_big=big_rest.T.tocsr(),
        big_xy=np.asarray(z1t @ xy),
        cross=cross,
        rest_factor=np.repeat(np.arange(len(rest_levels)), rest_levels),
        rest_levels=rest_levels,
    )


def _weighted_cross(d: _Design, w: np.ndarray) -> np.ndarray:
    """``[Z2 X y]' Z1 diag(w) Z1' [Z2 X y]`` without forming anything of size n."""
    wxy = d.big_xy * w[:, None]
    r = d.rest_big.shape[0]
    weights = d.pair_value * w[d.pair_level]
    rr = np.bincount(d.pair_cell, weights, minlength=r * r).reshape(r, r)
    rx = d.rest_big @ wxy
    return np.block([[rr, rx], [rx.T, d.big_xy.T @ wxy]])


def _reduced(d: _Design, phi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The reduced system: the largest factor's (diagonal) block eliminated.

    Returns ``K = [Z2 X y]'(I - Z1 diag(phi_1 / D) Z1')[Z2 X y]``, its penalized and scaled
    form ``R = Lambda K Lambda + P`` (P the identity on Z2's random effects) and
    ``D = phi_1 n_l + 1``.
    """
    diag = phi[0] * d.n_big + 1.0
    r = len(d.rest_factor)
    k = d.cross - phi[0] * _weighted_cross(d, 1.0 / diag)
    scale = np.concatenate([np.sqrt(phi[1:])[d.rest_factor], np.ones(d.p + 1)])
    m = scale[:, None] * k * scale[None, :]
    m[np.arange(r), np.arange(r)] += 1.0
    return k, m, diag


def _factor(d: _Design, phi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Cholesky factor of the reduced penalized system at ``phi`` and ``D``."""
    _, m, diag = _reduced(d, phi)
    return linalg.cholesky(m, lower=True, check_finite=False), diag


def _deviance(d: _Design, varpar: np.ndarray) -> float:
    """The REML deviance at ``varpar = (theta, sigma)`` (lmerTest's ``devfun_vp``): with
    theta's conditional modes and fixed effects, ``log|L|^2 + PRSS / sigma^2 + (n - p)
    log(2 pi sigma^2) + log|R_X|^2``. theta enters squared, so the deviance is even in each
    component (numDeriv steps across zero at a variance on its boundary)."""
    theta, sigma2 = varpar[:-1], varpar[-1] ** 2
    chol, diag = _factor(d, theta**2)
    r = len(d.rest_factor)
    logdiag = np.log(np.diag(chol))
    prss = chol[-1, -1] ** 2
    value = float(np.log(diag).sum()) + 2.0 * logdiag[: r + d.p].sum() + prss / sigma2
    return float(value + (d.n - d.p) * np.log(2.0 * np.pi * sigma2))


def _covbeta(d: _Design, varpar: np.ndarray) -> np.ndarray:
    """``sigma^2 (X' V^-1 X)^-1`` at ``varpar = (theta, sigma)`` (lmerTest's ``get_covbeta``)."""
    theta, sigma2 = varpar[:-1], varpar[-1] ** 2
    chol, _ = _factor(d, theta**2)
    r = len(d.rest_factor)
    inverse, _ = linalg.lapack.dtrtri(chol[r : r + d.p, r : r + d.p], lower=1)
    return sigma2 * (inverse.T @ inverse)


def _check_identifiable(codes: Mapping[str, np.ndarray], n: int) -> None:
    """lme4's checks: fewer levels than observations; no two factors with one partition."""
    for name, c in codes.items():
        if int(c.max()) + 1 >= n:
            raise InputError(
                "mixed model",
                f"{int(c.max()) + 1} levels for {n} observations: a factor with one level per "
                "observation cannot be told from the residual",
                name,
            )
    names = list(codes)
    for i, a in enumerate(names):
        for b in names[:i]:
            pairs = np.unique(np.column_stack([codes[a], codes[b]]), axis=0)
            if len(pairs) == int(codes[a].max()) + 1 == int(codes[b].max()) + 1:
                raise InputError(
                    "mixed model",
                    f"factors {b!r} and {a!r} group the observations the same way: their "
                    "variances cannot be told apart",
                    a,
                )


def _criterion(d: _Design, phi: np.ndarray) -> tuple[float, np.ndarray]:
    """REML criterion and its gradient in phi = theta^2 (relative variances).

    With M the penalized system over (u, beta, y) and M_b the one over (u, beta),
    d = (n-p) log|M| - (n-p-1) log|M_b| + const. For either matrix,
    d log|M| / d phi_k = (q_k - tr_k(M^-1)) / phi_k, where tr_k sums the diagonal of M^-1 over
    factor k's random effects. Both terms are written without that division so that the
    gradient stays exact at phi_k = 0: for the largest factor
    ``sum_l n_l / D_l - tr(R^-1 H)`` with ``H = Lambda K(1/D^2) Lambda``, for the others
    ``diag((I + Q Phi)^-1 Q)`` with Q the Schur complement of the (X, y) block of K.
    """
    k, m, diag = _reduced(d, phi)
    try:
        chol = linalg.cholesky(m, lower=True, check_finite=False)
    except linalg.LinAlgError:
        return np.inf, np.zeros_like(phi)
    r, df = len(d.rest_factor), d.n - d.p
    logdiag = np.log(np.diag(chol))
    if not np.all(np.isfinite(logdiag)):
        return np.inf, np.zeros_like(phi)
    value = float(np.log(diag).sum()) + 2.0 * logdiag[:-1].sum() + 2.0 * df * logdiag[-1]
    value += df * (1.0 + np.log(2.0 * np.pi / df))
    sqrt_phi = np.concatenate([np.sqrt(phi[1:])[d.rest_factor], np.ones(d.p + 1)])
    h = sqrt_phi[:, None] * _weighted_cross(d, 1.0 / diag**2) * sqrt_phi[None, :]
    phi_rest = phi[1:][d.rest_factor]
    grad = np.zeros_like(phi)
    for weight, size in ((df, len(m)), (-(df - 1), len(m) - 1)):
        inv_l, _ = linalg.lapack.dtrtri(chol[:size, :size], lower=1)
        inv = inv_l.T @ inv_l
        grad[0] += weight * ((d.n_big / diag).sum() - (inv * h[:size, :size]).sum())
        if r:
            kxx = k[r:size, r:size]
            q = k[:r, :r] - k[:r, r:size] @ np.linalg.solve(kxx, k[r:size, :r])
            y_ = np.linalg.solve(np.eye(r) + q * phi_rest[None, :], q)
            grad[1:] += weight * np.bincount(d.rest_factor, np.diag(y_), len(d.rest_levels))
    return float(value), grad


@functools.cache
def _blas_controller() -> Any:
    """threadpoolctl's view of the loaded BLAS libraries, found once: ``threadpool_limits``
    searches the process's libraries on every call (16 ms each, 10% of a specification curve's
    refits). This module imports SciPy's linear algebra first, so that its BLAS is seen too."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def one_blas_thread() -> contextlib.AbstractContextManager[object]:
    """One BLAS thread inside the block (threadpoolctl comes with the ``decision`` extra;
    without it, nothing changes)."""
    try:
        controller = _blas_controller()
    except ImportError:
        return contextlib.nullcontext()
    return controller.limit(limits=1, user_api="blas")


def _blas_threads(size: int) -> contextlib.AbstractContextManager[object]:
    """One BLAS thread for small systems: on a busy machine OpenBLAS's threads turn each
    80 x 80 product into milliseconds of waiting (measured: 45 ms against 2 ms an evaluation
    at load 4 on 2 cores)."""
    return contextlib.nullcontext() if size >= SINGLE_THREAD_BELOW else one_blas_thread()


def fit_crossed_lmm(
    y: np.ndarray,
    x: np.ndarray,
    groups: Mapping[str, np.ndarray],
    names: Sequence[str],
    *,
    start: Mapping[str, float] | None = None,
) -> MixedResult:
    """Fit ``y ~ x + (1|g_1) + ... + (1|g_K)`` by REML; ``x`` carries its own intercept column.

    ``groups`` maps each random-intercept factor's name to one label per observation (any
    hashable values; crossed or nested). ``start`` gives the optimizer's starting theta of
    any factor (default 1, as lme4): a refit of a subset (leave one level out) that starts
    at the full fit's ``theta`` needs a fraction of the evaluations. Raises ``InputError``
    for mismatched shapes, non-finite values, a rank-deficient ``x`` or a factor with fewer
    than two levels.
    """
    y = np.asarray(y, dtype=np.float64)
    n = len(y)
    if n == 0:
        raise InputError("mixed model", "no observations")
    x = np.asarray(x, dtype=np.float64).reshape(n, -1)
    p = x.shape[1]
    if p != len(names):
        raise InputError("mixed model", f"{p} regressors but {len(names)} names")
    if not (np.isfinite(y).all() and np.isfinite(x).all()):
        raise InputError("mixed model", "non-finite outcome or regressor")
    if np.linalg.matrix_rank(x) < p:
        raise InputError("mixed model", "the fixed-effect design is rank deficient")
    if not groups:
        raise InputError("mixed model", "no random-intercept factor")
    if RESIDUAL in groups:
        raise InputError("mixed model", f"'{RESIDUAL}' is reserved", RESIDUAL)
    factor_names = list(groups)
    codes = {k: _codes(v, k, n) for k, v in groups.items()}
    n_levels = {k: int(c.max()) + 1 for k, c in codes.items()}
    for name, levels in n_levels.items():
        if levels < 2:
            raise InputError("mixed model", "fewer than two levels", name)
    if n <= p:
        raise InputError("mixed model", f"{n} observations for {p} fixed effects")
    _check_identifiable(codes, n)
    if n - p < 2:
        # one residual degree of freedom cannot tell the residual variance from the factors':
        # whether the optimiser then meets a singular criterion depended on the BLAS build
        raise InputError(
            "mixed model",
            f"not identifiable from {n} observations for {p} fixed effects and "
            f"{sum(n_levels.values())} random levels (fewer than two residual degrees of freedom)",
        )
    order = sorted(factor_names, key=lambda f: -n_levels[f])
    n_factors = len(order)
    r = sum(n_levels[f] for f in order[1:])
    with _blas_threads(r + p + 1):
        design = _design(y, x, [codes[f] for f in order])
        try:
            fit = optimize.minimize(
                lambda t: _criterion(design, t),
                np.array([float((start or {}).get(f, 1.0)) ** 2 for f in order]),
                jac=True,
                method="L-BFGS-B",
                bounds=[(0.0, None)] * n_factors,
                options={"ftol": 1e-12, "gtol": 1e-6, "maxiter": 1000},
            )
        except np.linalg.LinAlgError as error:
            # a few rows whose fixed effects the random effects can absorb: at some variances
            # the profiled criterion has no solution (seen at 4 rows, 3 fixed effects)
            raise InputError(
                "mixed model",
                f"not identifiable from {n} observations for {p} fixed effects and "
                f"{sum(n_levels.values())} random levels ({error})",
            ) from error
        phi = np.asarray(fit.x, dtype=np.float64)
        _, m, _ = _reduced(design, phi)
        try:
            chol = linalg.cholesky(m, lower=True, check_finite=False)
        except linalg.LinAlgError as error:
            # the outcome is a linear combination of the regressors and the random effects:
            # no residual variance is left to estimate anything against
            raise InputError("mixed model", f"the outcome is fitted exactly ({error})") from error
    # L-BFGS-B reports a failed line search when it sits at the optimum to machine precision
    projected = np.where((phi <= 0) & (fit.jac > 0), 0.0, fit.jac)
    at_optimum = np.max(np.abs(projected)) <= 1e-6 * max(1.0, abs(float(fit.fun)))
    theta = np.sqrt(phi)
    lxx = chol[r : r + p, r : r + p]
    coef = linalg.solve_triangular(lxx.T, chol[r + p, r : r + p], lower=False)
    sigma2 = chol[-1, -1] ** 2 / (n - p)
    lxx_inv, _ = linalg.lapack.dtrtri(lxx, lower=1)
    cov = sigma2 * (lxx_inv.T @ lxx_inv)
    se = np.sqrt(np.diag(cov))
    z = coef / se
    by_name = dict(zip(order, theta, strict=True))
    components = {f: float(sigma2 * by_name[f] ** 2) for f in factor_names}
    components[RESIDUAL] = float(sigma2)
    return MixedResult(
        names=list(names),
        coef=coef,
        se=se,
        z=z,
        p=2.0 * stats.norm.sf(np.abs(z)),
        cov=cov,
        variance_components=components,
        theta={f: float(by_name[f]) for f in factor_names},
        n_levels=n_levels,
        n_obs=n,
        reml_criterion=float(fit.fun),
        converged=bool(np.isfinite(fit.fun)) and (bool(fit.success) or bool(at_optimum)),
        n_evaluations=int(fit.nfev),
        _design=design,
        _phi=phi,
    )
