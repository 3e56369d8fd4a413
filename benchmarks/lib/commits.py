"""A commit's ``rankjax`` package as the guard and the A/B benchmarks import it: exported
with ``git archive`` into a folder put first on ``PYTHONPATH``."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def git(*args):
    return subprocess.run(["git", "-C", ROOT, *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def export(ref, into):
    """The ``rankjax`` package of commit ``ref`` under ``into``; returns ``into``."""
    os.makedirs(into, exist_ok=True)
    archive = subprocess.run(["git", "-C", ROOT, "archive", ref, "rankjax"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    return into
