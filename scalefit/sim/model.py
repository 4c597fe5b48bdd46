"""The teacher and the stacked students of the toy, in plain torch tensors.

Block (pre-norm, no learned gain): ``h ← h + relu(rmsnorm(h) @ W_fc + b_fc)² @ W_proj`` with
W_fc: width → 4·width (with bias), W_proj: 4·width → width (no bias). Output:
``logits = rmsnorm(h_L) @ head``. Weights are stored input-major (``x @ W``), so a PyTorch
``nn.Linear`` weight is the transpose of ours.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .config import ToyConfig


def rmsnorm(h: torch.Tensor) -> torch.Tensor:
    """RMS normalisation over the last dimension, without a gain (eps = machine epsilon)."""
    return F.rms_norm(h, (h.shape[-1],), eps=torch.finfo(h.dtype).eps)


def _uniform(gen: torch.Generator, shape: tuple, fan_in: int, dtype) -> torch.Tensor:
    """PyTorch's default ``nn.Linear`` init: U(−1/√fan_in, 1/√fan_in) (weights and bias)."""
    bound = 1.0 / math.sqrt(fan_in)
    return (torch.rand(shape, generator=gen, dtype=dtype) * 2 - 1) * bound


class Teacher:
    """A fixed deep residual teacher (never trained).

    Parameters
    ----------
    config : ToyConfig
        Uses ``teacher_mode``, ``rho``, ``teacher_depth``, ``width``, ``classes``,
        ``temperature``, ``seed``, ``dtype``.
    device : torch.device, optional

    Notes
    -----
    Layer l's tensors are √ρ·shared + √(1−ρ)·own_l, with shared and own drawn from the PyTorch
    default init; ρ = 0 is the paper's independent teacher, ρ = 1 its tied one (all layers equal
    to one draw). Every W_proj is then multiplied by 1/√ℓ*.
    """

    def __init__(self, config: ToyConfig, device=None) -> None:
        dtype = getattr(torch, config.dtype)
        gen = torch.Generator().manual_seed(_stream(config.seed, 1))
        L, w, hidden = config.teacher_depth, config.width, 4 * config.width
        shapes = {"fc_w": (w, hidden, w), "fc_b": (hidden, w), "proj_w": (hidden, w, hidden)}
        rho = config.effective_rho
        self.layers: dict[str, torch.Tensor] = {}
        for name, (*shape, fan_in) in shapes.items():
            shared = _uniform(gen, (1, *shape), fan_in, dtype)
            if rho >= 1.0:
                tensor = shared.expand(L, *shape).clone()
            else:
                own = _uniform(gen, (L, *shape), fan_in, dtype)
                tensor = math.sqrt(rho) * shared + math.sqrt(1.0 - rho) * own
            self.layers[name] = tensor.to(device)
        self.layers["proj_w"] /= math.sqrt(L)
        self.layers["fc_b"] = self.layers["fc_b"].unsqueeze(1)  # (L, 1, hidden)
        self.head = _uniform(gen, (w, config.classes), w, dtype).to(device)
        self.temperature = float(config.temperature)
        self.depth = L

    def hidden(self, x: torch.Tensor, *, all_states: bool = False):
        """Residual states: the final one ``(B, W)`` or all of them ``(L+1, B, W)``."""
        return student_hidden(self.layers, x, all_states=all_states)

    @torch.no_grad()
    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """Tempered logits ``rmsnorm(h_L) @ head / τ``, shape ``(B, classes)``."""
        return rmsnorm(self.hidden(x)) @ self.head / self.temperature

    @torch.no_grad()
    def target(self, x: torch.Tensor, loss: str) -> torch.Tensor:
        """Return the training target: log-probabilities (KL) or rmsnorm(h_L) (MSE)."""
        if loss == "kl":
            return torch.log_softmax(self.logits(x), dim=-1)
        return rmsnorm(self.hidden(x))


def _stream(seed: int, k: int) -> int:
    """Independent sub-seeds for teacher (1), students (2), data (3) and test set (4)."""
    return (seed * 1_000_003 + k * 7_919) % (2**63)


class StudentStack:
    """Every student (depths × replicas) of one run, trained together as stacked tensors.

    Students are ordered by depth, deepest first, so at layer l the active students are the first
    k_l. Parameters are kept per layer with a leading student axis, so one batched matmul serves
    every student and finished students drop out of the stack. :meth:`loss_and_grad` runs the
    forward and a hand-written backward pass (checked against autograd in the tests), which avoids
    autograd's per-op overhead on these small tensors.

    Parameters
    ----------
    config : ToyConfig
    device : torch.device, optional
    """

    def __init__(self, config: ToyConfig, device=None) -> None:
        dtype = getattr(torch, config.dtype)
        gen = torch.Generator().manual_seed(_stream(config.seed, 2))
        depths = sorted(config.depths, reverse=True)
        self.students = [(d, r) for d in depths for r in range(config.replicas)]
        self.student_depths = [d for d, _ in self.students]
        self.max_depth = self.student_depths[0]
        self.block = config.block
        self.mse = config.loss == "mse"
        w, hidden = config.width, 4 * config.width
        self.active = [sum(d > i for d in self.student_depths) for i in range(self.max_depth)]
        self.params: list[torch.Tensor] = []
        self.layers: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        for k in self.active:
            fc_w = _uniform(gen, (k, w, hidden), w, dtype)
            fc_b = _uniform(gen, (k, 1, hidden), w, dtype)
            proj_w = torch.zeros(k, hidden, w, dtype=dtype)  # zero-initialised branch
            self.layers.append(tuple(t.to(device) for t in (fc_w, fc_b, proj_w)))
            self.params.extend(self.layers[-1])
        self.head = None
        if not self.mse:  # zero head: the untrained student predicts the uniform distribution
            shape = (len(self.students), w, config.classes)
            self.head = torch.zeros(shape, dtype=dtype, device=device)
            self.params.append(self.head)

    def final_states(self, x: torch.Tensor, caches: list | None = None) -> torch.Tensor:
        """Last residual state of every student, shape ``(S, B, W)`` (before the final norm)."""
        h = rmsnorm(x).expand(len(self.students), *x.shape)
        finished = []
        for layer, weights in enumerate(self.layers):
            k = self.active[layer]
            if k < h.shape[0]:
                finished.append(h[k:])
                h = h[:k]
            h = self._block(h, weights, caches)
        finished.append(h)
        return torch.cat(finished[::-1], dim=0)

    def _block(self, h, weights, caches):
        out1, c1 = _branch(h, *weights, keep=caches is not None)
        if self.block == "euler":
            if caches is not None:
                caches.append((c1,))
            return h + out1
        out2, c2 = _branch(h + 0.5 * out1, *weights, keep=caches is not None)
        if caches is not None:
            caches.append((c1, c2))
        return h + out2

    def outputs(self, x: torch.Tensor) -> torch.Tensor:
        """Log-probabilities ``(S, B, classes)`` (KL) or final normalised states (MSE)."""
        z = rmsnorm(self.final_states(x))
        if self.mse:
            return z
        return torch.log_softmax(torch.bmm(z, self.head), dim=-1)

    def losses(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Per-student loss ``(S,)``: KL(teacher ‖ student) batch mean, or the MSE."""
        return toy_loss(self.outputs(x), target, mse=self.mse)

    @torch.no_grad()
    def loss_and_grad(
        self, x: torch.Tensor, target: torch.Tensor, *, micro_batch: int = 0
    ) -> torch.Tensor:
        """Per-student losses ``(S,)``; sets ``.grad`` of every parameter (no autograd).

        ``micro_batch > 0`` runs the batch in chunks of that size and sums their gradients: the
        same numbers up to rounding, with a working set that stays in the CPU caches.
        """
        batch = x.shape[0]
        if micro_batch <= 0 or micro_batch >= batch:
            return self._accumulate(x, target, 1.0, first=True)
        losses = None
        for i, (xc, tc) in enumerate(
            zip(x.split(micro_batch), target.split(micro_batch), strict=True)
        ):
            part = self._accumulate(xc, tc, xc.shape[0] / batch, first=i == 0)
            losses = part if losses is None else losses + part
        return losses

    def _accumulate(self, x, target, weight: float, first: bool) -> torch.Tensor:
        """Losses × weight of one chunk; adds weight × its gradients to ``.grad``."""
        caches: list = []
        h_last = self.final_states(x, caches)
        z, r = _rms(h_last)
        if self.mse:
            diff = z - target
            losses = diff.square().mean(dim=(1, 2))
            g_z = diff * (2.0 * weight / diff[0].numel())
        else:
            logits = torch.bmm(z, self.head)
            logq = torch.log_softmax(logits, dim=-1)
            p = target.exp()
            losses = (p * (target - logq)).sum(-1).mean(-1)
            g_logits = (logq.exp() - p) * (weight / x.shape[0])
            _set_grad(self.head, torch.bmm(z.mT, g_logits), first)
            g_z = torch.bmm(g_logits, self.head.mT)
        g = _rms_backward(z, r, g_z)
        for layer in range(self.max_depth - 1, -1, -1):
            k = self.active[layer]
            grads = self._block_backward(g[:k], caches[layer], self.layers[layer], layer > 0)
            for p, grad in zip(self.layers[layer], grads, strict=True):
                _set_grad(p, grad, first)
        return losses * weight

    def _block_backward(self, g_out, cache, weights, need_input):
        if self.block == "euler":
            g_in, grads = _branch_backward(cache[0], g_out, weights, need_input)
            if need_input:
                g_out += g_in
            return grads
        g_mid, grads2 = _branch_backward(cache[1], g_out, weights, True)
        g_in, grads1 = _branch_backward(cache[0], 0.5 * g_mid, weights, need_input)
        if need_input:
            g_out += g_mid + g_in
        return [a + b for a, b in zip(grads1, grads2, strict=True)]

    def student_weights(self, index: int) -> dict[str, torch.Tensor]:
        """Detached weights of one student: per-layer stacks and the head."""
        depth = self.student_depths[index]
        out = {
            name: torch.stack([self.layers[layer][j][index] for layer in range(depth)])
            for j, name in enumerate(("fc_w", "fc_b", "proj_w"))
        }
        out["head"] = None if self.head is None else self.head[index]
        return out

    def state_dict(self) -> list[torch.Tensor]:
        """Return copies of the parameter tensors, in a fixed order."""
        return [p.detach().clone() for p in self.params]

    def load_state_dict(self, tensors: list[torch.Tensor]) -> None:
        """Copy saved parameter tensors in place."""
        with torch.no_grad():
            for p, t in zip(self.params, tensors, strict=True):
                p.copy_(t)


def toy_loss(out: torch.Tensor, target: torch.Tensor, *, mse: bool) -> torch.Tensor:
    """Loss over the last two axes: the MSE of normalised states, or KL(teacher ‖ student).

    ``out`` and ``target`` are final normalised states (MSE) or log-probabilities (KL).
    """
    if mse:
        return (out - target).square().mean(dim=(-2, -1))
    return (target.exp() * (target - out)).sum(-1).mean(-1)


def _set_grad(p: torch.Tensor, grad: torch.Tensor, first: bool) -> None:
    if first or p.grad is None:
        p.grad = grad
    else:
        p.grad += grad


def _rms(h: torch.Tensor):
    """RMS-normalised ``h`` and the inverse RMS ``r`` (same eps as :func:`rmsnorm`)."""
    r = torch.rsqrt(h.square().mean(-1, keepdim=True) + torch.finfo(h.dtype).eps)
    return h * r, r


def _rms_backward(y: torch.Tensor, r: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Gradient through y = h·r(h): r·(g − y·mean(g·y)) (exact, eps included)."""
    return r * (g - y * (g * y).mean(-1, keepdim=True))


def _branch(h, fc_w, fc_b, proj_w, *, keep: bool):
    """Batched branch relu(rmsnorm(h) W_fc + b)² W_proj over a leading student axis."""
    x, r = _rms(h)
    m = torch.baddbmm(fc_b, x, fc_w).clamp_min_(0.0)
    a = m * m
    return torch.bmm(a, proj_w), ((x, r, m, a) if keep else None)


def _branch_backward(cache, g, weights, need_input: bool):
    """Vector–Jacobian product of :func:`_branch`: (grad wrt h or None, weight grads)."""
    x, r, m, a = cache
    fc_w, _, proj_w = weights
    g_proj = torch.bmm(a.mT, g)
    g_u = torch.bmm(g, proj_w.mT).mul_(m).mul_(2.0)
    grads = [torch.bmm(x.mT, g_u), g_u.sum(1, keepdim=True), g_proj]
    if not need_input:
        return None, grads
    return _rms_backward(x, r, torch.bmm(g_u, fc_w.mT)), grads


@torch.no_grad()
def student_hidden(
    weights: dict, x: torch.Tensor, *, block: str = "euler", all_states: bool = True
) -> torch.Tensor:
    """Residual states of one student (see ``student_weights``) or of the teacher's layers.

    All of them ``(L+1, B, W)``, or with ``all_states=False`` the last one ``(B, W)``.
    """
    h = rmsnorm(x)
    states = [h]
    for fc_w, fc_b, proj_w in zip(weights["fc_w"], weights["fc_b"], weights["proj_w"], strict=True):

        def act(z, fc_w=fc_w, fc_b=fc_b):
            return torch.addmm(fc_b, rmsnorm(z), fc_w).relu_().square_()

        z = h + 0.5 * (act(h) @ proj_w) if block == "midpoint" else h
        h = torch.addmm(h, act(z), proj_w)
        if all_states:
            states.append(h)
    return torch.stack(states) if all_states else h
