import math
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from _sim_baseline import plain_setup, plain_step  # noqa: E402

from scalefit.core.errors import ScaleFitError  # noqa: E402
from scalefit.probes import summarize_states  # noqa: E402
from scalefit.sim import ToyConfig, build_config, preset  # noqa: E402
from scalefit.sim.model import StudentStack, Teacher, student_hidden  # noqa: E402
from scalefit.sim.train import _test_set, evaluate, lr_factor, train_toy  # noqa: E402
from scalefit.sweep import SweepSpec, run_sweep  # noqa: E402

TINY = dict(
    teacher_depth=16,
    depths=[2, 4],
    batch=64,
    steps=30,
    test_size=512,
    eval_steps=[10, 20],
)


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.mark.parametrize("temperature", [1.0, 0.1])
def test_untrained_student_kl_is_log_classes_minus_teacher_entropy(temperature):
    cfg = ToyConfig(temperature=temperature, test_size=4096, depths=[6, 12])
    teacher, students = Teacher(cfg), StudentStack(cfg)
    x, target, entropy = _test_set(cfg, teacher, None)
    kl = evaluate(students, x, target)
    assert np.allclose(kl.numpy(), math.log(128) - entropy, atol=1e-3)
    if temperature == 1.0:  # the reference's figure: about 4.69 nats at τ = 1
        assert 4.5 < entropy < math.log(128)


def test_teacher_increment_angles_independent_vs_tied():
    x = torch.randn(512, 32, generator=torch.Generator().manual_seed(0))
    angles = {}
    for mode in ("independent", "tied"):
        teacher = Teacher(ToyConfig(teacher_mode=mode))
        angles[mode] = summarize_states(teacher.hidden(x, all_states=True))["dtheta_mid"]
    assert abs(angles["independent"] - math.pi / 2) < 0.05
    assert angles["tied"] < 0.05


def test_correlated_teacher_interpolates_and_matches_endpoints():
    def weights(**kw):
        return Teacher(ToyConfig(teacher_depth=8, **kw)).layers["fc_w"]

    assert torch.equal(weights(teacher_mode="correlated", rho=0.0), weights())
    assert torch.equal(weights(teacher_mode="correlated", rho=1.0), weights(teacher_mode="tied"))
    w = weights(teacher_mode="correlated", rho=0.5)
    corr = np.corrcoef(w[0].flatten().numpy(), w[1].flatten().numpy())[0, 1]
    assert 0.4 < corr < 0.6
    assert abs(float(w.std()) - float(weights().std())) < 0.01 * float(weights().std())


@pytest.mark.parametrize("kw", [{}, {"block": "midpoint"}, {"loss": "mse"}])
def test_manual_backward_matches_autograd(kw):
    cfg = ToyConfig(depths=[2, 3, 5], replicas=2, dtype="float64", teacher_depth=8, **kw)
    teacher, stack = Teacher(cfg), StudentStack(cfg)
    gen = torch.Generator().manual_seed(1)
    for p in stack.params:  # move away from the zero init so every gradient is non-trivial
        p.copy_(0.2 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    x = torch.randn(64, 32, generator=gen, dtype=torch.float64)
    target = teacher.target(x, cfg.loss)
    losses = stack.loss_and_grad(x, target)
    manual = [p.grad.clone() for p in stack.params]
    for p in stack.params:
        p.grad = None
        p.requires_grad_(True)
    auto_losses = stack.losses(x, target)
    auto_losses.sum().backward()
    assert torch.allclose(losses, auto_losses.detach(), rtol=1e-12)
    for got, p in zip(manual, stack.params, strict=True):
        assert torch.allclose(got, p.grad, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("lr_depth_scaling", [False, True])
def test_stacked_training_follows_plain_per_student_loop(lr_depth_scaling):
    cfg = ToyConfig(
        dtype="float64", depths=[2, 5], teacher_depth=12, batch=32, lr=3e-3,
        lr_depth_scaling=lr_depth_scaling, steps=6, test_size=64, eval_steps=[1, 2, 3, 4, 5, 6],
    )  # fmt: skip
    run = train_toy(cfg)
    fast = pd.DataFrame(run.rows).pivot(index="steps", columns="depth", values="train_loss")
    teacher_net, nets, opts = plain_setup(cfg)
    from scalefit.sim.model import _stream

    data = torch.Generator().manual_seed(_stream(cfg.seed, 3))
    for step in range(1, cfg.steps + 1):
        x = torch.randn(cfg.batch, cfg.width, generator=data, dtype=torch.float64)
        losses = plain_step(teacher_net, nets, opts, x, cfg.temperature)
        expected = dict(zip([5, 2], losses, strict=True))
        for depth in (2, 5):
            assert fast.loc[step, depth] == pytest.approx(expected[depth], rel=1e-9)
    # and the students really learned something
    assert fast.iloc[-1].max() < fast.iloc[0].min()


def test_same_seed_same_numbers_and_different_seed_differs():
    a = train_toy(ToyConfig(**TINY, seed=3)).rows
    b = train_toy(ToyConfig(**TINY, seed=3)).rows
    c = train_toy(ToyConfig(**TINY, seed=4)).rows
    assert a == b
    assert [r["test_loss"] for r in a] != [r["test_loss"] for r in c]


def test_lr_schedule():
    cfg = ToyConfig(steps=100, decay_frac=0.2, decay_to=0.1)
    assert lr_factor(cfg, 1) == 1.0 and lr_factor(cfg, 80) == 1.0
    assert lr_factor(cfg, 90) == pytest.approx(0.55)
    assert lr_factor(cfg, 100) == pytest.approx(0.1)
    assert lr_factor(ToyConfig(steps=100), 100) == 1.0


def test_evaluation_steps_and_presets():
    assert ToyConfig(steps=40_000).evaluation_steps()[-1] == 40_000
    assert len(ToyConfig(steps=40_000).evaluation_steps()) == 12
    cpu = preset("cpu")
    assert cpu.batch == 256 and cpu.decay_frac > 0 and cpu.steps in cpu.evaluation_steps()
    assert preset("cpu", steps=2000).evaluation_steps() == [500, 1000, 1500, 2000]
    short = build_config({"preset": "cpu", "steps": 100}).evaluation_steps()
    assert short[-1] == 100 and max(short) == 100  # none left: the default log-spaced points
    paper = preset("paper")
    assert (paper.batch, paper.lr, paper.steps, paper.teacher_depth) == (1024, 6e-4, 40_000, 128)
    assert paper.depths == [6, 12, 16, 24, 32, 48]


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({"nonsense": 1}, "unknown key .nonsense."),
        ({"teacher_mode": "shared"}, "teacher_mode"),
        ({"teacher_mode": "correlated", "rho": 1.5}, "rho"),
        ({"steps": 0}, "steps"),
        ({"depths": []}, "depths"),
        ({"depths": [6, "x"]}, "depths"),
        ({"temperature": -1.0}, "temperature"),
        ({"loss": "ce"}, "loss"),
        ({"block": "rk4"}, "block"),
        ({"eval_steps": [10], "steps": 5}, "eval_steps"),
        (
            {"preset": "gpu"},
            "The .preset. key of the toy config must be one of .cpu., .paper.. Got .gpu.",
        ),
        ({"preset": []}, "The .preset. key of the toy config must be one of .* Got \\[\\] instead"),
        ({"width": "two"}, r"The 'width' key of .* must be an int in the range \[1, 65536\]"),
        ({"widht": 32}, r"unknown key 'widht'. Did you mean 'width'\?"),
        ({"lr": float("nan")}, r"'lr' key .* must be a finite float > 0. Got nan instead"),
        ({"lr": float("inf")}, r"'lr' key .* must be a finite float > 0"),
        ({"batch": -8}, r"'batch' key .* Got -8 instead"),
        ({"batch": 2.5}, r"'batch' key .* must be an int"),
        ({"steps": True}, r"'steps' key .* must be an int"),
        ({"lr_depth_scaling": 1}, r"'lr_depth_scaling' key .* must be a bool"),
        ({"device": "tpu"}, r"'device' key .* 'cuda:N'.*Got 'tpu'"),
        ({"depths": [0, 6]}, r"'depths' key .* non-empty list of ints in the range \[1, 4096\]"),
        ({"width": 10**9}, r"'width' key .* \[1, 65536\]. Got 1000000000"),
        ({"teacher_mode": "tied", "rho": 0.5}, r"'rho' key .* only applies to .*'correlated'"),
        ({"eval_steps": [10, 99], "steps": 50}, r"'eval_steps' key .* \[1, steps=50\]. Got 99"),
    ],
)
def test_bad_configs_raise(config, match):
    with pytest.raises(ScaleFitError, match=match) as info:
        build_config(config)
    assert "np.float64" not in str(info.value) and "\n" not in str(info.value)


def test_direct_construction_is_validated_too():
    with pytest.raises(ScaleFitError, match=r"The 'classes' parameter of ToyConfig must be"):
        ToyConfig(classes=1)


def test_student_hidden_matches_stack_forward():
    cfg = ToyConfig(depths=[3, 7], teacher_depth=8)
    stack = StudentStack(cfg)
    gen = torch.Generator().manual_seed(2)
    for p in stack.params:
        p.copy_(0.1 * torch.randn(p.shape, generator=gen))
    x = torch.randn(16, 32, generator=gen)
    last = stack.final_states(x)
    for i in range(2):
        states = student_hidden(stack.student_weights(i), x)
        assert states.shape == (stack.student_depths[i] + 1, 16, 32)
        assert torch.allclose(states[-1], last[i], atol=1e-6)


def test_run_toy_through_the_sweep_runner(tmp_path):
    spec = SweepSpec("tiny", "toy", {**TINY}, {"teacher_mode": ["independent", "tied"]})
    table = run_sweep(spec, tmp_path, workers=0, progress=False)
    need = {"teacher_mode", "rho", "temperature", "seed", "depth", "width", "steps"}
    assert need | {"train_loss", "test_loss", "final", "run_id"} <= set(table.columns)
    assert len(table) == 2 * 2 * 3  # modes × depths × checkpoints (10, 20, 30)
    assert sorted(table["steps"].unique()) == [10, 20, 30]
    assert set(table.loc[table["teacher_mode"] == "tied", "rho"]) == {1.0}
    final = table[table["final"]]
    assert final["dtheta_mid"].notna().all() and final["theta_mid"].notna().all()
    for run_dir in (tmp_path / "runs").iterdir():
        assert (run_dir / "curves.csv").is_file() and (run_dir / "model.pt").is_file()
        assert not (run_dir / "state.pt").exists()
    curves = pd.read_csv(next((tmp_path / "runs").iterdir()) / "curves.csv")
    assert list(curves["steps"].unique()) == [30]


_RESUME = """
import sys, torch
torch.set_num_threads(1)
from scalefit.sim import ToyConfig
from scalefit.sim.train import train_toy
cfg = ToyConfig(**{cfg!r})
train_toy(cfg, sys.argv[1])
"""

RESUME_CFG = dict(
    teacher_depth=16, depths=[2, 4], batch=64, steps=500, test_size=256, eval_steps=[50, 150],
    checkpoint_every=10,
)  # fmt: skip


def test_toy_run_killed_mid_training_resumes_to_identical_numbers(tmp_path):
    script = tmp_path / "resume.py"
    script.write_text(_RESUME.format(cfg=RESUME_CFG))
    run_dir = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, str(script), str(run_dir)])
    deadline = time.monotonic() + 300
    while not (run_dir / "state.pt").exists():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)  # a real kill, mid-training
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    resumed = train_toy(ToyConfig(**RESUME_CFG), run_dir)
    reference = train_toy(ToyConfig(**RESUME_CFG))
    assert 0 < resumed.start_step < RESUME_CFG["steps"]  # it really resumed mid-run
    assert resumed.rows == reference.rows
    assert resumed.curve == reference.curve


def test_micro_batches_give_the_same_gradients():
    cfg = ToyConfig(depths=[2, 4], teacher_depth=8, dtype="float64")
    teacher, stack = Teacher(cfg), StudentStack(cfg)
    gen = torch.Generator().manual_seed(3)
    for p in stack.params:
        p.copy_(0.2 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    x = torch.randn(100, 32, generator=gen, dtype=torch.float64)
    target = teacher.target(x, "kl")
    whole = stack.loss_and_grad(x, target)
    grads = [p.grad.clone() for p in stack.params]
    chunked = stack.loss_and_grad(x, target, micro_batch=32)  # 32 + 32 + 32 + 4
    assert torch.allclose(whole, chunked, rtol=1e-12)
    for g, p in zip(grads, stack.params, strict=True):
        assert torch.allclose(g, p.grad, rtol=1e-10, atol=1e-14)
