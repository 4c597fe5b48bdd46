"""The plain way: one ``nn.Module`` per student, the teacher recomputed for every student.

This is how the original scripts train the toy. It serves as the baseline of ``bench_sim.py`` and
as the reference of the simulator's correctness tests (``tests/sim/test_sim.py``: the stacked
students must follow it step for step); it is not part of the package.
"""

from __future__ import annotations

import torch
from torch import nn

from scalefit.sim.config import ToyConfig
from scalefit.sim.model import StudentStack, Teacher, rmsnorm


class PlainBlock(nn.Module):
    """``h + W_proj relu(W_fc rmsnorm(h) + b)²`` with ``nn.Linear`` layers."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = nn.Linear(width, 4 * width)
        self.proj = nn.Linear(4 * width, width, bias=False)

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # noqa: D102
        return h + self.proj(torch.relu(self.fc(rmsnorm(h))) ** 2)


class PlainNet(nn.Module):
    """A residual stack of :class:`PlainBlock` with a bias-free head."""

    def __init__(self, depth: int, width: int, classes: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(PlainBlock(width) for _ in range(depth))
        self.head = nn.Linear(width, classes, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        h = rmsnorm(x)
        for block in self.blocks:
            h = block(h)
        return self.head(rmsnorm(h))


def _load(net: PlainNet, fc_w, fc_b, proj_w, head) -> PlainNet:
    with torch.no_grad():
        for i, block in enumerate(net.blocks):
            block.fc.weight.copy_(fc_w[i].T)
            block.fc.bias.copy_(fc_b[i].reshape(-1))
            block.proj.weight.copy_(proj_w[i].T)
        net.head.weight.copy_(head.T)
    return net


def plain_teacher(teacher: Teacher, config: ToyConfig) -> PlainNet:
    """Return a :class:`PlainNet` copy of a :class:`~scalefit.sim.model.Teacher` (same weights)."""
    net = PlainNet(teacher.depth, config.width, config.classes).to(teacher.head)
    layers = teacher.layers
    net = _load(net, layers["fc_w"], layers["fc_b"], layers["proj_w"], teacher.head)
    return net.requires_grad_(False)


def plain_students(stack: StudentStack, config: ToyConfig) -> list[PlainNet]:
    """Return one :class:`PlainNet` per student of ``stack``, with the same initial weights."""
    nets = []
    for i, depth in enumerate(stack.student_depths):
        w = stack.student_weights(i)
        net = PlainNet(depth, config.width, config.classes).to(stack.params[0])
        nets.append(_load(net, w["fc_w"], w["fc_b"], w["proj_w"], w["head"]))
    return nets


def plain_step(teacher_net: PlainNet, students, optimizers, x, temperature: float) -> list[float]:
    """Run one training step of every student, recomputing the teacher for each (KL loss)."""
    losses = []
    for net, opt in zip(students, optimizers, strict=True):
        with torch.no_grad():
            logp = torch.log_softmax(teacher_net(x) / temperature, dim=-1)
        logq = torch.log_softmax(net(x), dim=-1)
        loss = (logp.exp() * (logp - logq)).sum(-1).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def plain_setup(config: ToyConfig):
    """Return teacher net, student nets and Adam optimisers seeded like the fast path."""
    teacher = Teacher(config)
    stack = StudentStack(config)
    nets = plain_students(stack, config)
    opts = []
    for net, depth in zip(nets, stack.student_depths, strict=True):
        lr = config.lr * (depth**-0.5 if config.lr_depth_scaling else 1.0)
        opts.append(torch.optim.Adam(net.parameters(), lr=lr))
    return plain_teacher(teacher, config), nets, opts
