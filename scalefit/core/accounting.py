"""Parameter and FLOP accounting shared by the trainer and the allocation solvers.

One definition of "how many parameters does a decoder-only transformer of depth ℓ and width W
have", written down exactly, so a table's ``params`` column and a compute-optimal solver agree.

What is counted (all weights have no bias):

* **attention**: query, key, value and output projections, ``4·W²`` per block;
* **MLP**: ``standard`` (GELU) block: ``W→H→W`` = ``2·W·H`` with ``H = mlp_ratio·W`` (``8·W²`` at
  the default ratio 4, so a standard block is ``12·W²``); ``swiglu`` block: gate, up and down
  projections ``3·W·H`` with ``H = ffn_hidden`` or, by default, ``round_up(8·W/3, 8)``
  (≈ ``8·W²``, so ≈ ``12·W²`` per block; the exact ``H`` is used, not the approximation);
* **norms** (``norms=True``): one RMSNorm gain of size ``W`` before attention and one before the
  MLP in every block, a final norm of size ``W``, and two more gains for every tree merge of the
  CR-guided residual path (``tree_merges``); RoPE has no parameters;
* **embeddings**: ``tied`` adds ``V·W`` (the output head shares the token embedding),
  ``untied`` adds ``2·V·W``, ``excluded`` adds nothing (the non-embedding count).

The trainer's model (:mod:`scalefit.train.model`) is tested to have exactly this many parameters.
"""

from __future__ import annotations

import numpy as np

from ._validation import Interval, Options, validate
from .errors import ScaleFitError

BLOCKS = ("standard", "swiglu")
EMBEDDINGS = ("tied", "untied", "excluded")
#: How many ``V·W`` matrices each embeddings convention counts (the one table of this rule).
EMBEDDING_COPIES = {"tied": 1, "untied": 2, "excluded": 0}
#: Vocabulary counted when a law's options do not name one (Chinchilla's tokenizer).
DEFAULT_VOCAB = 32_000
#: The declared constraints of the accounting options.
CONSTRAINTS = {
    "embeddings": [Options(set(EMBEDDINGS))],
    "block": [Options(set(BLOCKS))],
    "params": [Interval(float, 0, None, closed="neither")],
}


def embedding_copies(embeddings: str) -> int:
    """Number of ``V·W`` embedding matrices counted: tied 1, untied 2, excluded 0.

    Examples
    --------
    >>> embedding_copies("untied")
    2
    """
    validate("embedding_copies", {"embeddings": embeddings}, CONSTRAINTS)
    return EMBEDDING_COPIES[embeddings]


def standard_params(depth, width, *, vocab: int, embeddings: str = "tied"):
    """``12·ℓ·W² + copies·V·W``: the standard-block count without norms, for any array type.

    Written with arithmetic operators only, so it works on floats, numpy and JAX arrays (the
    law catalogue evaluates it inside compiled fits).

    Examples
    --------
    >>> standard_params(2, 64, vocab=256, embeddings="tied")
    114688
    """
    return 12 * depth * width * width + embedding_copies(embeddings) * vocab * width


def swiglu_hidden(width: int, multiple_of: int = 8) -> int:
    """Default SwiGLU hidden size: ``8·W/3`` rounded up to a multiple of ``multiple_of``.

    Examples
    --------
    >>> swiglu_hidden(768)
    2048
    """
    raw = (8 * width + 2) // 3
    return multiple_of * ((raw + multiple_of - 1) // multiple_of)


def mlp_hidden(width: int, *, block: str = "standard", mlp_ratio: float = 4.0, ffn_hidden=None):
    """Hidden size of the MLP for a block type (see the module docstring)."""
    validate("mlp_hidden", {"block": block}, CONSTRAINTS)
    if ffn_hidden is not None:
        return _positive_int(ffn_hidden, "ffn_hidden", "mlp_hidden")
    if block == "swiglu":
        return swiglu_hidden(width)
    hidden = mlp_ratio * width
    if hidden <= 0 or hidden != int(hidden):
        raise ScaleFitError(
            f"The 'mlp_ratio' option times width must be a positive integer. Got {hidden!r}."
        )
    return int(hidden)


def param_count(
    depth: int,
    width: int,
    *,
    vocab: int,
    block: str = "standard",
    embeddings: str = "tied",
    mlp_ratio: float = 4.0,
    ffn_hidden: int | None = None,
    norms: bool = True,
    tree_merges: int = 0,
) -> int:
    """Exact parameter count of a decoder-only transformer.

    Parameters
    ----------
    depth, width : int
        Number of blocks ℓ and model width W.
    vocab : int
        Vocabulary size V.
    block : {"standard", "swiglu"}
        MLP type: GELU with ``mlp_ratio·W`` hidden units, or SwiGLU.
    embeddings : {"tied", "untied", "excluded"}
        How the token embedding and output head are counted.
    mlp_ratio : float
        Hidden/width ratio of the standard block (ignored when ``ffn_hidden`` is given).
    ffn_hidden : int, optional
        Explicit MLP hidden size.
    norms : bool
        Count the RMSNorm gains (``2·W`` per block, ``W`` final, ``2·W`` per tree merge).
    tree_merges : int
        Merges of the CR-guided tree residual path (see
        :func:`scalefit.train.model.tree_parents`); 0 for every other variant.

    Returns
    -------
    int
        The parameter count.

    Examples
    --------
    >>> param_count(2, 64, vocab=256, embeddings="excluded", norms=False)
    98304
    """
    depth, width, vocab = (
        _positive_int(v, n, "param_count")
        for v, n in ((depth, "depth"), (width, "width"), (vocab, "vocab"))
    )
    validate("param_count", {"embeddings": embeddings}, CONSTRAINTS)
    hidden = mlp_hidden(width, block=block, mlp_ratio=mlp_ratio, ffn_hidden=ffn_hidden)
    total = param_count_array(
        depth,
        width,
        vocab=vocab,
        block=block,
        embeddings=embeddings,
        mlp_ratio=mlp_ratio,
        ffn_hidden=hidden,
        norms=norms,
        tree_merges=int(tree_merges),
    )
    return int(round(float(total)))  # exact: counts stay far below 2**53


def param_count_array(
    depth,
    width,
    *,
    vocab: int,
    block: str = "standard",
    embeddings: str = "tied",
    mlp_ratio: float = 4.0,
    ffn_hidden=None,
    norms: bool = True,
    tree_merges=0,
    continuous: bool = False,
):
    """The parameter counter: vectorised over arrays of shapes (float results).

    :func:`param_count` is its validated integer front for one shape; there is no other counter.
    ``ffn_hidden`` (an explicit MLP hidden size) and ``tree_merges`` (merges of the CR-guided
    tree residual path, ``2·W`` norm gains each) are as in :func:`param_count`.

    With ``continuous=False`` (integer shapes) the count equals :func:`param_count` exactly
    (including the rounded SwiGLU hidden size). With ``continuous=True`` depth and width may be any
    positive reals and the SwiGLU hidden size is taken as exactly ``8·W/3``, so the count is a
    smooth quadratic ``a·W² + b·W`` in width (what the compute-optimal solvers differentiate).

    Examples
    --------
    >>> float(param_count_array(2, 64, vocab=256, embeddings="excluded", norms=False))
    98304.0
    """
    validate("param_count_array", {"embeddings": embeddings, "block": block}, CONSTRAINTS)
    depth = np.asarray(depth, dtype=float)
    width = np.asarray(width, dtype=float)
    if ffn_hidden is not None:
        hidden = np.asarray(ffn_hidden, dtype=float)
    elif block == "swiglu":
        hidden = 8.0 * width / 3.0 if continuous else 8.0 * np.ceil(((8 * width + 2) // 3) / 8)
    else:
        hidden = mlp_ratio * width
    mlp = (3.0 if block == "swiglu" else 2.0) * width * hidden
    total = depth * (4.0 * width * width + mlp)
    if norms:
        total = total + (2.0 * depth + 1.0 + 2.0 * np.asarray(tree_merges, dtype=float)) * width
    return total + embedding_copies(embeddings) * float(vocab) * width


def width_for_params(
    depth,
    params,
    *,
    vocab: int,
    block: str = "standard",
    embeddings: str = "tied",
    mlp_ratio: float = 4.0,
    norms: bool = True,
):
    """Inverse of ``param_count_array(..., continuous=True)`` in width: W with N(depth, W) = params.

    The continuous count is ``a·W² + b·W`` with ``a = depth·(4 + mlp_per_W²)`` and
    ``b = norms·(2·depth + 1) + embeddings·vocab``; the positive root is returned.

    Examples
    --------
    >>> float(width_for_params(2, 98304, vocab=256, embeddings="excluded", norms=False))
    64.0
    """
    depth = np.asarray(depth, dtype=float)
    params = np.asarray(params, dtype=float)
    quad = param_count_array(
        1.0,
        1.0,
        vocab=1,
        block=block,
        embeddings="excluded",
        mlp_ratio=mlp_ratio,
        norms=False,
        continuous=True,
    )
    a = depth * float(quad)
    b = embedding_copies(embeddings) * float(vocab) + ((2.0 * depth + 1.0) if norms else 0.0)
    return 2.0 * params / (b + np.sqrt(b * b + 4.0 * a * params))


def flops_per_token(
    params: float,
    *,
    depth: int | None = None,
    width: int | None = None,
    seq_len: int | None = None,
) -> float:
    """Training FLOPs per token: ``6·N`` (+ ``12·ℓ·W·seq_len`` for attention when given).

    The attention term is the PaLM/nanoGPT convention (query-key and attention-value products,
    forward and backward, no causal halving); it needs ``depth`` and ``width``.

    Examples
    --------
    >>> flops_per_token(1e6)
    6000000.0
    >>> flops_per_token(1e6, depth=2, width=64, seq_len=128)
    6196608.0
    """
    validate("flops_per_token", {"params": params}, CONSTRAINTS)
    flops = 6.0 * float(params)
    if seq_len is not None:
        if depth is None or width is None:
            raise ScaleFitError(
                "flops_per_token needs 'depth' and 'width' when 'seq_len' is given."
            )
        flops += 12.0 * depth * width * seq_len
    return flops


def training_flops(params, tokens):
    """Training compute ``C = 6·N·T`` (vectorised; the one place this rule is written).

    Examples
    --------
    >>> float(training_flops(1e9, 2e10))
    1.2e+20
    """
    return 6.0 * np.asarray(params, dtype=float) * np.asarray(tokens, dtype=float)


def training_compute(columns, options=None) -> tuple[str, object] | None:
    """Each row's training compute, named: ``("flops", column)``, else ``("flops_6NT", 6·N·T)``.

    ``N`` is the ``params`` column, else the count of the ``depth``/``width`` shape as the
    allocation solvers count it (standard blocks, no norms; a law's ``options`` give ``vocab``
    and ``embeddings``, default 32,000 tied). ``None`` when the columns do not fix compute.

    Examples
    --------
    >>> training_compute({"depth": [2], "width": [64], "tokens": [1e6]}, {"vocab": 256})
    ('flops_6NT', array([6.88128e+11]))
    """
    if "flops" in columns:
        return "flops", np.asarray(columns["flops"], dtype=float)
    if "tokens" not in columns:
        return None
    if "params" in columns:
        n = columns["params"]
    elif "depth" in columns and "width" in columns:
        opts = options or {}
        d, w = (np.asarray(columns[k], dtype=float) for k in ("depth", "width"))
        vocab, emb = int(opts.get("vocab", DEFAULT_VOCAB)), str(opts.get("embeddings", "tied"))
        n = param_count_array(d, w, vocab=vocab, embeddings=emb, norms=False, continuous=True)
    else:
        return None
    return "flops_6NT", training_flops(n, columns["tokens"])


def tokens_for_budget(budget, params):
    """Tokens ``T = C / (6·N)`` that spend a budget ``C`` on a model of ``N`` parameters.

    Examples
    --------
    >>> float(tokens_for_budget(1.2e20, 1e9))
    20000000000.0
    """
    return np.asarray(budget, dtype=float) / training_flops(params, 1.0)


def flops_text(value: float, digits: int = 3) -> str:
    """A FLOP count as it is typed: ``1e21``, ``3.2e20`` (not ``1e+21``), to ``digits`` figures.

    Examples
    --------
    >>> flops_text(3.2e20), flops_text(1.2345e13, digits=4), flops_text(512)
    ('3.2e20', '1.234e13', '512')
    """
    mant, _, exp = f"{float(value):.{digits}g}".partition("e")
    return f"{mant}e{int(exp)}" if exp else mant


def _positive_int(value, name: str, owner: str) -> int:
    """``value`` as an int (``64.0`` counts as 64); anything else is refused as not an int >= 1."""
    if isinstance(value, bool) or int(value) != value or int(value) <= 0:
        validate(owner, {name: value}, {name: [Interval(int, 1, None)]})
    return int(value)
