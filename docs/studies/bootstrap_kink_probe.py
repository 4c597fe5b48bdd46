"""Which critical_depth bootstrap resamples fail, and why (see ``bootstrap_kink.md``).

For replicate ``rep`` of the coverage test (argument, default 16): the resamples whose every
start stops unconverged, the distance of their nearest drawn row to the critical depth
``kappa ln(width)``, a refit with ``kappa`` held at its stalled value (``Law.fixing``), one-sided
probes of ``kappa``, and :func:`scalefit.fit.kink.polish_on_kink` on the same points. Run with
``PYTHONPATH=.`` from the repository root (the bootstrap's own ``_Resamples`` is used to get at
every resample).
"""

import sys
import time
import warnings

import numpy as np

from scalefit.core.errors import ConvergenceWarning
from scalefit.fit import fit
from scalefit.fit.bootstrap import _Resamples, resample_groups
from scalefit.fit.kink import polish_on_kink
from scalefit.fit.lsq import solve_many
from scalefit.fit.synthetic import simulate_table

rep = int(sys.argv[1]) if len(sys.argv) > 1 else 16
law = "critical_depth"
table = simulate_table(law, n=200, noise=0.01, seed=1000 + rep)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)
    res = fit(table, law, starts=64, seed=rep, progress=False)
prob = res.extras["problem"]
print("full fit converged", res.converged, res.params)
fits = _Resamples(prob, res, table, 200, 3, 0, True)
# the same counts as the bootstrap draws (seed 0), kept to re-solve the failed resamples
rng = np.random.default_rng([0, 1])
allc = np.concatenate(
    [c for _, c in resample_groups(table, 200, cluster=None, rng=np.random.default_rng([0, 1]))]
)
fits.solve(table, None, rng, False)
# stalled: certified on a kink (after the fix) or failed (before it)
failed = np.flatnonzero(getattr(fits, "on_kink", False) | ~np.isfinite(fits.best_obj))
print(
    "stalled on a kink or failed",
    len(failed),
    "of 200;",
    int((~np.isfinite(fits.best_obj)).sum()),
    "failed",
)
# re-solve the failed ones from the warm start, look at them
z, obj, conv, it = solve_many(prob, np.repeat(fits.warm[None], len(failed), 0), allc[failed])
lw = np.log(table["width"].to_numpy())
d = table["depth"].to_numpy()
L = res.law
for q, i in enumerate(failed[:12]):
    pub = L.to_public(z[q], prob.refs)
    lc = pub["kappa"] * lw
    gap = np.abs(d - lc) / lc
    used = allc[i] > 0
    # probe: objective at z +- eps along each coordinate
    f0 = prob.objective(z[q], allc[i])
    worse = []
    for k in range(len(z[q])):
        for s in (1e-6, -1e-6):
            zz = z[q].copy()
            zz[k] += s
            worse.append(prob.objective(zz, allc[i]) >= f0)
    print(
        f"res {i}: conv={conv[q]} it={it[q]} f={obj[q]:.6g} min row gap={gap[used].min():.2e} "
        f"kappa={float(pub['kappa']):.4f} local-min along axes: {all(worse)}"
    )
ok = np.flatnonzero(np.isfinite(fits.best_obj) & ~getattr(fits, "on_kink", False))
gaps = []
for i in ok:
    pub = L.to_public(fits.zb[i], prob.refs)
    lc = pub["kappa"] * lw
    gaps.append((np.abs(d - lc) / lc)[allc[i] > 0].min())
print("converged resamples: min row gap quantiles", np.quantile(gaps, [0, 0.1, 0.5, 0.9]))

# hold kappa at its stalled value, refit the rest from the stalled point: how far from optimal?
ik = L.param_names.index("kappa")
red_moves = []
for q, i in enumerate(failed[:12]):
    pub = {k: float(v) for k, v in L.to_public(z[q], prob.refs).items()}
    sub = prob.subset(law=L.fixing({"kappa": pub["kappa"]}))
    red = sub.law
    z0 = red.to_internal({k: pub[k] for k in red.param_names}, sub.refs)[None]
    zr, fr, cr, _ = solve_many(sub, z0, allc[i][None])
    newpub = red.to_public(zr[0], sub.refs)
    rel = {k: abs(float(newpub[k]) - pub[k]) / abs(pub[k]) for k in red.param_names}
    # one-sided check in kappa at the held optimum
    full = {**{k: float(v) for k, v in newpub.items()}, "kappa": pub["kappa"]}
    zf = L.to_internal(full, prob.refs)
    f0 = prob.objective(zf, allc[i])
    fp = prob.objective(zf + np.eye(len(zf))[ik] * 1e-5, allc[i])
    fm = prob.objective(zf - np.eye(len(zf))[ik] * 1e-5, allc[i])
    print(
        f"res {i}: held refit conv={cr[0]} f {obj[q]:.10g} -> {fr[0]:.10g} "
        f"(rel drop {(obj[q] - fr[0]) / obj[q]:.1e}); max rel param move {max(rel.values()):.1e}; "
        f"kappa +-1e-5 internal: df+={fp - f0:.2e} df-={fm - f0:.2e}"
    )

t = time.time()
zk, fk, ck = polish_on_kink(prob, z, allc[failed])
print(
    f"polish_on_kink: {ck.sum()} of {len(ck)} certified in {time.time() - t:.2f}s; "
    f"rel drop median {np.median((obj - fk) / obj):.1e}"
)
g = prob.solve_chunks(z, allc[failed], keys=("grad", "gn"), max_iter=0)
sc = np.abs(g["grad"]) / np.sqrt(np.abs(np.diagonal(g["gn"], axis1=1, axis2=2)))
print("held coordinate counts:", np.bincount(sc.argmax(1), minlength=7), L.param_names)
for q in np.flatnonzero(~ck)[:5]:
    print("uncertified", failed[q], fk[q], obj[q])
