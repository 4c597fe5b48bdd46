"""Data-parallel training under ``torchrun``: DDP or FSDP2, and FSDP2's distributed checkpoints.

``parallel = "ddp"`` wraps the model in :class:`~torch.nn.parallel.DistributedDataParallel`
(every process holds all weights; gradients are all-reduced). ``parallel = "fsdp"`` applies
FSDP2's :func:`torch.distributed.fsdp.fully_shard` to every block and then to the whole model:
parameters, gradients and AdamW state are sharded across the processes (DTensors), gathered per
block for the forward and backward passes, and gradients are reduce-scattered. Both run on CPU
with gloo and on CUDA with NCCL (:mod:`scalefit.train.cuda`).

An FSDP2 run checkpoints with torch's distributed checkpointing (DCP): each process writes its own
shards into ``checkpoint.dcp/step-<n>/``; then process 0 atomically rewrites ``checkpoint.pt``,
which holds only plain data (step, loss history, settings, RNG state) and the name of that folder,
so a kill at any moment leaves a complete checkpoint. DCP's own ``.metadata`` file is a pickle;
:func:`safe_reader` reads it with an unpickler that accepts only DCP's metadata classes, torch
dtypes and sizes, so loading a crafted checkpoint folder cannot run code.
"""

from __future__ import annotations

import io
import pickle
import shutil
from pathlib import Path

import torch

from ..errors import ScaleFitError

DCP_DIR = "checkpoint.dcp"


def wrap(model: torch.nn.Module, parallel: str, device: torch.device, world: int):
    """The module to train: DDP- or FSDP2-wrapped under ``torchrun``, ``model`` itself otherwise.

    FSDP2 changes ``model`` in place (its parameters become DTensor shards) and returns it.
    """
    if world <= 1:
        return model
    if parallel == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        return model
    ids = [device.index] if device.type == "cuda" else None
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)


def local_value(t) -> float:
    """A Python float from a tensor that may be a DTensor (FSDP2 gradient norms)."""
    if hasattr(t, "full_tensor"):
        t = t.full_tensor()
    return float(t)


def full_state_dict(model: torch.nn.Module) -> dict:
    """Unsharded CPU copy of an FSDP2 model's weights (a collective: every process calls it)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    opts = StateDictOptions(full_state_dict=True, cpu_offload=False)
    return {
        k: v.detach().cpu().clone() for k, v in get_model_state_dict(model, options=opts).items()
    }


def save_sharded(run_dir: Path, model, opt, step: int, rank: int) -> str:
    """Write this process's shards of model and optimiser to ``checkpoint.dcp/step-<step>``.

    Returns the folder name relative to ``run_dir`` (the caller records it in ``checkpoint.pt``
    after every process has written, then calls :func:`prune`).
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    name = f"{DCP_DIR}/step-{step:09d}"
    target = run_dir / name
    if rank == 0 and target.exists():  # a previous attempt died before recording it
        shutil.rmtree(target)
    torch.distributed.barrier()
    model_sd, optim_sd = get_state_dict(model, opt)
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=str(target))
    torch.distributed.barrier()
    return name


def prune(run_dir: Path, keep: str) -> None:
    """Remove every ``checkpoint.dcp/step-*`` folder except ``keep`` (process 0, once recorded)."""
    root = run_dir / DCP_DIR
    for path in root.glob("step-*") if root.is_dir() else ():
        if f"{DCP_DIR}/{path.name}" != keep:
            shutil.rmtree(path, ignore_errors=True)


def load_sharded(run_dir: Path, name: str, model, opt) -> None:
    """Load the shards of ``run_dir/name`` into an FSDP2 model and its optimiser (collective)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    folder = run_dir / name
    if not (folder / ".metadata").is_file():
        raise ScaleFitError(f"{folder}: distributed checkpoint folder missing or incomplete.")
    model_sd, optim_sd = get_state_dict(model, opt)
    state = {"model": model_sd, "optim": optim_sd}
    dcp.load(state, checkpoint_id=str(folder), storage_reader=safe_reader(str(folder)))
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])


#: Modules whose classes (only classes, never functions) the metadata may name: DCP's metadata
#: dataclasses. Everything else must be listed one by one in :data:`_ALLOWED`.
_ALLOWED_MODULES = ("torch.distributed.checkpoint.metadata",)
_ALLOWED = {
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),  # where each item's bytes lie
    ("torch.distributed.checkpoint.metadata", "_MEM_FORMAT_ENCODING"),  # an Enum of layouts
    ("collections", "OrderedDict"),
    ("torch", "Size"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("builtins", "slice"),
    ("torch.serialization", "_get_layout"),
    ("pathlib", "PosixPath"),  # the checkpoint id DCP records
    ("pathlib", "PurePosixPath"),  # looks a layout (torch.strided) up by name
}


class _MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        ok = (module, name) in _ALLOWED or module in _ALLOWED_MODULES
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            ok = True
        if module in _ALLOWED_MODULES and name.startswith("_") and (module, name) not in _ALLOWED:
            ok = False
        if not ok:
            raise ScaleFitError(
                f"distributed checkpoint metadata refers to {module}.{name}, which is not "
                "checkpoint metadata; refusing to load it."
            )
        obj = super().find_class(module, name)
        if callable(obj) and not isinstance(obj, type) and (module, name) not in _ALLOWED:
            raise ScaleFitError(f"distributed checkpoint metadata calls {module}.{name}; refused.")
        return obj


def safe_reader(path: str):
    """A DCP ``FileSystemReader`` for ``path`` whose metadata unpickler is restricted."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import StorageMeta

    class SafeReader(FileSystemReader):
        def read_metadata(self, *args, **kwargs):
            meta_path = Path(str(self._get_metadata_path(kwargs.get("rank"))))
            try:
                metadata = _MetadataUnpickler(io.BytesIO(meta_path.read_bytes())).load()
            except (pickle.UnpicklingError, EOFError, AttributeError, ImportError) as exc:
                raise ScaleFitError(f"{meta_path}: not a distributed checkpoint ({exc}).") from exc
            if getattr(metadata, "storage_meta", None) is None:
                metadata.storage_meta = StorageMeta()
            metadata.storage_meta.load_id = self.load_id
            return metadata

    return SafeReader(path)
