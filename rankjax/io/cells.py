r"""The ``index:value`` cells of an SVMlight file, formatted by numpy digit arithmetic
instead of one Python ``repr`` per value (the writer's cost on LETOR-sized files).

A value with at most :data:`MAX_DECIMALS` decimals (every LETOR feature file) is
written as that decimal: with :math:`s = round(|v| 10^9)` and :math:`s / 10^9 == |v|` in
float64, the decimal :math:`s / 10^9` reads back as the float nearest to it, which is
``v`` (both are the correctly rounded value of the same rational). Trailing zeros of
the fraction are dropped; whole numbers are written as integers. Any other value falls
back to ``repr`` (the shortest string that reads back
exactly).
"""
from __future__ import annotations

import numpy as np

MAX_DECIMALS = 9
_P10 = 10 ** np.arange(19, dtype=np.int64)
_CHUNK = 1 << 20                     # cells per block (bounds the digit matrices' memory)


def _digits(x, width):
    """``[N, width]`` ASCII digits of ``x >= 0`` (right-aligned) and the mask of the
    significant ones (the last digit always)."""
    pw = _P10[width - 1::-1]
    sig = x[:, None] >= pw[None, :]
    sig[:, -1] = True
    return ((x[:, None] // pw[None, :]) % 10 + 48).astype(np.uint8), sig


def _width(x) -> int:
    return len(str(int(x.max()))) if x.size else 1


def _decimals(a):
    r"""Which values have at most :data:`MAX_DECIMALS` decimals (one pass: :math:`s =
    round(a 10^9)` with :math:`s / 10^9 == a`), and ``s`` as int64."""
    scale = float(_P10[MAX_DECIMALS])
    s = np.round(a * scale)
    ok = (s / scale == a) & (s < 2.0 ** 53)
    return ok, np.where(ok, s, 0).astype(np.int64)


def _block(cols, v, s):
    r"""``(bytes, lengths)`` of the cells ``"col:value "`` of one block of decimal values
    (``s``: their magnitudes times :math:`10^9`); trailing zeros of the fraction are dropped."""
    ip, fp = s // _P10[MAX_DECIMALS], s % _P10[MAX_DECIMALS]
    n = v.shape[0]
    one = np.ones((n, 1), bool)
    cd, cm = _digits(cols, _width(cols))
    idg, im = _digits(ip, _width(ip))
    fd, _ = _digits(fp, MAX_DECIMALS)                  # nine fraction digits, zero-padded
    nz = fd != 48
    fm = np.cumsum(nz[:, ::-1], axis=1)[:, ::-1] > 0   # up to the last nonzero digit
    parts = [cd, np.full((n, 1), 58, np.uint8), np.full((n, 1), 45, np.uint8), idg,
             np.full((n, 1), 46, np.uint8), fd, np.full((n, 1), 32, np.uint8)]
    masks = [cm, one, (v < 0)[:, None], im, fm[:, :1], fm, one]
    M = np.concatenate(masks, axis=1)
    return np.concatenate(parts, axis=1)[M], M.sum(axis=1)


def format_cells(cols, values):
    """The cells ``"col:value "`` (each with its trailing space) of ``cols [N]`` (int)
    and finite ``values [N]`` (float64), concatenated: ``(uint8 bytes, lengths [N])``.

    Example:
      >>> b, n = format_cells(np.array([1, 12]), np.array([0.5, -3.0]))
      >>> b.tobytes(), n.tolist()
      (b'1:0.5 12:-3 ', [6, 6])
    """
    cols = np.asarray(cols, np.int64)
    values = np.asarray(values, np.float64)
    ok, scaled = _decimals(np.abs(values))
    fast = np.flatnonzero(ok)
    slow = np.flatnonzero(~ok)
    lengths = np.zeros(values.shape, np.int64)
    pieces = []
    for a in range(0, fast.size, _CHUNK):
        i = fast[a:a + _CHUNK]
        b, n = _block(cols[i], values[i], scaled[i])
        pieces.append(b)
        lengths[i] = n
    if slow.size == 0:                                   # every LETOR file
        return (np.concatenate(pieces) if pieces else np.zeros(0, np.uint8)), lengths
    text = [f"{c}:{v!r} ".encode() for c, v in zip(cols[slow].tolist(), values[slow].tolist())]
    lengths[slow] = [len(t) for t in text]
    out = np.empty(int(lengths.sum()), np.uint8)
    start = np.cumsum(lengths) - lengths
    if fast.size:                    # scatter the fast cells' bytes to their places
        nf = lengths[fast]
        within = np.arange(int(nf.sum())) - np.repeat(np.cumsum(nf) - nf, nf)
        out[np.repeat(start[fast], nf) + within] = np.concatenate(pieces)
    for i, t in zip(slow.tolist(), text):
        out[start[i]:start[i] + len(t)] = np.frombuffer(t, np.uint8)
    return out, lengths
