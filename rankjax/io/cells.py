"""The ``index:value`` cells of an SVMlight file, formatted by numpy digit arithmetic
instead of one Python ``repr`` per value (the writer's cost on LETOR-sized files).

A value with at most :data:`MAX_DECIMALS` decimals (every LETOR feature file) is
written as that decimal: with ``s = round(|v| 10^d)`` and ``s / 10^d == |v|`` in
float64, the decimal ``s / 10^d`` reads back as the float nearest to it, which is
``v`` (both are the correctly rounded value of the same rational). ``d`` is the
smallest that works, so no trailing zero is written; whole numbers are written as
integers. Any other value falls back to ``repr`` (the shortest string that reads back
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
    """The smallest ``d <= MAX_DECIMALS`` with ``round(a 10^d) / 10^d == a`` per value
    (-1: none) and ``round(a 10^d)`` as int64."""
    dec = np.full(a.shape, -1, np.int64)
    scaled = np.zeros(a.shape, np.int64)
    todo = np.flatnonzero(a < 2.0 ** 52)
    for d in range(MAX_DECIMALS + 1):
        if todo.size == 0:
            break
        s = np.round(a[todo] * float(_P10[d]))
        hit = (s / float(_P10[d]) == a[todo]) & (s < 2.0 ** 53)
        dec[todo[hit]] = d
        scaled[todo[hit]] = s[hit].astype(np.int64)
        todo = todo[~hit]
    return dec, scaled


def _block(cols, v, dec, s):
    """``(bytes, lengths)`` of the cells ``"col:value "`` of one block of decimal values
    (``dec``, ``s``: their decimals and scaled magnitudes)."""
    ip, fp = s // _P10[dec], s % _P10[dec]
    n = v.shape[0]
    one = np.ones((n, 1), bool)
    cd, cm = _digits(cols, _width(cols))
    idg, im = _digits(ip, _width(ip))
    parts = [cd, np.full((n, 1), 58, np.uint8), np.full((n, 1), 45, np.uint8), idg]
    masks = [cm, one, (v < 0)[:, None], im]
    wf = int(dec.max()) if n else 0
    if wf:
        e = dec[:, None] - 1 - np.arange(wf)[None, :]
        parts += [np.full((n, 1), 46, np.uint8),
                  ((fp[:, None] // _P10[np.clip(e, 0, None)]) % 10 + 48).astype(np.uint8)]
        masks += [(dec > 0)[:, None], e >= 0]
    parts.append(np.full((n, 1), 32, np.uint8))
    masks.append(one)
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
    dec, scaled = _decimals(np.abs(values))
    fast = np.flatnonzero(dec >= 0)
    slow = np.flatnonzero(dec < 0)
    lengths = np.zeros(values.shape, np.int64)
    pieces = []
    for a in range(0, fast.size, _CHUNK):
        i = fast[a:a + _CHUNK]
        b, n = _block(cols[i], values[i], dec[i], scaled[i])
        pieces.append(b)
        lengths[i] = n
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
