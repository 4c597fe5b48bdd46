"""``scalefit train run|grid|diagnose`` and ``scalefit data prepare``: the reference trainer."""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path

from ..core._io import MAX_CONFIG_BYTES, atomic_write_csv, atomic_write_json, inside, read_toml
from ..core._validation import fmt_value
from ..core.errors import ScaleFitError
from ._common import add_option, check_paths


def register(sub) -> None:
    """Add the ``train`` and ``data`` commands."""
    p = sub.add_parser("train")
    tsub = p.add_subparsers(dest="train_command", metavar="SUBCOMMAND")
    _register_run(tsub)
    _register_grid(tsub)
    _register_diagnose(tsub)
    _register_report(tsub)
    _register_data(sub)


def _register_run(tsub) -> None:
    run = tsub.add_parser("run", help="train one configuration (works under torchrun)")
    run.add_argument("config", metavar="CONFIG.toml", help="flat TOML of trainer settings")
    add_option(run, "--out", metavar="DIR", help="run folder", shown="runs/NAME of the config")
    run.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting (TOML value syntax), repeatable",
    )
    add_option(run, "--no-progress", help="hide the progress bar")
    add_option(run, "--nproc-per-node")
    add_option(
        run,
        "--overwrite",
        help="discard what --out holds (a run started with other settings is refused otherwise)",
    )
    run.set_defaults(func=_cmd_run)


def _register_grid(tsub) -> None:
    grid = tsub.add_parser("grid", help="run a depth x width x tokens x variant x seed grid")
    grid.add_argument(
        "specs",
        nargs="+",
        metavar="GRID.toml",
        help="sweep spec(s) with task = 'train'; several share one output folder",
    )
    for flag in ("--workers", "--executor", "--threads"):
        add_option(grid, flag)
    add_option(
        grid, "--out", metavar="DIR", help="sweep folder", shown="runs/NAME of the first spec"
    )
    grid.add_argument(
        "--table",
        default=None,
        metavar="CSV",
        help="also write the loss table (canonical columns first) here",
    )
    add_option(
        grid,
        "--overwrite",
        help="replace a grid spec of the same name that ran in --out with other settings",
    )
    for flag in ("--resume-from", "--max-minutes"):
        add_option(grid, flag)
    grid.set_defaults(func=_cmd_grid)


def _register_diagnose(tsub) -> None:
    diag = tsub.add_parser("diagnose", help="per-layer diagnostics of a checkpoint")
    diag.add_argument("checkpoint", metavar="CHECKPOINT", help="checkpoint.pt of a run")
    add_option(
        diag, "--out", metavar="CSV", help="tidy CSV", shown="diagnostics.csv beside the checkpoint"
    )
    diag.add_argument(
        "--eval-tokens", type=int, default=16_384, metavar="N", help="tokens of the evaluation"
    )
    diag.set_defaults(func=_cmd_diagnose)


def _register_report(tsub) -> None:
    rep = tsub.add_parser("report", help="loss table, decomposed fit and figures of a grid")
    rep.add_argument("out_dir", metavar="DIR", help="a sweep folder written by `train grid`")
    rep.add_argument("--table", default=None, metavar="CSV", help="write the loss table here")
    add_option(rep, "--plots", help="write the PNG figures into DIR")
    rep.add_argument(
        "--with",
        dest="extra",
        action="append",
        default=[],
        metavar="CSV",
        help="another grid's loss table whose rows join the fit (repeatable)",
    )
    add_option(rep, "--bootstrap", help="bootstrap resamples of the fit")
    add_option(rep, "--seed", help="seed of the bootstrap")
    rep.set_defaults(func=_cmd_report)


def _register_data(sub) -> None:
    d = sub.add_parser("data")
    dsub = d.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
    prep = dsub.add_parser("prepare", help="fetch a corpus into the cache and tokenise it")
    prep.add_argument(
        "name",
        help="shakespeare, brown, a text file/folder, or (with --shards) a .jsonl/.txt/.parquet "
        "file or folder, or hf:NAME[:SPLIT]",
    )
    prep.add_argument(
        "--tokenizer",
        default="byte",
        metavar="KIND",
        help="byte or bpe; with --shards: bpe (trained here) or a tokenizer.json path",
    )
    prep.add_argument(
        "--bpe-vocab", type=int, default=1024, metavar="V", help="vocabulary size of a trained BPE"
    )
    prep.add_argument(
        "--shards",
        action="store_true",
        help="write memory-mapped token shards + manifest.json for streaming (a real corpus)",
    )
    add_option(prep, "--out", metavar="DIR", help="shard folder (with --shards)")
    prep.add_argument(
        "--shard-tokens", type=int, default=1 << 24, metavar="N", help="tokens per shard"
    )
    prep.add_argument(
        "--val-fraction",
        type=float,
        default=None,
        metavar="F",
        help="share of the documents held out for validation",
        shown="0.05 with --shards, else 0.1",
    )
    add_option(prep, "--text-field")
    prep.set_defaults(func=_cmd_prepare)


def _overrides(items: list[str]) -> dict:
    """``--set KEY=VALUE`` items as settings: one line each, the value in TOML syntax.

    A value that is not TOML is taken as a string (the settings' validation names it when a
    string does not belong there). Control characters are refused: a newline would let one
    ``--set`` carry a second, silently dropped TOML line.
    """
    import tomllib

    out = {}
    for item in items:
        shown = fmt_value(item)
        if any(unicodedata.category(c) == "Cc" for c in item):
            raise ScaleFitError(
                f"--set expects one KEY=VALUE on one line, without newlines or other control "
                f"characters; got {shown}."
            )
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise ScaleFitError(f"--set expects KEY=VALUE with KEY a setting name; got {shown}.")
        try:
            out[key] = tomllib.loads(f"v = {value}")["v"]
        except tomllib.TOMLDecodeError:
            out[key] = value
    return out


def _cmd_run(args) -> int:
    from ..train.grid import TASK_KEYS, validate_task_keys
    from ..train.loop import config_from_dict, train

    check_paths(
        inputs={"trainer configuration (TOML file)": args.config},
        folders={"--out": args.out},
        max_bytes=MAX_CONFIG_BYTES,
    )
    settings = read_toml(args.config, what="trainer configuration")
    raw = {**_data_inside(settings, args.config), **_overrides(args.set)}
    task = {k: raw.pop(k, v) for k, v in TASK_KEYS.items()}
    validate_task_keys(task, source=args.config)
    cfg = config_from_dict(raw, source=args.config)
    name = str(raw.get("name", Path(args.config).stem))
    out = Path(args.out or inside("runs", name, what=f"{args.config}: run name (name)"))
    check_paths(folders={"output folder": out})  # the default runs/NAME too
    if args.nproc_per_node is not None:
        return _launch(args, out)
    try:
        if cfg.cooldowns:
            return _run_cooldowns(cfg, out, args, task)
        res = train(cfg, out, progress=not args.no_progress, overwrite=args.overwrite)
    finally:
        _close_process_group()
    return _write_run(out, cfg, task, res, res.row, [(out, res.row)])


def _launch(args, out: Path) -> int:
    """``train run`` in ``--nproc-per-node`` processes; a failed one said in one line."""
    import sys

    from ..train.launch import launch

    if "TORCHELASTIC_RUN_ID" in os.environ:
        raise ScaleFitError(
            "--nproc-per-node starts the processes itself; under torchrun leave it out "
            f"(torchrun's --nproc_per_node chose them). Got --nproc-per-node {args.nproc_per_node}."
        )
    argv = ["train", "run", args.config, "--out", str(out)]
    argv += [f"--set={item}" for item in args.set]
    argv += ["--no-progress"] * args.no_progress + ["--overwrite"] * args.overwrite
    failure = launch(argv, nproc_per_node=args.nproc_per_node)
    if failure is None:
        return 0
    print(f"scalefit: error: {failure.line()}", file=sys.stderr)
    return failure.code


def _data_inside(settings: dict, source: str) -> dict:
    """``settings`` with a relative ``data`` path of a configuration file made inside its folder.

    A corpus name and an absolute path are kept; a relative path is taken from the
    configuration's folder, and one with a ``..`` part or a link leading out of it is refused
    (:func:`scalefit.core._io.inside`). ``--set data=...`` on the command line is the user's own.
    """
    from ..train.data import CORPORA

    data = settings.get("data")
    if isinstance(data, str) and data not in CORPORA and not Path(data).is_absolute():
        folder = Path(source).parent
        settings["data"] = str(inside(folder, data, what=f"{source}: data path (data)"))
    return settings


def _write_run(out: Path, cfg, task: dict, main, result, printed: list) -> int:
    """Write a finished run's diagnostics (if asked) and result.json (rank 0 only); say so."""
    from ..train.diagnostics import diagnose

    if int(os.environ.get("RANK", "0")) != 0:
        return 0
    diagnosed = task["diagnose"] and not main.row["diverged"]
    if diagnosed:
        frame = diagnose(main.model, main.data, eval_tokens=int(task["diag_tokens"]))
        atomic_write_csv(out / "diagnostics.csv", frame)
    atomic_write_json(out / "result.json", {"config": cfg.to_dict(), "result": result})
    for where, row in printed:
        _print_row(where, row)
    if diagnosed:
        print(f"wrote {out / 'diagnostics.csv'}")
    print(f"wrote {out / 'result.json'}")
    return 0


def _print_row(out, row: dict) -> None:
    status = "DIVERGED" if row["diverged"] else f"loss {row['loss']:.4f} nats/token"
    print(
        f"{out}: depth {row['depth']} width {row['width']} params {row['params']:,} "
        f"tokens {row['tokens']:,}: {status}, {row['bpb']:.4f} bits/byte, "
        f"{row['tokens_per_s']:,.0f} tokens/s"
    )


def _run_cooldowns(cfg, out: Path, args, task: dict) -> int:
    """``train run`` of a WSD run with cooldown branches: one result row per budget."""
    from ..train.branches import train_cooldowns

    res = train_cooldowns(cfg, out, progress=not args.no_progress, overwrite=args.overwrite)
    rows = res.rows()
    branch = out / "cooldowns"
    where = [out if r["branch"] == "main" else branch / f"tokens_{r['budget']}" for r in rows]
    return _write_run(out, cfg, task, res.main, {"rows": rows}, list(zip(where, rows, strict=True)))


def _close_process_group() -> None:
    import torch

    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def _cmd_grid(args) -> int:
    from ..sweep import collect_results, load_spec, run_sweep
    from ..train.grid import TABLE_COLUMNS

    check_paths(
        inputs=[("sweep spec (TOML file)", s) for s in args.specs],
        files={"--table": args.table},
        folders={"--out": args.out},
        max_bytes=MAX_CONFIG_BYTES,
    )
    specs = [load_spec(s) for s in args.specs]
    for spec, path in zip(specs, args.specs, strict=True):
        if spec.task not in ("train", "scalefit.train.grid:run_train_task"):
            raise ScaleFitError(f"{path}: [sweep] task must be 'train'; got {spec.task!r}.")
        _data_inside(spec.fixed, path)
        if isinstance(spec.grid.get("data"), list):
            spec.grid["data"] = [_data_inside({"data": d}, path)["data"] for d in spec.grid["data"]]
    for spec, path in zip(specs, args.specs, strict=True):
        if args.executor == "local":
            _check_grid_memory(spec, path, workers=args.workers)
    out = Path(args.out or Path("runs") / specs[0].name)
    check_paths(folders={"output folder": out})  # the default runs/NAME too
    if args.resume_from or args.max_minutes:
        return _grid_chunk(specs, args, out)
    for spec in specs:
        run_sweep(
            spec,
            out,
            workers=args.workers,
            executor=args.executor,
            threads_per_worker=args.threads,
            overwrite=args.overwrite,
        )
    runs = [r for spec in specs for r in spec.runs()]
    table = collect_results(out, runs)
    if args.table:
        first = [c for c in TABLE_COLUMNS if c in table.columns]
        atomic_write_csv(args.table, table[first + [c for c in table.columns if c not in first]])
    done = int(table["loss"].notna().sum()) if "loss" in table else 0
    diverged = int(table["diverged"].astype(bool).sum()) if "diverged" in table else 0
    finished = table["run_id"].nunique() if "run_id" in table else len(table)
    extra = f"{len(table)} rows (cooldown branches), " if len(table) != finished else ""
    print(
        f"{out}/results.csv: {finished} finished runs of {len(runs)} "
        f"({extra}{done} with a loss, {diverged} diverged)"
    )
    if args.table:
        print(f"wrote {args.table}")
    return 0


def _grid_chunk(specs, args, out: Path) -> int:
    """``train grid --resume-from CSV [--max-minutes M]``: one chunk of a grid (train/chunk.py)."""
    from ..train.chunk import run_chunk

    if not args.resume_from:
        raise ScaleFitError("--max-minutes needs --resume-from CSV (the grid's loss table).")
    if len(specs) != 1:
        raise ScaleFitError(f"--resume-from takes one grid spec; got {len(specs)}.")
    check_paths(files={"--resume-from": args.resume_from})
    report = run_chunk(specs[0], out, args.resume_from, max_minutes=args.max_minutes)
    why = {
        "complete": "the table already holds every run",
        "time": f"the next run would not finish within {args.max_minutes} minutes",
        "all": "every missing run ran",
    }[report.stopped]
    print(
        f"{args.resume_from}: {len(report.ran)} runs added by this chunk, "
        f"{report.remaining} of {len(specs[0].runs())} still missing ({why})"
    )
    return 0


def _check_grid_memory(spec, path: str, *, workers: int) -> None:
    """Refuse a local grid whose largest run cannot fit in memory, before any run starts.

    Local workers on the CPU train side by side, so the check counts the largest run once per
    worker.
    """
    from ..train.grid import TASK_KEYS, validate_config
    from ..train.loop import config_from_dict
    from ..train.memory import check_run_memory

    runs = spec.runs()
    share = max(1, min(workers, len(runs)))
    for run in runs:
        try:
            validate_config(run.config)
            rest = {k: v for k, v in run.config.items() if k not in TASK_KEYS}
            cfg = config_from_dict(rest, source=path)
        except ScaleFitError as exc:
            raise ScaleFitError(f"{path}: run {run.run_id}: {exc}") from None
        check_run_memory(cfg, where=f"{path}: run {run.run_id}: ", processes=share)


def _cmd_report(args) -> int:
    from ..workflows.train_report import grid_report

    check_paths(
        inputs=[("loss table (CSV)", p) for p in args.extra],
        files={"--table": args.table},
        folders={"--plots": args.plots},
    )
    out = grid_report(
        args.out_dir,
        table_path=args.table,
        img_dir=args.plots,
        extra_tables=args.extra,
        bootstrap=args.bootstrap,
        seed=args.seed,
    )
    table = out["table"]
    cols = ["variant", "tokens", "depth", "width", "params", "loss", "bpb", "wall_s"]
    print(table[cols].to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    if out["variants"] is not None:
        print(out["variants"].to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    if out["fit"] is not None:
        print(out["fit"].report())
    if args.table:
        print(f"wrote {args.table}")
    for path in out["figures"]:
        print(f"wrote {path}")
    return 0


def _cmd_diagnose(args) -> int:
    from ..train.diagnostics import diagnose
    from ..train.loop import config_from_dict, load_checkpoint, prepare_data
    from ..train.model import Transformer

    path = Path(args.checkpoint)
    out = Path(args.out) if args.out else path.parent / "diagnostics.csv"
    check_paths(inputs={"trainer checkpoint": path}, files={"--out": out})
    state = load_checkpoint(path)
    if not isinstance(state, dict) or "config" not in state:
        raise ScaleFitError(f"{path}: not a trainer checkpoint (no 'config').")
    if "model" not in state:
        raise ScaleFitError(
            f"{path}: a sharded (FSDP2) checkpoint; its weights are in {state.get('dcp')!r}. "
            "Diagnose an unsharded run's checkpoint instead."
        )
    cfg = config_from_dict(state["config"], source=str(path))
    _check_weights_match(path, cfg, state["model"])  # before the model is allocated
    model = Transformer(cfg.model)
    try:
        model.load_state_dict(state["model"])
    except (RuntimeError, TypeError, AttributeError, KeyError, ValueError) as exc:
        detail = " ".join(str(exc).split())[:200]
        raise ScaleFitError(f"{path}: its weights do not fit its settings ({detail}).") from None
    frame = diagnose(model, prepare_data(cfg), eval_tokens=args.eval_tokens)
    atomic_write_csv(out, frame)
    wide = frame.pivot(index="layer", columns="metric", values="value")
    print(wide.to_string(float_format=lambda v: f"{v:.4g}"))
    print(f"wrote {out}")
    return 0


def _check_weights_match(path: Path, cfg, weights) -> None:
    """Refuse a checkpoint whose config describes another model than its weights.

    The model is built from the config: a config asking for far more parameters than the file
    holds (``width = 65536`` beside a tiny model's weights) would allocate them first.
    """
    import torch

    if not isinstance(weights, dict) or not all(torch.is_tensor(t) for t in weights.values()):
        raise ScaleFitError(f"{path}: 'model' is not a table of tensors.")
    stored = {t.untyped_storage().data_ptr(): t.numel() for t in weights.values()}
    held, expected = sum(stored.values()), cfg.model.expected_params()
    if held != expected:
        raise ScaleFitError(
            f"{path}: its config describes a model of {expected:,} parameters, but its weights "
            f"hold {held:,}; the checkpoint is not one the trainer wrote."
        )


def _cmd_prepare_shards(args, val_fraction: float) -> int:
    from ..train.shards import prepare_shards

    if args.out is None:
        raise ScaleFitError("data prepare --shards needs --out DIR (the shard folder).")
    tokenizer_file = None if args.tokenizer in ("bpe", "byte") else args.tokenizer
    check_paths(inputs={"tokenizer (tokenizer.json)": tokenizer_file}, folders={"--out": args.out})
    out = prepare_shards(
        args.name,
        args.out,
        tokenizer="bpe" if args.tokenizer == "byte" else args.tokenizer,
        vocab_size=args.bpe_vocab,
        shard_tokens=args.shard_tokens,
        val_fraction=val_fraction,
        text_field=args.text_field,
    )
    from ..train.shards import _read_manifest

    m = _read_manifest(out)
    print(
        f"shards: {out} (train {m['train_tokens']:,} tokens in {len(m['train'])} shard(s), "
        f"val {m['val_tokens']:,}; {m.get('train_docs', '?')} + {m.get('val_docs', '?')} "
        f"documents; vocab {m['vocab']}, {m['dtype']})"
    )
    return 0


def _cmd_prepare(args) -> int:
    from ..train.data import CORPORA, cached_tokens, prepare_corpus

    if args.shards:
        return _cmd_prepare_shards(args, 0.05 if args.val_fraction is None else args.val_fraction)
    if args.tokenizer not in ("byte", "bpe"):
        raise ScaleFitError(
            f"The '--tokenizer' option must be 'byte' or 'bpe' (a tokenizer.json path needs "
            f"--shards). Got {args.tokenizer!r} instead."
        )
    if args.out is not None:
        raise ScaleFitError(
            "--out is the shard folder of --shards; without --shards the tokens go to the cache "
            "($SCALEFIT_CACHE_DIR/tokens)."
        )
    source = prepare_corpus(args.name) if args.name in CORPORA else Path(args.name)
    if not source.exists():
        raise ScaleFitError(f"{args.name!r} is neither a corpus ({sorted(CORPORA)}) nor a path.")
    out = cached_tokens(
        args.name if args.name in CORPORA else source,
        tokenizer=args.tokenizer,
        vocab_size=args.bpe_vocab,
        val_fraction=0.1 if args.val_fraction is None else args.val_fraction,
    )
    from ..train._tokenfiles import read_token_meta

    meta = read_token_meta(out / "meta.json", what="token folder metadata")
    print(f"corpus: {source}")
    print(
        f"tokens: {out} (train {meta['train_tokens']:,}, val {meta['val_tokens']:,}, "
        f"vocab {meta['vocab']}, {len(meta.get('val_docs') or ())} held-out documents)"
    )
    return 0
