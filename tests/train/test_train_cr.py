import math

import pytest

torch = pytest.importorskip("torch")

from train_support import _one_torch_thread  # noqa: E402, F401 - autouse fixture

from scalefit.probes.cr import coherence, cr_measure  # noqa: E402
from scalefit.train.cr import aux_layers, cr_loss, ortho_loss, regulariser  # noqa: E402


def test_coherence_is_in_unit_interval_and_one_for_identical_inputs():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 32, 8, generator=g)
    y = torch.tanh(3 * x) + 0.5 * torch.randn(6, 32, 8, generator=g)
    coh = coherence(x, y)
    assert coh.shape == (8, 32 // 2 + 1)
    assert float(coh.min()) >= 0 and float(coh.max()) <= 1 + 1e-6
    assert cr_measure(x, x) == pytest.approx(1.0, abs=1e-4)
    assert cr_measure(x, 2.0 * x + 1.0) == pytest.approx(1.0, abs=1e-4)  # affine-invariant
    independent = cr_measure(x, torch.randn(6, 32, 8, generator=g))
    assert independent < cr_measure(x, y) < 1.0


def test_coherence_matches_a_direct_complex_computation():
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(4, 10, 3, generator=g), torch.randn(4, 10, 3, generator=g)

    def ecf(h):
        z = (h - h.mean(1, keepdim=True)) / (h.std(1, keepdim=True) + 1e-8)
        p = z.softmax(1).double()  # (B, T, D)
        t = torch.arange(10, dtype=torch.float64)
        k = torch.arange(6, dtype=torch.float64)
        basis = torch.exp(-1j * 2 * math.pi * torch.outer(k, t) / 10)  # (K, T)
        return torch.einsum("btd,kt->bdk", p.to(torch.complex128), basis)

    cx, cy = ecf(x), ecf(y)
    sxy = (cx * cy.conj()).mean(0)
    expected = sxy.abs() ** 2 / ((cx.abs() ** 2).mean(0) * (cy.abs() ** 2).mean(0))
    assert torch.allclose(coherence(x, y).double(), expected, atol=1e-5)


def test_aux_layers_reproduce_the_paper_at_depth_12():
    assert aux_layers(12) == ([2, 4, 6, 8], [3, 5, 7, 9, 10])
    assert aux_layers(2) == ([], [])
    cr, ortho = aux_layers(20)
    assert not set(cr) & set(ortho) and max(ortho) == 18


def test_ortho_loss_zero_for_orthogonal_channels_and_positive_otherwise():
    q, _ = torch.linalg.qr(torch.randn(16, 4, generator=torch.Generator().manual_seed(0)))
    h = q.unsqueeze(0).repeat(2, 1, 1)  # (B, T, D) with orthonormal channels
    assert float(ortho_loss(h)) == pytest.approx(0.0, abs=1e-10)
    assert float(ortho_loss(h + 0.5)) > 0.01


def test_cr_loss_is_differentiable_and_includes_the_energy_term_early():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(4, 16, 8, generator=g)
    y = (x + 0.1 * torch.randn(4, 16, 8, generator=g)).requires_grad_()
    early = cr_loss(x, 3 * y, layer=2, depth=12, iteration=0)
    late = cr_loss(x, 3 * y, layer=2, depth=12, iteration=801)
    assert early.item() >= late.item() > 0
    late.backward()
    assert y.grad is not None and torch.isfinite(y.grad).all()
    io = [(x, y)] * 12
    total = regulariser(io, 1000)
    assert total.item() > 0
    assert float(regulariser(io, 1000, use_cr=False, use_ortho=False)) == 0.0


@pytest.mark.parametrize("batch", [1, 2, 8, 64])
def test_cr_of_unrelated_layers_depends_on_the_batch_and_the_debiased_cr_does_not(batch):
    # T = 128 gives K = 65 frequencies; k = 0 is 1 by construction, the others ≈ 1/B
    g = torch.Generator().manual_seed(batch)
    x, y = torch.randn(batch, 128, 64, generator=g), torch.randn(batch, 128, 64, generator=g)
    expected = (1 + 64 / batch) / 65
    assert cr_measure(x, y) == pytest.approx(expected, rel=0.06 if batch > 1 else 0.01)
    if batch == 1:
        with pytest.raises(ValueError, match="batch of at least 2"):
            cr_measure(x, y, debias=True)
        return
    assert cr_measure(x, y, debias=True) == pytest.approx(1 / 65, abs=0.01)
    assert cr_measure(x, x, debias=True) == pytest.approx(1.0, abs=5e-3)  # ε of Listing 2


def test_debiased_cr_agrees_across_batch_sizes_where_the_raw_cr_does_not():
    g = torch.Generator().manual_seed(3)
    raw, debiased = [], []
    for batch in (4, 16, 64):
        x = torch.randn(batch, 128, 32, generator=g)
        y = x + torch.randn(batch, 128, 32, generator=g)  # partly coherent
        raw.append(cr_measure(x, y))
        debiased.append(cr_measure(x, y, debias=True))
    # measured: raw ≈ 0.50 / 0.40 / 0.385, debiased ≈ 0.33 / 0.36 / 0.375 (first-order correction)
    assert raw[0] - raw[-1] > 0.08  # the raw measure falls with B
    assert max(debiased) - min(debiased) < 0.5 * (raw[0] - raw[-1])
