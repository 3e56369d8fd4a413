"""A benchmark's committed JSON lines and the README block written from them: each table
of the README between ``<!-- name: start -->`` and ``<!-- name: end -->`` is rendered from
the lines a run saved (``--save FILE``), never typed, so ``--lines FILE --readme README.md``
rewrites it byte for byte on any machine (``tests/test_readme.py``) and the documentation
includes the same block (``docs/which_solver.md``, ``docs/precision.md``)."""
import json
import os
import pathlib


def marks(name):
    """The README markers of block ``name``."""
    return f"<!-- {name}: start -->", f"<!-- {name}: end -->"


def read_lines(paths):
    """The JSON lines of ``paths`` (files), in order."""
    return [json.loads(x) for f in paths for x in open(f, encoding="utf-8") if x.startswith("{")]


def save_lines(path, lines):
    """Writes ``lines`` (dicts) to ``path``, one JSON line each, atomically."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(ln) + "\n" for ln in lines)
    os.replace(tmp, path)


def block(text, name):
    """The text between the markers of ``name`` in ``text`` (``None`` without them)."""
    start, end = marks(name)
    if start not in text or end not in text:
        return None
    return text.split(start, 1)[1].split(end, 1)[0]


def in_list_item(rows):
    """The lines ``rows`` of a table and its note indented into a README list item (blank
    lines left empty)."""
    return "\n".join("  " + r if r else "" for r in rows)


def rewrite(readme, name, body, indent=""):
    """Replaces the block ``name`` of the file ``readme`` by ``"\\n" + body + "\\n"``, the
    end marker after ``indent`` (a block inside a list item), atomically; an error when
    the file has no such markers."""
    start, end = marks(name)
    text = pathlib.Path(readme).read_text(encoding="utf-8")
    if block(text, name) is None:
        raise SystemExit(f"{readme} has no {start} ... {end} markers")
    head, rest = text.split(start, 1)
    tail = rest.split(end, 1)[1]
    tmp = pathlib.Path(f"{readme}.tmp")
    tmp.write_text(head + start + "\n" + body + "\n" + indent + end + tail, encoding="utf-8")
    tmp.replace(readme)


def add_arguments(ap, name):
    """``--save``, ``--lines`` and ``--readme`` of a benchmark that writes block ``name``."""
    ap.add_argument("--save", help="write the run's JSON lines to this file (atomically)")
    ap.add_argument("--lines", nargs="*", help="JSON-line files of an earlier run (no run)")
    ap.add_argument("--readme", help=f"rewrite the {name} block of this file")


def from_lines(args, name, render, indent=""):
    """With ``--lines``: the block rendered from the saved lines, printed or written into
    ``--readme``; True when it did (the benchmark then runs nothing)."""
    if args.lines is None:
        return False
    text = render(read_lines(args.lines))
    if args.readme:
        rewrite(args.readme, name, text, indent)
    else:
        print(text)
    return True


def add_learner_arguments(ap):
    """``--learners`` (fit only the learners whose names contain one of these
    comma-separated parts) and ``--keep`` (a saved run whose other learners' lines are
    kept: their code unchanged)."""
    ap.add_argument("--learners", default="", help="fit only the learners whose names contain "
                    "one of these comma-separated parts")
    ap.add_argument("--keep", help="a saved run whose lines of the other learners are kept")


def named(args, learner):
    """Whether this run fits ``learner`` (``--learners``; empty: every one)."""
    parts = [p for p in args.learners.split(",") if p]
    return not parts or any(p in learner for p in parts)


def kept(args):
    """The lines of ``--keep`` of the learners this run does not fit."""
    if not args.keep:
        return []
    return [r for r in read_lines([args.keep]) if "learner" in r and not named(args, r["learner"])]


def learners_note(run):
    """The block's note on a run of some learners (``--learners``), or ``""``."""
    if not run.get("learners"):
        return ""
    return (f" for the learners named {', '.join(run['learners'])} (`--learners`); the other "
            "rows kept from the run before (`--keep`: their code unchanged)")
