"""Compiled programs reused across tables and processes; blocked large tables; chunked bootstrap."""

from __future__ import annotations

import numpy as np
import pytest

import scalefit
from scalefit.fit import _programs, engine
from scalefit.fit.bootstrap import resample_groups
from scalefit.fit.synthetic import TRUTHS, simulate_table
from scalefit.laws import get_law


def test_bucket_sizes():
    assert _programs.bucket(1) == 32
    assert _programs.bucket(32) == 32
    assert _programs.bucket(203) == _programs.bucket(215) == 224
    assert _programs.bucket(245) == 256
    sizes = [_programs.bucket(n) for n in range(1, 20_000)]
    assert all(b >= n for n, b in zip(range(1, 20_000), sizes, strict=True))
    assert all(np.diff(sizes) >= 0)
    # at most 25 % padding above the smallest bucket (plus a block for blocked tables)
    ratio = [b / n for n, b in zip(range(33, 20_000), sizes[32:], strict=True)]
    assert max(ratio) <= 1.25 + 1e-12
    big = _programs.bucket(1_000_000)
    assert big % _programs.BLOCK == 0 and 1_000_000 <= big <= 1.25 * 1_000_000
    assert _programs.n_blocks(big) == big // _programs.BLOCK
    assert _programs.n_blocks(224) == 1


def _numpy_objective(law, tab, params):
    pred = law.evaluate(params, tab)
    return float(np.sum((np.log(tab["loss"]) - np.log(pred)) ** 2))


@pytest.mark.parametrize("n", [203, 9000])
def test_padded_and_blocked_sums_match_numpy(n):
    law = get_law("decomposed")
    tab = simulate_table(law, n=n, seed=3)
    prob = engine.Problem(law, tab, tab["loss"].to_numpy(), loss="mse", delta=1e-3)
    assert prob.n == n and prob.n_padded == _programs.bucket(n)
    truth = TRUTHS["decomposed"]
    z = law.to_internal(truth, prob.refs)
    assert prob.objective(z) == pytest.approx(_numpy_objective(law, tab, truth), rel=1e-10)
    loc = prob.local(z)
    assert loc["resid"].shape == (n,)
    # the gradient of the summed objective, against central differences of the objective
    h = 1e-6
    fd = np.array(
        [(prob.objective(z + h * e) - prob.objective(z - h * e)) / (2 * h) for e in np.eye(len(z))]
    )
    np.testing.assert_allclose(loc["grad"], fd, rtol=1e-4, atol=1e-6 * np.abs(fd).max())
    assert prob.curvature(z)["h_internal"].shape == (len(law.params),) * 2


def test_tables_in_one_bucket_share_one_program():
    law = get_law("chinchilla")
    lk = engine.law_key(law)

    def solve_programs():
        return {k for k in engine._CACHE if k[:3] == ("program", "solve", lk)}

    for k in solve_programs():  # start as a fresh process would
        del engine._CACHE[k]
    fits = []
    for n in (203, 215):
        tab = simulate_table(law, n=n, seed=n)
        fits.append(scalefit.fit(tab, law, starts=8, seed=0, progress=False))
    # one program for both row counts (the polish and the checks reuse the same chunk shape)
    assert len(solve_programs()) == 1
    for res in fits:
        assert res.converged
    tab = simulate_table(law, n=300, seed=1)  # another bucket: a second program
    scalefit.fit(tab, law, starts=8, seed=0, progress=False)
    assert len(solve_programs()) == 2


def test_program_written_to_disk_and_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("SCALEFIT_JAX_CACHE", str(tmp_path))
    law = get_law("chinchilla")
    tab = simulate_table(law, n=100, seed=5)
    first = scalefit.fit(tab, law, starts=8, seed=0, progress=False)
    files = sorted((tmp_path / _programs.PROGRAM_DIR).glob("*.jaxexport"))
    assert files, "no serialised program was written"
    stamps = {f: f.stat().st_mtime_ns for f in files}
    # A new process starts with an empty in-memory cache: drop ours and fit again.
    for k in [k for k in engine._CACHE if k[0] == "program"]:
        del engine._CACHE[k]
    again = scalefit.fit(tab, law, starts=8, seed=0, progress=False)
    assert {f: f.stat().st_mtime_ns for f in files} == stamps  # read, not rewritten
    assert again.params == pytest.approx(first.params, rel=1e-12)
    # a damaged file is rebuilt, not trusted
    for f in files:
        f.write_bytes(b"not a program")
    for k in [k for k in engine._CACHE if k[0] == "program"]:
        del engine._CACHE[k]
    third = scalefit.fit(tab, law, starts=8, seed=0, progress=False)
    assert third.params == pytest.approx(first.params, rel=1e-12)
    assert all(f.read_bytes() != b"not a program" for f in files)


@pytest.mark.parametrize("p", [3, 7, 12, 20])
def test_damped_step_solves_like_lapack(p):
    """The Cholesky step (and the LAPACK path above CHOLESKY_MAX) against numpy."""
    with engine.float64():
        _check_damped_step(p)


def _check_damped_step(p):
    jax, jnp = engine.jax_modules()
    rng = np.random.default_rng(p)
    step = jax.jit(lambda h, r1, r2, g: engine.damped_step(jnp, h, r1, r2, g))
    for cond in (1.0, 1e6, 1e12):
        # a Gauss-Newton matrix J^T J with badly scaled columns and a given conditioning
        q, _ = np.linalg.qr(rng.normal(size=(40, p)))
        jac = q * np.logspace(0, -np.log10(cond) / 2, p) * np.exp(rng.normal(size=p) * 4)
        h = jac.T @ jac
        d = np.diag(h)
        g = rng.normal(size=p) * np.sqrt(d)
        for lam in (1e-3, 1e3):
            a_step, a_dec = h + np.diag((lam + 1e-14) * d), h + np.diag(1e-12 * d)
            s, quad = (np.asarray(v) for v in step(h, (lam + 1e-14) * d, 1e-12 * d, g))
            # backward error at the level of a pivoted LU (a few eps of the scaled problem)
            scale = np.sqrt(np.outer(d, d))
            res = (a_step @ s + g) / np.sqrt(d)
            bound = np.abs(a_step / scale).sum(1) * np.abs(s * np.sqrt(d)).max() + np.abs(
                g / np.sqrt(d)
            )
            assert np.all(np.abs(res) <= 64 * np.finfo(float).eps * bound)
            ref = g @ np.linalg.solve(a_dec, g)
            assert quad == pytest.approx(ref, rel=1e-12 * max(cond, 1.0) ** 0.5 + 1e-12)
            assert quad >= 0.0


def test_cached_program_key_records_float64(tmp_path, monkeypatch):
    """A program exported in float64 is never read back for a float32 call, nor the reverse."""
    monkeypatch.setenv("SCALEFIT_JAX_CACHE", str(tmp_path))
    jax, jnp = engine.jax_modules()
    a, b = np.eye(3) * 2.0, np.ones(3)
    folder = tmp_path / _programs.PROGRAM_DIR
    dtypes = []
    for wide in (True, False, True):
        with jax.enable_x64(wide):
            call = _programs.cached_program(jax.jit(jnp.linalg.solve), "test|solve", (a, b))
            out = call(a, b)  # a program with a LAPACK call loads and runs
        np.testing.assert_allclose(np.asarray(out), np.full(3, 0.5))
        dtypes.append(str(out.dtype))
        assert len(list(folder.glob("*.jaxexport"))) == (1 if len(dtypes) == 1 else 2)
    assert dtypes == ["float64", "float32", "float64"]


def test_lambda_law_has_no_disk_identity():
    law = scalefit.Law(
        name="mine",
        inputs=("params",),
        params=(scalefit.Param("E", "free", start=(1.0, 2.0)),),
        expr=lambda xp, p, x: p["E"] + 0.0 * x["params"],
        formula="E",
    )
    assert _programs.law_identity(law) is None
    assert _programs.law_identity(get_law("decomposed")) is not None


def test_resample_groups_are_the_same_stream():
    tab = simulate_table("chinchilla", n=57, seed=0)
    rng = np.random.default_rng([4, 1])
    (first, full), *rest = resample_groups(tab, 70, cluster=None, rng=rng, group=70)
    direct = np.random.default_rng([4, 1]).multinomial(57, np.full(57, 1 / 57), size=70)
    assert first == 0 and not rest
    np.testing.assert_array_equal(full, direct)
    parts = list(resample_groups(tab, 70, cluster=None, rng=np.random.default_rng([4, 1])))
    assert [p[0] for p in parts] == [0, 32, 64]
    np.testing.assert_array_equal(np.concatenate([p[1] for p in parts]), direct)


@pytest.mark.slow
def test_large_table_screens_then_polishes_on_every_row():
    law = get_law("decomposed")
    tab = simulate_table(law, n=30_000, seed=2)
    res = scalefit.fit(tab, law, seed=0, progress=False)
    assert res.converged
    assert res.diagnostics["screened_on_rows"] == engine.SCREEN_ROWS
    for k in ("a_width", "a_depth", "a_tokens"):
        assert res.params[k] == pytest.approx(TRUTHS["decomposed"][k], rel=0.05)
    # the polished optimum is the optimum on every row: no start from it does better
    prob = engine.Problem(law, tab, tab["loss"].to_numpy(), loss="mse", delta=1e-3)
    z = np.asarray(res.internal)
    assert np.abs(prob.local(z)["grad"]).max() < 1e-6


def test_streamed_chunks_follow_the_uninterrupted_path():
    """Retiring finished starts and refilling their slots changes nothing but the cost."""
    law = get_law("decomposed")
    tab = simulate_table(law, n=120, seed=4)
    prob = engine.Problem(law, tab, tab["loss"].to_numpy(), loss="mse", delta=1e-3)
    z0 = scalefit.laws.sample_starts(law, 64, tab["loss"].to_numpy(), seed=0)
    whole = [prob.solve_raw(z0[i : i + 32], max_iter=1000) for i in range(0, 64, 32)]
    stream = prob.solve_stream(z0, max_iter=1000, segment=5)
    for key in ("z", "objective", "converged", "iterations"):
        np.testing.assert_array_equal(np.concatenate([w[key] for w in whole]), stream[key])
    assert stream["iterations"].max() > 5  # the segments really were continued
    # a budget smaller than a segment is honoured per problem
    short = prob.solve_stream(z0[:8], max_iter=3, segment=5)
    assert short["iterations"].max() <= 3


def test_local_quantities_only_when_asked():
    """``local=False`` skips the end-point quantities and changes nothing else."""
    law = get_law("decomposed")
    tab = simulate_table(law, n=60, seed=5)
    prob = engine.Problem(law, tab, tab["loss"].to_numpy(), loss="huber", delta=1e-3)
    z0 = scalefit.laws.sample_starts(law, 4, tab["loss"].to_numpy(), seed=1)
    on = prob.solve_raw(z0, max_iter=20)
    off = prob.solve_raw(z0, max_iter=20, local=False)
    for key in ("z", "objective", "iterations", "converged", "done", "lam", "nu"):
        np.testing.assert_array_equal(on[key], off[key])
    for key in ("grad", "gn", "meat", "tpub", "resid"):
        assert np.all(off[key] == 0.0) and np.any(on[key] != 0.0), key
    np.testing.assert_allclose(
        on["resid"][0],
        prob.observed - np.log(law.evaluate(law.to_public(on["z"][0], prob.refs), tab)),
        rtol=0,
        atol=1e-12,
    )


@engine.float64()
def test_input_logs_are_served_from_the_table_and_nothing_else():
    import jax.numpy as jnp

    x = jnp.arange(1.0, 5.0)
    logs = jnp.log(x) + 0.0
    xp = engine._InputLogs(jnp, [(x, logs)])
    assert xp.log(x) is logs  # an input column: the precomputed logs
    np.testing.assert_allclose(xp.log(2.0 * x), np.log(2.0 * np.arange(1.0, 5.0)))
    assert xp.exp is jnp.exp and xp.where is jnp.where  # everything else is jnp's
