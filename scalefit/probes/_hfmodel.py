"""Load a Hugging Face model offline and find its residual blocks and final normalisation.

Where each supported family keeps its blocks and what ``output_hidden_states`` returns last
(checked against transformers 5.x; the probes never use that last entry, see below):

============  ===========================  =====================  ================================
family        blocks                       final norm             ``hidden_states[-1]``
============  ===========================  =====================  ================================
gpt_neox      ``gpt_neox.layers``          ``final_layer_norm``   final norm applied (excluded)
llama         ``model.layers``             ``norm`` (RMSNorm)     final norm applied (excluded)
qwen2/qwen3   ``model.layers``             ``norm`` (RMSNorm)     final norm applied (excluded)
mistral       ``model.layers``             ``norm`` (RMSNorm)     final norm applied (excluded)
gpt2          ``transformer.h``            ``ln_f``               final norm applied (excluded)
bert/roberta  ``encoder.layer``            none (Post-LN blocks)  last block's output
============  ===========================  =====================  ================================

The probes take every state from forward hooks (the first block's input, then every block's
output), so ``h_L`` is the raw residual stream for every family. Post-LN encoders (BERT)
normalise inside every block; their residual states are the block outputs, as Sun et al. use
them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..core._manifest import weights_only_refusal
from ..core._validation import Options, spelled, validate
from ..core.errors import ScaleFitError, require
from ._hfcheck import check_model_folder, safetensors_refusal

#: model_type → (path of the block list from the base model, final norm attribute or None,
#: encoder?, attribute of the block holding its attention sub-layer, whether the residual is
#: added outside that module). CR is measured between the block's input h and the stream after
#: the attention sub-layer: h + attention(norm(h)) in the pre-norm decoders (GPT-NeoX with a
#: parallel residual included), the attention module's own normalised output in BERT/RoBERTa,
#: whose attention sub-layer adds the residual and normalises inside (post-LN).
FAMILIES: dict[str, tuple[str, str | None, bool, str, bool]] = {
    "gpt_neox": ("layers", "final_layer_norm", False, "attention", True),
    "llama": ("layers", "norm", False, "self_attn", True),
    "qwen2": ("layers", "norm", False, "self_attn", True),
    "qwen3": ("layers", "norm", False, "self_attn", True),
    "mistral": ("layers", "norm", False, "self_attn", True),
    "gpt2": ("h", "ln_f", False, "attn", True),
    "bert": ("encoder.layer", None, True, "attention", False),
    "roberta": ("encoder.layer", None, True, "attention", False),
}
DTYPES = ("float32", "bfloat16", "float16")


@dataclass
class LoadedModel:
    """A model ready for probing: the module, its tokenizer and what the probes need to know.

    Attributes
    ----------
    model : torch.nn.Module
        The model in eval mode.
    tokenizer : transformers.PreTrainedTokenizerBase or None
        Its tokenizer (None when built from a config in memory).
    name : str
        The name or folder it was loaded from.
    family : str
        ``config.model_type``.
    task : str
        ``"causal"`` (next-token loss), ``"masked"`` (masked-token loss) or ``"representation"``
        (no language-model head: pruning measures the change of the final hidden state).
    encoder : bool
        True for bidirectional encoders (BERT family).
    final_norm : str or None
        Name of the final normalisation excluded from the last state.
    """

    model: object
    tokenizer: object
    name: str
    family: str
    task: str
    encoder: bool
    final_norm: str | None

    @property
    def depth(self) -> int:
        """Number of residual blocks L."""
        return len(blocks_of(self.model, self.family))


def blocks_of(model, family: str):
    """Return the ``torch.nn.ModuleList`` of residual blocks of a supported model."""
    if family not in FAMILIES:
        raise ScaleFitError(_unsupported(family))
    holder, attr = _block_holder(model, family)
    return getattr(holder, attr)


def set_blocks(model, family: str, blocks) -> None:
    """Replace the block list (used by layer pruning; restore the original afterwards)."""
    holder, attr = _block_holder(model, family)
    setattr(holder, attr, blocks)


def _block_holder(model, family: str):
    base = model.base_model
    *parents, attr = FAMILIES[family][0].split(".")
    holder = base
    for p in parents:
        holder = getattr(holder, p)
    return holder, attr


def _unsupported(family: str) -> str:
    return (
        f"unsupported architecture '{family}': the layer probes support "
        f"{', '.join(sorted(FAMILIES))}."
    )


def _task_of(names: str, encoder: bool) -> str:
    """The probe task from model class names (``config.architectures`` or the built class)."""
    if "CausalLM" in names or "LMHead" in names:
        return "causal"
    if "MaskedLM" in names or "ForPreTraining" in names:
        return "masked"
    if names:
        return "representation"
    return "masked" if encoder else "causal"


def wrap_model(model, tokenizer=None, *, name: str = "in-memory") -> LoadedModel:
    """Describe an already built model (e.g. from a config) for the probes."""
    family = model.config.model_type
    if family not in FAMILIES:
        raise ScaleFitError(_unsupported(family))
    _, norm, encoder, *_ = FAMILIES[family]
    task = _task_of(type(model).__name__, encoder)
    return LoadedModel(model.eval(), tokenizer, name, family, task, encoder, norm)


def _first_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    if not lines:
        return type(exc).__name__
    text = " ".join(lines[:2]) if lines[0].endswith(":") else lines[0]
    return text[:300]


def _weights_refusal(exc: Exception, folder: Path) -> None:
    """Raise one line naming the weight files when torch or safetensors refused them."""
    from safetensors import SafetensorError  # a dependency of transformers

    if isinstance(exc, pickle.UnpicklingError):  # torch.load(weights_only=True) refused a file
        files = ", ".join(sorted(p.name for p in folder.glob("*.bin"))) or "weights"
        raise weights_only_refusal(folder / files, "model weights", exc) from None
    if isinstance(exc, SafetensorError):
        files = ", ".join(sorted(p.name for p in folder.glob("*.safetensors"))) or "weights"
        raise safetensors_refusal(folder / files, exc) from None


def _cached_snapshot(name: str) -> Path | None:
    """The local cache's snapshot folder of a hub name, or None (not cached, no hub library)."""
    try:
        from huggingface_hub import snapshot_download

        folder = Path(snapshot_download(name, local_files_only=True))
    except Exception:  # noqa: BLE001 - not cached, an invalid name, ...: transformers says so
        return None
    return folder if os.path.lexists(folder / "config.json") else None


@contextlib.contextmanager
def _transformers_log():
    """Collect transformers' log records of a load as one-line texts instead of printing them.

    Its loading report is a multi-line table on stderr; a load that fails is one error line, a
    load that succeeds turns each record into one warning. The logger's handlers are restored.
    """
    messages: list[str] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            text = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", record.getMessage()).split())
            messages.append(text[:500])

    root = logging.getLogger("transformers")
    saved = list(root.handlers)
    root.handlers = [_Collect(logging.WARNING)]
    try:
        yield messages
    finally:
        root.handlers = saved


def load_model(
    name: str, *, dtype: str = "float32", device: str = "cpu", allow_download: bool = False
) -> LoadedModel:
    """Load a causal or masked LM (or a bare encoder) from a local folder or the local HF cache.

    Parameters
    ----------
    name : str
        A folder with ``config.json``, weights and tokenizer files, or a hub name such as
        ``EleutherAI/pythia-410m``.
    dtype : {"float32", "bfloat16", "float16"}
        Weights' dtype; the probes compute angles in float64 whatever it is.
    device : str
        ``"cpu"``, ``"cuda"``, ``"cuda:1"``…
    allow_download : bool, default False
        Hub names load from the local cache only unless this is True (then transformers may
        download, which needs network).

    Returns
    -------
    LoadedModel

    Raises
    ------
    ScaleFitError
        Missing folder, a hub name that is not cached (and no download allowed), an
        unsupported architecture, or a bad dtype.
    """
    tf = require("transformers", "hf")
    torch = require("torch", "torch")
    validate("load_model", {"dtype": dtype}, {"dtype": [Options(set(DTYPES))]})
    path = Path(name)
    local = os.path.lexists(path) or name.startswith((".", "/", "~")) or name.count("/") > 1
    folder = None
    if local:
        folder = path = path.expanduser()
        if not path.is_dir():
            raise ScaleFitError(f"{name}: no such model folder.")
        if not os.path.lexists(path / "config.json"):
            raise ScaleFitError(f"{name}: not a model folder (no config.json).")
    elif not allow_download:  # a hub name: check its snapshot in the local cache the same way
        folder = _cached_snapshot(name)
    if folder is not None:
        check_model_folder(folder, dtype_bytes=4 if dtype == "float32" else 2)
    source = str(path) if local else name
    offline = not allow_download or local
    try:
        with _transformers_log() as config_messages:
            config = tf.AutoConfig.from_pretrained(source, local_files_only=offline)
    except Exception as exc:  # noqa: BLE001 - transformers and huggingface_hub raise many types
        if local:
            raise ScaleFitError(
                f"{name}: cannot read its config.json ({_first_line(exc)})."
            ) from exc
        raise ScaleFitError(
            f"{name}: not a local folder and not in the local Hugging Face cache; a hub name "
            f"needs network to download (pass {spelled('allow_download=True', '--allow-download')} "
            "on a machine with network, or give a local folder)."
        ) from exc
    if config.model_type not in FAMILIES:
        raise ScaleFitError(_unsupported(config.model_type))
    task = _task_of(
        " ".join(getattr(config, "architectures", None) or []), FAMILIES[config.model_type][2]
    )
    auto = {
        "causal": tf.AutoModelForCausalLM,
        "masked": tf.AutoModelForMaskedLM,
        "representation": tf.AutoModel,
    }[task]
    with _transformers_log() as messages:
        try:
            model = auto.from_pretrained(
                source, dtype=getattr(torch, dtype), local_files_only=offline
            )
        except Exception as exc:  # noqa: BLE001 - a size mismatch is a RuntimeError, ...
            _weights_refusal(exc, Path(source) if local else _cached_snapshot(name) or Path(name))
            raise ScaleFitError(f"{name}: cannot load the model ({_first_line(exc)}).") from exc
        try:
            tokenizer = tf.AutoTokenizer.from_pretrained(source, local_files_only=offline)
        except Exception as exc:  # noqa: BLE001 - the tokenizers package raises bare Exception
            raise ScaleFitError(f"{name}: cannot load its tokenizer ({_first_line(exc)}).") from exc
    for text in dict.fromkeys(
        config_messages + messages
    ):  # e.g. weights missing from the folder and initialised at random
        warnings.warn(f"{name}: transformers: {text}", UserWarning, stacklevel=2)
    return wrap_model(model.to(device), tokenizer, name=name)
