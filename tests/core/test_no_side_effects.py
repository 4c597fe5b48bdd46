"""Importing scalefit, fitting and running the CLI leave the user's process as it was.

JAX's settings (float64, the compilation cache), the default dtype and the warnings machinery
are read before and after, in a fresh interpreter (the user's process) and in this one.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

import scalefit
from scalefit.cli import main
from scalefit.fit import _programs, engine
from scalefit.fit.synthetic import simulate_table

STATE = """
def state():
    import warnings
    import jax
    import jax.numpy as jnp
    return {
        "dtype": str(jnp.ones(1).dtype),
        "x64": bool(jax.config.jax_enable_x64),
        "cache_dir": jax.config.jax_compilation_cache_dir,
        "min_compile": jax.config.jax_persistent_cache_min_compile_time_secs,
        "showwarning": repr(warnings.showwarning),
        "filters": repr(warnings.filters),
    }
"""

SCRIPT = (
    STATE
    + """
import json, sys
# Third-party packages scalefit uses may add warning filters when first imported (scipy and
# pandas at their floors do); that is theirs, so they are imported before the baseline.
import lmfit, matplotlib, pandas, scipy.linalg, scipy.optimize, scipy.stats  # noqa: F401
before = state()
import scalefit
from scalefit.cli import main
from scalefit.fit.synthetic import simulate_table
imported = state()
tab = simulate_table("chinchilla", n=40, seed=1)
res = scalefit.fit(tab, "chinchilla", starts=8, seed=0, progress=False)
fitted = state()
tab.to_csv(sys.argv[1], index=False)
code = main(["fit", sys.argv[1], "--law", "chinchilla", "--starts", "8", "--no-progress"])
print(json.dumps({"before": before, "imported": imported, "fitted": fitted, "cli": state(),
                  "code": code, "converged": bool(res.converged)}))
"""
)


def _state() -> dict:
    scope: dict = {}
    exec(STATE, scope)  # noqa: S102 - the test's own source text
    return scope["state"]()


def test_fresh_process_is_as_it_was(tmp_path):
    env = {"SCALEFIT_JAX_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "table.csv")],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, **env},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["code"] == 0 and out["converged"]
    assert out["before"]["dtype"] == "float32" and out["before"]["cache_dir"] is None
    for when in ("imported", "fitted", "cli"):
        assert out[when] == out["before"], when
    # the solver's programs were compiled into scalefit's cache all the same
    assert list((tmp_path / "cache").glob("*-cache")), "no compiled program in the cache"
    assert list((tmp_path / "cache" / _programs.PROGRAM_DIR).glob("*.jaxexport"))


def test_this_process_is_as_it_was(tmp_path, monkeypatch):
    monkeypatch.setenv("SCALEFIT_JAX_CACHE", str(tmp_path / "cache"))
    tab = simulate_table("chinchilla", n=50, seed=2)
    tab.to_csv(tmp_path / "t.csv", index=False)
    before = _state()
    filters = list(warnings.filters)
    res = scalefit.fit(tab, "chinchilla", starts=8, seed=0, progress=False)
    assert res.converged and _state() == before
    code = main(["fit", str(tmp_path / "t.csv"), "--law", "chinchilla", "--starts", "8"])
    assert code == 0 and _state() == before
    assert list(warnings.filters) == filters
    assert before["dtype"] == "float32" and not before["x64"]


def test_a_users_program_never_goes_to_our_cache(tmp_path, monkeypatch):
    import jax
    import jax.numpy as jnp

    ours = tmp_path / "ours"
    monkeypatch.setenv("SCALEFIT_JAX_CACHE", str(ours))
    old = jax.config.jax_persistent_cache_min_compile_time_secs
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)  # cache everything
    try:
        for k in [k for k in engine._CACHE if k[0] == "program"]:  # as a fresh process
            del engine._CACHE[k]
        tab = simulate_table("chinchilla", n=70, seed=3)
        scalefit.fit(tab, "chinchilla", starts=8, seed=0, progress=False)
        compiled = set(ours.glob("*-cache"))
        assert compiled, "our program was not cached"
        assert jax.config.jax_compilation_cache_dir is None
        assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.0

        @jax.jit
        def users_own(x):
            return jnp.cos(x) * 7.0 + 1.0

        users_own(jnp.arange(11.0)).block_until_ready()
        assert set(ours.glob("*-cache")) == compiled
        # the check can fail: the same kind of program compiled inside our block is cached
        with _programs.compile_cache():
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
            jax.jit(lambda x: jnp.sin(x) * 5.0)(jnp.arange(13.0)).block_until_ready()
        assert set(ours.glob("*-cache")) - compiled
        assert jax.config.jax_compilation_cache_dir is None
    finally:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", old)


def test_a_users_cache_folder_is_used_and_kept(tmp_path, monkeypatch):
    import jax

    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    monkeypatch.setenv("SCALEFIT_JAX_CACHE", str(ours))
    old = jax.config.jax_persistent_cache_min_compile_time_secs
    jax.config.update("jax_compilation_cache_dir", str(theirs))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    try:
        for k in [k for k in engine._CACHE if k[0] == "program"]:
            del engine._CACHE[k]
        tab = simulate_table("chinchilla", n=90, seed=4)
        scalefit.fit(tab, "chinchilla", starts=8, seed=0, progress=False)
        assert jax.config.jax_compilation_cache_dir == str(theirs)
        assert list(theirs.glob("*-cache")), "our program skipped the user's cache"
        assert not list(ours.glob("*-cache"))
    finally:
        jax.config.update("jax_compilation_cache_dir", None)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", old)
        from jax.experimental.compilation_cache import compilation_cache

        compilation_cache.reset_cache()


@pytest.mark.parametrize("wide", [False, True])
def test_a_users_float64_setting_is_kept(wide):
    import jax
    import jax.numpy as jnp

    tab = simulate_table("chinchilla", n=45, seed=5)
    with jax.enable_x64(wide):
        res = scalefit.fit(tab, "chinchilla", starts=8, seed=0, progress=False)
        assert bool(jax.config.jax_enable_x64) is wide
        assert jnp.ones(1).dtype == (np.float64 if wide else np.float32)
    assert res.converged
