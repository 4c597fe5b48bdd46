"""The training loop: AdamW, lr schedules, clipping, checkpoints, DDP, divergence detection.

:func:`train` runs one configuration and returns a :class:`TrainResult`. When ``run_dir`` is given
it keeps ``checkpoint.pt`` there (model, optimiser, step, loss history, RNG states) and resumes from
it, reproducing the uninterrupted loss sequence exactly on CPU (batches depend only on the seed
and the step, see :class:`~scalefit.train.data.TokenData`). Under ``torchrun`` (``WORLD_SIZE > 1``)
it trains with DistributedDataParallel (gloo on CPU, NCCL on CUDA), each process taking a slice of
the same global batch.

Mixed precision (``precision = "bf16"``: ``torch.autocast(device.type, torch.bfloat16)``),
compilation (``compile = true``: ``torch.compile``, inductor on CPU and CUDA) and the AdamW
implementation (``optimizer_impl``) are device-generic; the few CUDA-only pieces live in
:mod:`scalefit.train.cuda`. Before any work the settings are validated
(:func:`~scalefit.train.config.validate_config`), the run folder is locked (an OS file lock, so
two processes cannot train into one folder) and a folder started with other settings is refused
with the differing keys named, unless ``overwrite=True``.

A run folder holds ``history.csv`` (one row per step: ``step``, ``tokens`` = (step+1)·batch·
seq_len, ``lr``, ``loss`` the training loss of the step's batch, ``grad_norm``, ``diverged``,
``time_s``) and ``run.json`` (:func:`scalefit.train.config.run_metadata`: parameters, shape,
schedule, budget; ``finished`` and the result row once the run is done).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from ..core._io import atomic_write_csv, atomic_write_json
from ..core._manifest import load_torch, save_torch
from ..core._progress import progress_bar
from ..core._readonly import ReadOnlyMappings
from ..core._torch import pick_device, seed_all
from ..core.accounting import flops_per_token
from ..core.errors import ScaleFitError
from . import cuda, dist
from .config import TrainConfig, config_from_dict, run_metadata, runtime_choices, validate_config
from .cr import regulariser
from .data import TokenData, cached_tokens
from .memory import check_run_memory
from .mfu import device_peak, mfu
from .model import ModelConfig, Transformer
from .rundir import claim
from .shards import ShardData

__all__ = [
    "TrainConfig",
    "TrainResult",
    "config_from_dict",
    "evaluate",
    "load_checkpoint",
    "make_optimizer",
    "prepare_data",
    "train",
]


@dataclass(frozen=True)
class TrainResult(ReadOnlyMappings):
    """One finished run: the loss-table ``row``, the per-step ``history`` and the trained model."""

    row: dict
    history: list[dict]
    model: Transformer
    data: TokenData
    steps_run: int = 0  # optimiser steps run by this call


def make_optimizer(model: torch.nn.Module, cfg: TrainConfig, device) -> torch.optim.AdamW:
    """AdamW with weight decay on ≥ 2-D tensors only, in the ``optimizer_impl`` of ``cfg``.

    ``"fused"`` (one kernel for all tensors; CPU and CUDA), ``"foreach"`` (multi-tensor ops) or
    ``"plain"`` (a loop over tensors); ``"auto"`` is fused on CUDA and plain elsewhere.
    """
    impl = runtime_choices(cfg, torch.device(device).type)["optimizer_impl"]
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    kind = {"fused": {"fused": True}, "foreach": {"foreach": True}, "plain": {"foreach": False}}
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), **kind[impl])


def prepare_data(cfg: TrainConfig, cache: Path | None = None) -> TokenData:
    """Token files for ``cfg.data`` (built once into the cache when it is not a token folder)."""
    src = Path(cfg.data)
    if (src / "manifest.json").exists():
        return ShardData(src, cfg.model.seq_len, seed=cfg.seed)
    if (src / "meta.json").exists():
        return TokenData(src, cfg.model.seq_len, seed=cfg.seed)
    out = cached_tokens(cfg.data, tokenizer=cfg.tokenizer, vocab_size=cfg.bpe_vocab, cache=cache)
    return TokenData(out, cfg.model.seq_len, seed=cfg.seed)


def _save_checkpoint(
    path: Path, model, opt, step: int, history: list, cfg: TrainConfig, run, data
) -> None:
    """Write ``checkpoint.pt`` and its checksums (process 0); FSDP2 runs first write shards (all).

    ``checksums.json`` (:mod:`scalefit.core._manifest`) records ``checkpoint.pt`` and, for FSDP2,
    the files of the step folder it names; it is rewritten after them, and the step folder is fresh
    for every save, so a kill at any moment leaves a checkpoint whose files all match.
    """
    payload = {
        "step": step,
        "history": history,
        "config": cfg.to_dict(),
        "torch_rng": torch.get_rng_state(),
    }
    if hasattr(data, "position"):  # a streamed shard corpus: where the next step reads
        payload["data_position"] = data.position(step, cfg.batch_size)
    if run.sharded:
        payload["dcp"] = dist.save_sharded(path.parent, model, opt, step, run.rank)
        if payload["dcp"] is None:  # this very step is the recorded checkpoint already
            return
    elif run.rank == 0:
        payload.update(model=model.state_dict(), optimizer=opt.state_dict())
    if run.rank == 0:
        shards = dist.shard_files(path.parent, payload["dcp"]) if run.sharded else ()
        save_torch(
            path.parent,
            path.name,
            payload,
            written=shards,
            forget=lambda rel: rel.startswith(dist.DCP_DIR + "/"),
        )
        if run.sharded:
            dist.prune(path.parent, payload["dcp"])
    if run.sharded:  # the next save reads the recorded folder: let process 0 finish first
        torch.distributed.barrier()


def load_checkpoint(path: str | os.PathLike) -> dict:
    """Load a checkpoint written by :func:`train` (CPU tensors; tensors and plain data only).

    The file must match its run folder's ``checksums.json``; it is refused before parsing
    otherwise (see :mod:`scalefit.core._manifest`).
    """
    return load_torch(path, what="trainer checkpoint", remedy=dist.REMEDY)


@torch.no_grad()
def evaluate(
    model: Transformer,
    data: TokenData,
    *,
    max_tokens: int,
    batch_size: int = 32,
    skip: frozenset[int] = frozenset(),
) -> float:
    """Mean validation cross-entropy (nats/token) over fixed held-out windows."""
    device = next(model.parameters()).device
    total, count = 0.0, 0
    was_training = model.training
    model.eval()
    for x, y in data.val_batches(max_tokens, batch_size):
        out = model(x.to(device), y.to(device), skip=skip)
        total += float(out.loss) * y.numel()
        count += y.numel()
    model.train(was_training)
    return total / count


def _setup(cfg: TrainConfig, run_dir: Path | None):
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    device = pick_device(cfg.device)  # a CUDA device this machine lacks: check_run_memory refused
    world = _world_size()
    if world > 1:
        device = cuda.local_device(device, int(os.environ.get("LOCAL_RANK", "0")))
        if not torch.distributed.is_initialized():
            torch.distributed.init_process_group(cuda.backend(device))
    rank = torch.distributed.get_rank() if world > 1 else 0
    cuda.configure(device)
    if world > 1 and rank != 0:
        torch.distributed.barrier()  # rank 0 builds the token files first
    data = prepare_data(cfg)
    if world > 1 and rank == 0:
        torch.distributed.barrier()
    if data.vocab != cfg.model.vocab:
        cfg.model = ModelConfig(**{**cfg.model.to_dict(), "vocab": data.vocab})
    seed_all(cfg.seed)
    model = Transformer(cfg.model).to(device)
    net = dist.wrap(model, cfg.parallel, device, world)  # FSDP2 shards before the optimiser
    opt = make_optimizer(model, cfg, device)
    start, history = 0, []
    ckpt = run_dir / "checkpoint.pt" if run_dir is not None else None
    if ckpt is not None and os.path.lexists(ckpt):
        state = _resume(ckpt, model, opt, world > 1 and cfg.parallel == "fsdp", cfg.steps)
        start, history = state["step"], state["history"]
        _check_position(ckpt, state, data, start, cfg.batch_size)
    if runtime_choices(cfg, device.type)["compile"]:
        net = torch.compile(net, mode=None if cfg.compile_mode == "default" else cfg.compile_mode)
    run = _Run(rank, world, device, world > 1 and cfg.parallel == "fsdp")
    return run, data, model, net, opt, start, history, ckpt


_HISTORY_KEYS = {"step": int, "lr": float, "loss": float, "grad_norm": float, "diverged": bool}


def _resume(ckpt: Path, model, opt, sharded: bool, steps: int) -> dict:
    """Restore model, optimiser and RNG state from ``checkpoint.pt``; return its contents."""
    state = load_checkpoint(ckpt)
    problem = _state_problem(state, steps)
    if problem:
        raise ScaleFitError(f"{ckpt}: not a trainer checkpoint ({problem}); {dist.REMEDY}")
    if ("dcp" in state) != sharded:
        raise ScaleFitError(
            f"{ckpt}: written by a {'sharded (FSDP2)' if 'dcp' in state else 'unsharded'} "
            "run; resume it the same way (parallel = 'fsdp' under torchrun, or not)."
        )
    if "dcp" in state:
        dist.load_sharded(ckpt.parent, state["dcp"], model, opt)
    try:
        if "dcp" not in state:
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
    except (RuntimeError, ValueError, KeyError, TypeError) as exc:
        detail = " ".join(str(exc).split())[:200]
        raise ScaleFitError(f"{ckpt}: does not fit this run ({detail}); {dist.REMEDY}") from None
    return state


def _state_problem(state, steps: int) -> str:
    """What is wrong with a loaded checkpoint's plain data ('' when nothing is)."""
    if not isinstance(state, dict):
        return f"holds a {type(state).__name__}, expected a table"
    need = {"step": int, "history": list, "torch_rng": torch.Tensor}
    need.update({"dcp": str} if "dcp" in state else {"model": dict, "optimizer": dict})
    bad = [k for k, t in need.items() if not isinstance(state.get(k), t)]
    if bad:
        return f"missing or malformed: {', '.join(bad)}"
    step, history = state["step"], state["history"]
    if type(step) is not int or not 0 <= step <= steps or len(history) != step:
        return f"step {step!r} with {len(history)} history rows; expected 0..{steps}, one row each"
    for i, row in enumerate(history):
        ok = isinstance(row, dict) and all(
            isinstance(row.get(k), t) and (t is bool or type(row.get(k)) is not bool)
            for k, t in _HISTORY_KEYS.items()
        )
        if not ok or row["step"] != i:
            return f"history row {i} is {str(row)[:80]}"
    return ""


def _check_position(ckpt: Path, state: dict, data, start: int, batch_size: int) -> None:
    saved = state.get("data_position")
    if saved is not None and hasattr(data, "position"):
        now = data.position(start, batch_size)
        if saved != now:
            raise ScaleFitError(
                f"{ckpt}: the checkpoint reads the corpus at {saved}, but the shards there now "
                f"put step {start} at {now}; the shard folder changed since the run started."
            )


@dataclass(frozen=True)
class _Run:
    rank: int
    world: int
    device: torch.device
    sharded: bool  # FSDP2 under torchrun


def train(
    cfg: TrainConfig,
    run_dir: str | os.PathLike | None = None,
    *,
    progress: bool = False,
    stop_after: int | None = None,
    overwrite: bool = False,
    max_steps: int | None = None,
    forks: dict | None = None,
    branch: dict | None = None,
) -> TrainResult:
    """Train one configuration; see the module docstring.

    Parameters
    ----------
    cfg : TrainConfig
        Settings.
    run_dir : path-like, optional
        Folder for ``checkpoint.pt`` and ``history.csv``; an existing checkpoint is resumed.
    progress : bool
        Show a tqdm bar with tokens/s (rank 0 only).
    stop_after : int, optional
        Stop (and checkpoint) after this many steps in total, as if interrupted.
    overwrite : bool
        Discard what ``run_dir`` holds and start afresh (otherwise a folder started with other
        settings is refused, naming the differing keys).
    max_steps : int, optional
        Run at most this many optimiser steps in this call, then checkpoint as if interrupted.
    forks : dict, optional
        ``{step: (TrainConfig, folder)}``: when this run has done ``step`` steps, its state seeds
        ``folder`` (a new run with those settings that resumes there; a folder that already holds
        a checkpoint is left alone). :mod:`scalefit.train.branches` forks cooldowns this way.
    branch : dict, optional
        Recorded as ``branch`` in ``run.json`` (a cooldown branch names its main run there).

    Returns
    -------
    TrainResult
        ``row`` has ``loss`` (validation nats/token, NaN when diverged), ``bpb`` and ``diverged``.

    Raises
    ------
    ScaleFitError
        For invalid settings, a run that would not fit in the device's free memory
        (:mod:`scalefit.train.memory`), a run folder in use by another process or started with
        other settings.
    """
    validate_config(cfg.to_dict())
    run_dir = Path(run_dir) if run_dir is not None else None
    check_run_memory(cfg, checkpoint=run_dir is not None)  # before any folder or tensor
    owner = int(os.environ.get("RANK", "0")) == 0
    if forks and _world_size() > 1 and cfg.parallel == "fsdp":
        raise ScaleFitError("cooldown branches (forks) are not supported with parallel = 'fsdp'.")
    with claim(run_dir, cfg, overwrite=overwrite, owner=owner):
        res = _train(
            cfg,
            run_dir,
            progress=progress,
            stop_after=stop_after,
            max_steps=max_steps,
            forks=forks or {},
        )
        if run_dir is not None and owner:
            _write_run_json(run_dir, cfg, res, branch)
        return res


def _world_size() -> int:
    """Processes of this run (``WORLD_SIZE``, 1 outside ``torchrun``)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def _write_run_json(run_dir: Path, cfg: TrainConfig, res: TrainResult, branch) -> None:
    meta = run_metadata(
        cfg,
        params=res.row["params"],
        params_nonembedding=res.row["params_nonembedding"],
        branch=branch,
    )
    finished = len(res.history) == cfg.steps or bool(res.row["diverged"])
    meta["finished"] = finished
    meta["result"] = dict(res.row) if finished else None  # NaN is written as null
    atomic_write_json(run_dir / "run.json", meta)


def _train(
    cfg: TrainConfig, run_dir: Path | None, *, progress: bool, stop_after, max_steps, forks
) -> TrainResult:
    run, data, model, net, opt, start, history, ckpt = _setup(cfg, run_dir)
    rank, world, device = run.rank, run.world, run.device
    per_rank = cfg.batch_size // world
    end = cfg.steps if stop_after is None else min(cfg.steps, stop_after)
    if max_steps is not None:
        end = min(end, start + max_steps)
    diverged = any(h.get("diverged") for h in history)
    bar = progress_bar(
        progress and rank == 0, total=cfg.steps, initial=start, desc="train", unit="step"
    )
    t0, t_start, c_start = time.perf_counter(), time.perf_counter(), time.process_time()
    sync_every = runtime_choices(cfg, device.type)["sync_every"]
    schedule = cfg.lr_schedule()
    pending: list[dict] = []  # steps whose loss and gradient norm are still on the device

    def read_back() -> bool:
        """Move the pending steps into the history; whether one of them diverged."""
        nonlocal pending
        values = [(float(e.pop("ce")), float(e.pop("gnorm"))) for e in pending]
        now = time.perf_counter() - t0  # every step of the chunk had finished by now
        for entry, (ce_val, gnorm) in zip(pending, values, strict=True):
            entry["time_s"] = now
            bad = not math.isfinite(ce_val) or (
                bool(history) and ce_val > cfg.diverge_ratio * history[0]["loss"]
            )
            history.append({**entry, "loss": ce_val, "grad_norm": gnorm, "diverged": bad})
            bar.update(1)
            bar.set_postfix(
                loss=f"{ce_val:.3f}",
                tok_s=f"{_tok_s(entry['step'], start, per_rank * world, cfg, t0):.0f}",
            )
            if bad:
                break  # the steps run after a diverged one are not recorded
        pending = []
        return bool(history) and history[-1]["diverged"]

    step = start
    for step in range(start, end):
        if diverged:
            break
        lr = schedule.lr_at(step + 1)
        x, y = data.batch(step, cfg.batch_size, rank=rank, world=world)
        ce, gnorm = _step(net, model, opt, x, y, cfg, step, lr, device, world)
        pending.append({"step": step, "lr": lr, "ce": ce, "gnorm": gnorm})
        every = cfg.checkpoint_every
        due = ckpt is not None and bool(every) and (step + 1) % every == 0
        fork = forks.get(step + 1)
        if len(pending) >= sync_every or due or fork or step == end - 1:
            diverged = read_back()
        if fork and not diverged:
            _seed_fork(fork, model, opt, step + 1, history, run, data)
        if due and not diverged:
            _save_checkpoint(ckpt, model, opt, step + 1, history, cfg, run, data)
    bar.close()
    wall = time.perf_counter() - t_start
    cpu = time.process_time() - c_start
    done = len(history)
    if ckpt is not None:
        _save_checkpoint(ckpt, model, opt, done, history, cfg, run, data)
        if rank == 0:
            atomic_write_csv(run_dir / "history.csv", _frame(history, cfg))
    if run.sharded:  # evaluate and return an unsharded copy (every process gathers the weights)
        full = dist.full_state_dict(model)
        model = Transformer(cfg.model)
        model.load_state_dict(full)
    row = _result_row(cfg, model, data, history, diverged, wall, done - start, world)
    row["cpu_s"] = cpu  # CPU seconds of this process in the training loop
    return TrainResult(row=row, history=history, model=model, data=data, steps_run=done - start)


def _seed_fork(target, model, opt, step: int, history: list, run, data) -> None:
    """Write this run's state at ``step`` as the first checkpoint of the folder ``target[1]``."""
    fork_cfg, folder = target
    path = Path(folder) / "checkpoint.pt"
    with claim(path.parent, fork_cfg, owner=run.rank == 0):
        if not os.path.lexists(path):
            _save_checkpoint(path, model, opt, step, history[:step], fork_cfg, run, data)


def _step(net, model, opt, x, y, cfg: TrainConfig, step: int, lr: float, device, world: int):
    """One optimiser step; returns the (all-reduced) cross-entropy and the gradient norm.

    Both stay tensors on the device (reading them is a host sync; the loop reads them back every
    ``sync_every`` steps).
    """
    for group in opt.param_groups:
        group["lr"] = lr
    x, y = cuda.to_device(x, y, device)
    aux = cfg.cr_loss or cfg.ortho_loss
    bf16 = runtime_choices(cfg, device.type)["precision"] == "bf16"
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
        out = net(x, y, return_attn_io=aux)
        loss = out.loss
        if aux:
            loss = loss + regulariser(
                out.attn_io, step, use_cr=cfg.cr_loss, use_ortho=cfg.ortho_loss
            )
    loss.backward()
    gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    if hasattr(gnorm, "full_tensor"):  # an FSDP2 DTensor: gather now, while every rank is here
        gnorm = gnorm.full_tensor()
    opt.step()
    opt.zero_grad(set_to_none=True)
    ce = out.loss.detach().float()
    if world > 1:
        torch.distributed.all_reduce(ce)
        ce /= world
    return ce, gnorm.detach()


def _tok_s(step: int, start: int, batch: int, cfg: TrainConfig, t0: float) -> float:
    return (step + 1 - start) * batch * cfg.model.seq_len / max(time.perf_counter() - t0, 1e-9)


HISTORY_COLUMNS = ["step", "tokens", "lr", "loss", "grad_norm", "diverged", "time_s"]


def _frame(history: list[dict], cfg: TrainConfig):
    import pandas as pd

    frame = pd.DataFrame(history, columns=HISTORY_COLUMNS)
    frame["tokens"] = (frame["step"] + 1) * (cfg.batch_size * cfg.model.seq_len)
    return frame


def _result_row(cfg, model, data, history, diverged, wall, steps_run, world) -> dict:
    mc = cfg.model
    tokens = len(history) * cfg.batch_size * mc.seq_len
    params = model.num_params()
    loss = math.nan
    if not diverged and history:
        loss = evaluate(model, data, max_tokens=cfg.eval_tokens)
        diverged = not math.isfinite(loss)
        loss = math.nan if diverged else loss
    tokens_run = steps_run * cfg.batch_size * mc.seq_len
    return {
        "depth": mc.depth,
        "width": mc.width,
        "params": params,
        "params_nonembedding": model.num_params(embeddings=False),
        "tokens": tokens,
        "flops": flops_per_token(params) * tokens,
        "epochs": tokens / data.meta["train_tokens"],
        "loss": loss,
        "bpb": loss / math.log(2) / data.bytes_per_token,
        "train_loss": history[-1]["loss"] if history else math.nan,
        "variant": mc.variant,
        "seed": cfg.seed,
        "wall_s": wall,
        "diverged": bool(diverged),
        "steps": len(history),
        "tokens_per_s": tokens_run / wall if wall > 0 else math.nan,
        "block": mc.block,
        "embeddings": mc.embeddings,
        "vocab": mc.vocab,
        "seq_len": mc.seq_len,
        "cr_loss": cfg.cr_loss,
        "ortho_loss": cfg.ortho_loss,
        "world": world,
        **_throughput(cfg, params, tokens_run / wall if wall > 0 else math.nan, world),
    }


def _throughput(cfg: TrainConfig, params: int, tok_s: float, world: int) -> dict:
    """FLOPs per token with attention, achieved FLOP/s and MFU (NaN without a datasheet peak)."""
    mc = cfg.model
    fpt = flops_per_token(params, depth=mc.depth, width=mc.width, seq_len=mc.seq_len)
    device = pick_device(cfg.device)
    precision = runtime_choices(cfg, device.type)["precision"]
    peak = device_peak(device, precision) * world
    return {
        "flops_per_token": fpt,
        "flops_per_s": fpt * tok_s,
        "mfu": mfu(tok_s, params, mc.depth, mc.width, mc.seq_len, peak),
        "precision": precision,
    }
