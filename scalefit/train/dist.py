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
and records the checksums of that file and of every shard in ``checksums.json``
(:mod:`scalefit.core._manifest`), so a kill at any moment leaves a complete checkpoint.

Loading verifies every file of the step folder against ``checksums.json`` before torch reads
any of them, on every process, and the processes agree on the verdict before DCP starts (one
refusal stops them all with the same line). DCP's own ``.metadata`` file is a pickle:
:func:`safe_reader` reads it with :mod:`scalefit.train.dcp_metadata`, which resolves only an
exact list of names into inert stand-ins, so a crafted file cannot run code. DCP's default
planner unpickles the non-tensor items of the shards with ``weights_only`` off; the planner
used here loads them with ``weights_only=True`` first.
"""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import torch

from ..core import _manifest
from ..core._io import read_input_bytes
from ..core.errors import ScaleFitError, one_line
from .dcp_metadata import load_metadata
from .rundir import CHECKPOINT_DIR as DCP_DIR
from .rundir import REMEDY

#: The name ``checkpoint.pt`` records for a step folder.
_FOLDER = re.compile(r"checkpoint\.dcp/step-[0-9]{9}(-[0-9]{1,4})?")
#: Largest DCP ``.metadata`` read (bytes).
MAX_METADATA_BYTES = 256 << 20
#: Largest shard file hashed (bytes).
MAX_SHARD_BYTES = 1 << 40


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


def full_state_dict(model: torch.nn.Module) -> dict:
    """Unsharded CPU copy of an FSDP2 model's weights (a collective: every process calls it)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    opts = StateDictOptions(full_state_dict=True, cpu_offload=False)
    return {
        k: v.detach().cpu().clone() for k, v in get_model_state_dict(model, options=opts).items()
    }


def _folders(run_dir: Path, *, pending: bool) -> set[str]:
    """The step folders the run folder's ``checksums.json`` lists."""
    names = _manifest.recorded_names(run_dir, pending=pending)
    return {"/".join(n.split("/")[:2]) for n in names if n.startswith(DCP_DIR + "/")}


def save_sharded(run_dir: Path, model, opt, step: int, rank: int) -> str | None:
    """Write this process's shards of model and optimiser to ``checkpoint.dcp/step-<step>``.

    Returns the folder name relative to ``run_dir`` (the caller records it in ``checkpoint.pt``
    and its checksums after every process has written, then calls :func:`prune`), or ``None``
    when the run folder's checkpoint already holds this step (a resumed finished run, or the
    end of a run right after a periodic checkpoint). A folder ``checksums.json`` lists, even as
    pending (a save killed after its shards were complete), is never rewritten in place: such a
    step is written to ``step-<step>-<k>``. Every process reads ``checksums.json``, which the
    previous save finished writing before its closing barrier, so all processes decide alike.
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    name = f"{DCP_DIR}/step-{step:09d}"
    if name in _folders(run_dir, pending=False):
        return None
    listed = _folders(run_dir, pending=True)
    attempt = 0
    while name in listed:
        attempt += 1
        name = f"{DCP_DIR}/step-{step:09d}-{attempt}"
    target = run_dir / name
    if rank == 0 and target.exists():  # a previous attempt died before recording it
        shutil.rmtree(target)
    torch.distributed.barrier()
    model_sd, optim_sd = get_state_dict(model, opt)
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=str(target))
    torch.distributed.barrier()
    return name


def shard_files(run_dir: Path, name: str) -> list[str]:
    """The files of the step folder ``name`` (relative to ``run_dir``), for its checksums."""
    folder = run_dir / name
    return sorted(f"{name}/{p.name}" for p in folder.iterdir() if p.is_file())


def prune(run_dir: Path, keep: str) -> None:
    """Remove every ``checkpoint.dcp/step-*`` folder except ``keep`` (process 0, once recorded)."""
    root = run_dir / DCP_DIR
    for path in root.glob("step-*") if root.is_dir() else ():
        if f"{DCP_DIR}/{path.name}" != keep:
            shutil.rmtree(path, ignore_errors=True)


def verify_folder(run_dir: Path, name: object) -> dict[str, int]:
    """Check a step folder against the run's checksums; return ``{file name: size}``.

    Every file in the folder must be a regular file listed in ``checksums.json`` with its
    digest, and every file listed there must be present: checked before torch reads any byte.

    Raises
    ------
    ScaleFitError
        Naming the folder or file and what is wrong.
    """
    ckpt = run_dir / "checkpoint.pt"
    if not isinstance(name, str) or not _FOLDER.fullmatch(name):
        raise ScaleFitError(
            f"{ckpt}: names the distributed checkpoint {str(name)[:60]!r}; expected "
            f"'checkpoint.dcp/step-<9 digits>[-<k>]'; {REMEDY}"
        )
    folder = run_dir / name
    if not folder.is_dir() or folder.is_symlink():
        raise ScaleFitError(f"{folder}: distributed checkpoint folder missing; {REMEDY}")
    listed = _manifest.listed(run_dir, name + "/", shown=folder, remedy=REMEDY)
    present = {}
    for entry in sorted(folder.iterdir()):
        if entry.is_symlink() or not entry.is_file():
            raise ScaleFitError(
                f"{entry}: not a regular file, so DCP did not write it; refusing the "
                f"checkpoint; {REMEDY}"
            )
        present[entry.name] = entry
    missing = sorted(rel.split("/")[-1] for rel in listed if rel.split("/")[-1] not in present)
    if missing or ".metadata" not in present:
        raise ScaleFitError(
            f"{folder}: incomplete distributed checkpoint (missing {missing or ['.metadata']}); "
            f"{REMEDY}"
        )
    return {
        fname: _manifest.verify_file(
            run_dir,
            f"{name}/{fname}",
            what="distributed checkpoint",
            remedy=REMEDY,
            max_bytes=MAX_SHARD_BYTES,
        )
        for fname in present
    }


def load_sharded(run_dir: Path, name: str, model, opt) -> None:
    """Load the shards of ``run_dir/name`` into an FSDP2 model and its optimiser (collective).

    Every process verifies the folder and parses its metadata first; if any process refuses,
    all raise together (see :func:`_agree`), so no process is left waiting in DCP.
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    error, reader = None, None
    try:
        files = verify_folder(run_dir, name)
        reader = safe_reader(str(run_dir / name), files=files, run_dir=run_dir)
        reader.read_metadata()
    except ScaleFitError as exc:
        error = exc
    _agree(error, run_dir / str(name))
    model_sd, optim_sd = get_state_dict(model, opt)
    state = {"model": model_sd, "optim": optim_sd}
    try:
        dcp.load(
            state, checkpoint_id=str(run_dir / name), storage_reader=reader, planner=_planner()
        )
        set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    except CheckpointException as exc:
        raise ScaleFitError(f"{run_dir / name}: {_first_failure(exc)}; {REMEDY}") from None
    except (RuntimeError, ValueError, KeyError, TypeError) as exc:
        detail = one_line(exc, 200, whole=True)
        raise ScaleFitError(
            f"{run_dir / name}: does not fit this run ({detail}); {REMEDY}"
        ) from None


def _agree(error: ScaleFitError | None, folder: Path) -> None:
    """Raise on every process when any process refused the checkpoint.

    The verdicts are all-reduced, so the processes refuse together (under ``torchrun`` a
    process that fails first gets the others stopped, possibly before they could say why).
    """
    if torch.distributed.is_initialized():
        device = torch.device("cpu")
        if torch.distributed.get_backend() == "nccl":
            device = torch.device("cuda", torch.cuda.current_device())
        flag = torch.tensor([0.0 if error is None else 1.0], device=device)
        torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
        if error is None and float(flag.item()) > 0:
            error = ScaleFitError(f"{folder}: refused by another process; {REMEDY}")
    if error is not None:
        raise error


def _first_failure(exc) -> str:
    failures = getattr(exc, "failures", {}) or {}
    for failure in failures.values():
        inner = failure[0] if isinstance(failure, tuple) and failure else failure
        text = " ".join(str(inner).split())[:200]
        if text:
            return text if isinstance(inner, ScaleFitError) else f"{type(inner).__name__}: {text}"
    return one_line(exc, 200, whole=True)


def _planner():
    """A load planner that loads the shards' non-tensor items as plain data only."""
    from torch.distributed.checkpoint import DefaultLoadPlanner

    class SafePlanner(DefaultLoadPlanner):
        """DCP's default planner, but non-tensor items are loaded as plain data only.

        torch's planner calls ``torch.load`` with ``weights_only`` off on each byte item of a shard;
        here the item is loaded with ``weights_only=True`` (tensors and plain data only) and
        handed on re-serialised, so the planner's own load sees nothing but that.
        """

        def load_bytes(self, read_item, value) -> None:
            import pickle

            try:
                obj = torch.load(value, map_location="cpu", weights_only=True)
            except pickle.UnpicklingError as exc:
                raise ScaleFitError(
                    f"item {read_item.dest_index.fqn!r} holds more than tensors and plain data "
                    f"({one_line(exc, 120)})"
                ) from None
            clean = io.BytesIO()
            torch.save(obj, clean)
            clean.seek(0)
            super().load_bytes(read_item, clean)

    return SafePlanner()


def safe_reader(path: str, *, files: dict[str, int] | None = None, run_dir=None):
    """A DCP ``FileSystemReader`` for ``path`` that verifies and safely parses ``.metadata``.

    Parameters
    ----------
    path : str
        The step folder.
    files : dict, optional
        ``{file name: size}`` of the folder, already verified (default: its regular files).
    run_dir : path-like, optional
        The run folder whose ``checksums.json`` covers ``path`` (default: two levels up).
    """
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import StorageMeta

    folder = Path(path)
    run_dir = Path(run_dir) if run_dir is not None else folder.parent.parent
    rel = folder.relative_to(run_dir).as_posix()
    if files is None:
        files = {p.name: p.stat().st_size for p in folder.iterdir() if p.is_file()}

    class SafeReader(FileSystemReader):
        def read_metadata(self, *args, **kwargs):
            meta_path = folder / ".metadata"
            data = read_input_bytes(meta_path, what="DCP metadata", max_bytes=MAX_METADATA_BYTES)
            _manifest.verify_bytes(
                run_dir, f"{rel}/.metadata", data, remedy=REMEDY, what="distributed checkpoint"
            )
            try:
                metadata = load_metadata(data, files=files)
            except ScaleFitError as exc:
                raise ScaleFitError(f"{meta_path}: refused: {exc}; {REMEDY}") from None
            if metadata.storage_meta is None:
                metadata.storage_meta = StorageMeta()
            metadata.storage_meta.load_id = self.load_id
            return metadata

    return SafeReader(path)
