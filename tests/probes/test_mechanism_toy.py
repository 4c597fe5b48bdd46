"""Known answers from the teacher–student toy (Liu et al.): real torch models, no mocks.

- the Euler discretisation of the tied teacher's ODE (every student layer is the teacher's shared
  layer, its branch scaled by ℓ*/ℓ) is procedural: correlated increments, steps ∝ 1/ℓ, and a
  loss-vs-depth exponent α_ℓ ≥ 2;
- students trained 100 steps are under-trained, whatever their increments look like;
- (slow) students of the independent teacher trained 3,000 steps look orthogonal on average, but
  a third of their token increment pairs are not: the verdict abstains; those of the tied
  teacher, with the same budget, abstain too (the paper's procedural signature needs
  convergence, seed 000 l. 36 and 59: here the shallow students' KL is still above 1 % of its
  start and their increments are mixed).
"""

import math

import pytest

torch = pytest.importorskip("torch")

from train_support import _one_torch_thread  # noqa: E402, F401 - autouse fixture

from scalefit.probes import mechanism_verdict  # noqa: E402
from scalefit.sim import ToyConfig  # noqa: E402
from scalefit.sim.model import Teacher, rmsnorm, student_hidden  # noqa: E402
from scalefit.sim.probe import probe_saved_model  # noqa: E402
from scalefit.sim.sweep_task import run_toy  # noqa: E402


def _kl(target, states, head):
    logq = torch.log_softmax(rmsnorm(states[-1]) @ head, dim=-1)
    return float((target.exp() * (target - logq)).sum(-1).mean())


def test_euler_steps_of_the_tied_teacher_read_as_procedural():
    teacher = Teacher(ToyConfig(teacher_mode="tied"))
    x = torch.randn(512, 32, generator=torch.Generator().manual_seed(0))
    target = teacher.target(x, "kl")
    uniform = torch.zeros(32, 128)
    states, init, losses = {}, {}, {}
    for depth in (16, 32, 64):
        k = teacher.depth // depth
        weights = {
            "fc_w": teacher.layers["fc_w"][::k],
            "fc_b": teacher.layers["fc_b"][::k],
            "proj_w": teacher.layers["proj_w"][::k] * k,
        }
        states[depth] = student_hidden(weights, x)
        init[depth] = states[depth][:1].expand_as(states[depth])  # zero branches: h_l = h_0
        losses[depth] = (
            _kl(target, states[depth], teacher.head / teacher.temperature),
            _kl(target, states[depth], uniform),
        )
    verdict = mechanism_verdict(states, init=init, losses=losses)
    assert verdict.mechanism == "procedural", verdict.reasons
    assert verdict.evidence["theta_mid_slope"] == pytest.approx(-1.0, abs=0.1)
    assert set(verdict.evidence["increments"].values()) == {"correlated"}
    # every token's increments are correlated, and the KL falls with depth as procedural
    # assembly predicts (seed 000: α_ℓ → 3; Euler's error gives 2.8 here)
    assert all(s["share_correlated"] == 1.0 for s in verdict.evidence["summaries"].values())
    assert verdict.evidence["alpha_depth"] == pytest.approx(2.77, abs=0.05)
    assert "reads procedural too" in " ".join(verdict.reasons)


def _saved_run(tmp_path, mode, steps, teacher_depth):
    config = {
        "teacher_mode": mode,
        "teacher_depth": teacher_depth,
        "depths": [3, 6, 12, 24],
        "steps": steps,
        "batch": 256,
        "lr": 1.2e-3,
        "decay_frac": 0.25,
        "test_size": 1024,
        "eval_steps": [steps],
        "seed": 0,
    }
    run_toy(config, tmp_path / mode)
    return probe_saved_model(tmp_path / mode)


def test_students_after_100_steps_are_under_trained(tmp_path):
    report = _saved_run(tmp_path, "tied", 100, teacher_depth=32)
    verdict = report["student_verdict"]
    assert verdict.mechanism == "undetermined"
    assert verdict.reasons[0].startswith("under-trained: the KL is still above 1%")
    assert all(r > 0.05 for r in verdict.evidence["loss_ratio"].values())
    teacher = report["teacher_verdict"]  # a random network, never trained
    assert teacher.mechanism == "undetermined" and "initialisation" in teacher.reasons[0]


@pytest.mark.slow
def test_trained_students_independent_abstain_on_their_tokens_and_tied_not_ensemble(tmp_path):
    """After 3,000 steps the independent teacher's students look orthogonal on average (the
    former mean-angle rule called them ensemble), but at depths 6-24 only 67-72 % of their middle
    token increment pairs have |cos| ≤ 0.3 (measured): the verdict abstains and says so."""
    independent = _saved_run(tmp_path, "independent", 3000, teacher_depth=128)
    verdict = independent["student_verdict"]
    summaries = verdict.evidence["summaries"].values()
    assert all(abs(math.cos(s["dtheta_mid"])) <= 0.3 for s in summaries)  # the mean's reading
    assert verdict.mechanism == "undetermined", verdict.reasons
    assert "match no signature" in " ".join(verdict.reasons)
    assert min(s["share_orthogonal"] for s in summaries) < 0.75
    assert -1.5 <= verdict.evidence["theta_mid_slope"] <= -0.5
    tied = _saved_run(tmp_path, "tied", 3000, teacher_depth=128)["student_verdict"]
    assert tied.mechanism == "undetermined", tied.reasons
    for v in (verdict, tied):
        print(v.mechanism, *v.reasons, sep="\n  ")  # the numbers quoted in docs/probes.md
