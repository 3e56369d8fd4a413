"""Figures live in the benchmarks' lines, never in the library's docstrings or comments
(issue 78): a measured time (``40 ms``, ``68 s``), a measured score (``NDCG@10 0.9217``) or
a measured ratio (``1.8x slower``) in a docstring or comment of ``rankjax/`` fails here.
Doctest examples (their ``>>>`` lines and outputs) are code, not figures. A docstring says
what and why and names the benchmark (or ``benchmarks/design_measurements.md``, where the
measurements behind design constants are kept)."""
import io
import pathlib
import re
import tokenize

import pytest

PKG = pathlib.Path(__file__).resolve().parent.parent / "rankjax"

TIME = re.compile(r"(?<![\w.^])\d[\d,]*(?:\.\d+)?\s?(?:ns|µs|us|ms|s|min|minutes|seconds)\b"
                  r"(?![\w\-(])")
SCORE = re.compile(r"\b(?:NDCG(?:@\d+)?|MAP|AUC|accuracy)\b[^.;:\n]{0,20}?\b0\.\d{3,}")
RATIO = re.compile(r"\b\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?x (?:faster|slower|off)\b")
PATTERNS = (TIME, SCORE, RATIO)


def prose(text):
    """``text`` without its doctest examples (``>>>`` / ``...`` lines and their output)."""
    out, example = [], False
    for line in text.splitlines():
        s = line.strip()
        if s.startswith((">>>", "...")):
            example = True
            continue
        if example and s:
            continue
        example = False
        out.append(line)
    return "\n".join(out)


def figures(source):
    """``[(line, figure)]`` of the measured figures in the comments and docstrings (every
    triple-quoted string) of ``source``."""
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            text = tok.string
        elif tok.type == tokenize.STRING and tok.string.lstrip("rbuRBU")[:3] in ('"""', "'''"):
            text = prose(tok.string)
        else:
            continue
        found += [(tok.start[0], m.group()) for p in PATTERNS for m in p.finditer(text)]
    return found


@pytest.mark.parametrize("text", ["took 40 ms against 49 ms", "at 10^6 rows 68 s",
                                  "test NDCG@10 0.9217 against 0.8950", "made it 1.8x slower",
                                  "1.4-2x faster in float64"])
def test_the_check_sees_a_measured_figure(text):
    assert figures(f'"""{text}."""\n') and figures(f"x = 1  # {text}\n")


@pytest.mark.parametrize("text", [">>> f(1)\n0.9217", "O(m b^2) time", "10^6 rows", "λ = 1e-4",
                                  "a 2-core CPU", "4 GiB if unknown", "``verbose`` seconds"])
def test_the_check_passes_what_is_not_a_measurement(text):
    assert not figures(f'"""{text}\n"""\n')


def test_no_measured_figure_in_a_docstring_or_comment():
    bad = [f"{p.relative_to(PKG)}:{line}: {fig!r}" for p in sorted(PKG.rglob("*.py"))
           for line, fig in figures(p.read_text())]
    assert not bad, "measured figures belong in the benchmarks' lines:\n" + "\n".join(bad)
