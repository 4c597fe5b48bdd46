"""Each hold-out rule once: rows ordered by training compute, one row-count message, one noise."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from scalefit import fit
from scalefit.core.accounting import param_count_array, training_compute, training_flops
from scalefit.core.errors import ScaleFitError
from scalefit.fit.observation import (
    noise_cdf,
    noise_logpdf,
    noise_pdf,
    noise_ppf,
    standard_noise,
)
from scalefit.fit.split import compute_key, n_holdout, split_by_compute
from scalefit.laws import get_law

# Two shapes whose order by depth·width·tokens is the reverse of their order by compute: the deep
# narrow one has the larger ℓ·W·T, the shallow wide one ~4x the parameters at the same tokens.
SHAPES = pd.DataFrame(
    {
        "depth": [40, 2, 4, 8, 16, 6, 3, 5, 10, 12],
        "width": [256, 2048, 512, 512, 256, 1024, 768, 640, 384, 320],
        "tokens": 1e9,
    }
)


def test_rows_are_ordered_by_six_n_t_through_the_accounting():
    law = get_law("decomposed")
    key, values = compute_key(SHAPES, law)
    n = param_count_array(SHAPES["depth"], SHAPES["width"], vocab=32_000, norms=False)
    assert key == "flops_6NT"
    np.testing.assert_allclose(values, training_flops(n, SHAPES["tokens"]), rtol=1e-12)
    tab = SHAPES.assign(loss=3.0)
    lwt = (SHAPES["depth"] * SHAPES["width"] * SHAPES["tokens"]).to_numpy()
    assert lwt[0] > lwt[1] and values[1] > values[0]  # the two orders disagree on rows 0 and 1
    _, test, split_by, threshold = split_by_compute(tab, law, 0.1)
    assert split_by == "flops_6NT" and threshold == values.max()
    assert test[["depth", "width"]].values.tolist() == [[2, 2048]]


def test_a_law_reads_its_own_vocabulary_and_a_flops_or_params_column_wins():
    law = get_law("critical_depth")  # 50,257 untied: its own accounting
    _, values = compute_key(SHAPES, law)
    n = param_count_array(
        SHAPES["depth"], SHAPES["width"], vocab=50_257, embeddings="untied", norms=False
    )
    np.testing.assert_allclose(values, 6.0 * n * 1e9, rtol=1e-12)
    with_params = SHAPES.assign(params=1e6 * np.arange(1, 11))
    key, values = compute_key(with_params, law)
    assert key == "flops_6NT"
    np.testing.assert_allclose(values, 6e15 * np.arange(1, 11), rtol=1e-12)
    key, values = compute_key(with_params.assign(flops=7.0), law)
    assert key == "flops" and values.tolist() == [7.0] * 10
    assert training_compute({"params": [1.0]}) is None  # no tokens: compute is not fixed


def test_without_tokens_the_order_is_the_product_of_the_inputs():
    key, values = compute_key(pd.DataFrame({"depth": [3.0, 1.0]}), get_law("depth_power"))
    assert key == "depth" and values.tolist() == [3.0, 1.0]


def test_one_row_count_message_before_and_after_the_fit():
    law = get_law("chinchilla")  # 5 parameters
    message = (
        "The 'holdout' parameter of fit must leave more training rows than the law's 5 "
        "parameters; 0.5 leaves 5."
    )
    with pytest.raises(ScaleFitError) as direct:
        n_holdout(10, law, 0.5, who="fit")
    tab = pd.DataFrame({"params": np.geomspace(1e6, 1e9, 10), "tokens": 1e10, "loss": 3.0})
    with pytest.raises(ScaleFitError) as split:
        split_by_compute(tab, law, 0.5, who="fit")
    with pytest.raises(ScaleFitError) as from_fit:
        fit(tab, "chinchilla", holdout=0.5)
    assert str(direct.value) == str(split.value) == str(from_fit.value) == message
    with pytest.raises(ScaleFitError, match="'cuts' parameter of extrapolation_check"):
        split_by_compute(tab, law, 0.5, who="extrapolation_check", option="cuts")
    assert n_holdout(10, law, 0.4, who="fit") == 4


@pytest.mark.parametrize("nu", [None, 3.5])
def test_the_noise_family_is_the_normal_or_the_student_t(nu):
    z = np.linspace(-4.0, 4.0, 9)
    ref = stats.norm() if nu is None else stats.t(nu)
    np.testing.assert_allclose(noise_logpdf(z, nu), ref.logpdf(z), rtol=1e-12)
    np.testing.assert_allclose(noise_pdf(z, nu), ref.pdf(z), rtol=1e-12)
    np.testing.assert_allclose(noise_cdf(z, nu), ref.cdf(z), rtol=1e-12)
    np.testing.assert_allclose(noise_ppf(0.975, nu), ref.ppf(0.975), rtol=1e-12)
    draws = standard_noise(np.random.default_rng(0), nu, 20_000)
    assert stats.kstest(draws, ref.cdf).pvalue > 1e-3


def test_the_bayesian_likelihood_is_the_same_family():
    pytest.importorskip("numpyro")
    from scalefit.fit.observation import numpyro_noise

    y = np.array([-0.3, 0.0, 0.2])
    for nu in (None, 4.0):
        got = np.asarray(numpyro_noise(0.1, 0.05, nu).log_prob(y))
        want = noise_logpdf((y - 0.1) / 0.05, nu) - np.log(0.05)
        np.testing.assert_allclose(got, want, rtol=1e-4)
