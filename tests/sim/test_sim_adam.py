"""The toy trainer's Adam (flat buffers, a rate per student) against ``torch.optim.Adam``."""

import pytest

torch = pytest.importorskip("torch")

from scalefit.sim import ToyConfig  # noqa: E402
from scalefit.sim.model import StudentStack, Teacher  # noqa: E402
from scalefit.sim.train import _Adam, lr_factor  # noqa: E402


@pytest.mark.parametrize("lr_depth_scaling", [False, True])
def test_adam_matches_torch_optim_adam_row_by_row(lr_depth_scaling):
    cfg = ToyConfig(
        dtype="float64", depths=[2, 3, 5], replicas=2, teacher_depth=8, batch=32, lr=3e-2,
        lr_depth_scaling=lr_depth_scaling, steps=8, decay_frac=0.5, decay_to=0.1,
    )  # fmt: skip
    teacher, students = Teacher(cfg), StudentStack(cfg)
    depths = students.student_depths
    # the reference: every student's row of every tensor is its own parameter, in a param group
    # with that student's learning rate (what one torch.optim.Adam per student would do)
    rows, groups = [], []
    for p in students.params:
        for i in range(p.shape[0]):
            row = p[i].detach().clone()
            rows.append((p, i, row, row.clone()))
            lr = cfg.lr * (depths[i] ** -0.5 if lr_depth_scaling else 1.0)
            groups.append({"params": [row], "lr": lr, "base": lr})
    reference = torch.optim.Adam(groups, betas=(0.9, 0.999), eps=1e-8)
    adam = _Adam(students, cfg)
    gen = torch.Generator().manual_seed(0)
    for step in range(1, cfg.steps + 1):
        x = torch.randn(cfg.batch, cfg.width, generator=gen, dtype=torch.float64)
        students.loss_and_grad(x, teacher.target(x, cfg.loss))
        for p, i, row, _ in rows:
            row.grad = p.grad[i].clone()
        factor = lr_factor(cfg, step)
        for group in reference.param_groups:
            group["lr"] = group["base"] * factor
        reference.step()
        adam.step(factor)
    assert lr_factor(cfg, cfg.steps) < 1.0  # the schedule really decayed
    moved = 0.0
    for p, i, row, start in rows:
        torch.testing.assert_close(p[i], row, rtol=1e-12, atol=1e-15)
        moved = max(moved, float((row - start).abs().max()))
    assert moved > 1e-3  # the optimiser really moved the parameters
    # the parameters the model computes with are the ones the optimiser moved (views, in place)
    for layer in students.layers:
        for t in layer:
            assert any(t is p for p in students.params)
    assert all(p.grad is None for p in students.params)


def test_adam_state_round_trips():
    cfg = ToyConfig(dtype="float64", depths=[2, 3], teacher_depth=8, batch=16)
    teacher, students = Teacher(cfg), StudentStack(cfg)
    adam = _Adam(students, cfg)
    x = torch.randn(
        cfg.batch, cfg.width, generator=torch.Generator().manual_seed(1), dtype=torch.float64
    )
    students.loss_and_grad(x, teacher.target(x, cfg.loss))
    adam.step(1.0)
    state = {
        k: [t.clone() for t in v] if isinstance(v, list) else v for k, v in adam.state().items()
    }
    other = _Adam(StudentStack(cfg), cfg)
    other.load(state)
    assert other.t == 1
    for a, b in zip(adam.m + adam.v, other.m + other.v, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert any(float(v.abs().max()) > 0 for v in other.v)
