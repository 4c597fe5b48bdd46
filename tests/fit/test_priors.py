import warnings

import numpy as np
import pytest

pytest.importorskip("numpyro")

from scalefit.core.errors import ScaleFitError  # noqa: E402
from scalefit.fit.priors import FAMILIES, numpyro_distribution, scipy_distribution  # noqa: E402

SPEC = {
    "loc": 0.5,
    "scale": 1.0,
    "df": 4.0,
    "low": 0.1,
    "high": 2.0,
    "rate": 2.0,
    "concentration": 3.0,
    "fraction": 1.0,
}


@pytest.mark.parametrize("name", [k for k, f in FAMILIES.items() if f.numpyro is not None])
def test_numpyro_and_scipy_constructors_are_the_same_prior(name):
    spec = {"dist": name, **SPEC}
    x = np.array([0.2, 0.7, 1.5])
    want = scipy_distribution(spec).logpdf(x)
    with warnings.catch_warnings():  # 1.5 lies outside Uniform(0, 1): both sides give -inf
        warnings.filterwarnings("ignore", "Out-of-support values", UserWarning)
        got = np.asarray(numpyro_distribution(spec).log_prob(x), dtype=float)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_validation_table_is_read_from_the_family_table():
    from scalefit.fit.priors import check_prior

    for name, family in FAMILIES.items():
        for key in family.required:
            spec = {"dist": name, **dict.fromkeys(family.required, 1.0)}
            del spec[key]
            with pytest.raises(ScaleFitError, match=rf"missing key\(s\) \['{key}'\]"):
                check_prior("x", spec, "free")
