"""Opens pages of the built site in headless Chromium, as a reader would, with no network.

For each page: MathJax is served from the site's own files (no ``http`` script), every
formula of the page is typeset (as many MathJax output nodes as TeX sources, no MathJax
error node, no raw TeX such as ``$`` or ``\\lambda`` left in the text outside code), and
no code block or display formula is wider than its box at a 1280-pixel window (nothing
hidden behind a scroll bar, nothing past the column). A screenshot of each page goes to
``--out``. Exit status 0 when every page passes, 1 otherwise (each failure printed), 2 when
Chromium is missing.

The script installs nothing. Chromium is Debian's ``chromium`` package (``sudo apt-get
install chromium``), or any Chromium or Chrome named by ``--chromium`` or ``$CHROMIUM``.

    python -m sphinx -W -b html docs docs/_build/html
    python docs/check_in_browser.py docs/_build/html --out /tmp/rankjax-docs-screenshots
"""
import argparse
import html
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

PAGES = ("index.html", "math.html", "generated/rankjax.fit.html", "generated/rankjax.Nystrom.html",
         "generated/rankjax.estimators.RankRLSCV.html", "examples/quickstart.html")
WIDTH = 1280

PROBE = r"""<script>
(function () {
  function check() {
    var r = {typeset: document.querySelectorAll("mjx-container").length,
             sources: document.querySelectorAll("span.math, div.math").length,
             errors: document.querySelectorAll("mjx-merror").length, raw: [], overflow: []};
    var walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT), node;
    while ((node = walk.nextNode())) {
      var el = node.parentElement;
      if (!el || el.closest("script, style, pre, code, textarea, mjx-container, .highlight")) continue;
      var text = node.nodeValue;
      if (/\$|\\[a-zA-Z]{2,}|\\[()\[\]]/.test(text)) r.raw.push(text.trim().slice(0, 80));
    }
    document.querySelectorAll("pre").forEach(function (pre) {
      var box = pre.getBoundingClientRect();
      var column = (pre.closest("article, main") || document.body).getBoundingClientRect();
      if (pre.scrollWidth > pre.clientWidth + 1 || box.right > column.right + 1)
        r.overflow.push(pre.textContent.split("\n").reduce(function (a, b) {
          return b.length > a.length ? b : a; }, "").slice(0, 100));
    });
    document.querySelectorAll('mjx-container[display="true"]').forEach(function (eq) {
      var box = eq.getBoundingClientRect();
      var column = (eq.closest("article, main") || document.body).getBoundingClientRect();
      if (eq.scrollWidth > eq.clientWidth + 1 || box.right > column.right + 1)
        r.overflow.push("display formula: " + eq.textContent.slice(0, 60));
    });
    var out = document.createElement("div");
    out.id = "rjcheck";
    out.setAttribute("data-result", JSON.stringify(r));
    document.body.appendChild(out);
  }
  window.addEventListener("load", function () {
    if (window.MathJax && MathJax.startup && MathJax.startup.promise)
      MathJax.startup.promise.then(check, check);
    else check();
  });
})();
</script>"""


def chromium(given):
    for name in (given, os.environ.get("CHROMIUM"), "chromium", "chromium-browser",
                 "google-chrome", "chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def run(browser, url, *flags):
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--allow-file-access-from-files", "--host-resolver-rules=MAP * ~NOTFOUND",
           f"--window-size={WIDTH},1600", "--virtual-time-budget=20000", *flags, url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def local_mathjax(page):
    """The MathJax script of ``page`` (text) is a local file, or there is none."""
    srcs = re.findall(r'<script[^>]+src="([^"]*mathjax[^"]*)"', page, flags=re.I)
    return all(not s.startswith(("http:", "https:", "//")) for s in srcs), srcs


def check_page(browser, site, copy, rel, out):
    problems = []
    text = (site / rel).read_text(encoding="utf-8")
    local, srcs = local_mathjax(text)
    if not local:
        problems.append(f"MathJax from the network: {srcs}")
    for src in srcs:
        if not (site / rel).parent.joinpath(src.split("?")[0]).resolve().exists():
            problems.append(f"MathJax script missing from the site: {src}")
    probed = copy / rel
    probed.write_text(text.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = run(browser, probed.as_uri(), "--dump-dom").stdout
    found = re.search(r'id="rjcheck" data-result="([^"]*)"', dom)
    if not found:
        return problems + ["the page did not finish loading in Chromium"]
    r = json.loads(html.unescape(found.group(1)))
    if r["typeset"] < r["sources"]:
        problems.append(f"{r['sources'] - r['typeset']} of {r['sources']} formulas not typeset")
    if r["errors"]:
        problems.append(f"{r['errors']} MathJax errors (bad TeX)")
    problems += [f"raw TeX in the text: {t!r}" for t in r["raw"]]
    problems += [f"wider than its box: {t!r}" for t in r["overflow"]]
    shot = out / (rel.replace("/", "_").removesuffix(".html") + ".png")
    run(browser, (site / rel).as_uri(), f"--screenshot={shot}")
    print(f"{rel}: {r['sources']} formulas, {r['typeset']} typeset, screenshot {shot}"
          + ("" if not problems else " -- FAILED"))
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("site", nargs="?", default="docs/_build/html", help="the built site")
    ap.add_argument("--out", default=os.path.join(tempfile.gettempdir(),
                                                  "rankjax-docs-screenshots"),
                    help="folder for the screenshots (created; not part of the repository)")
    ap.add_argument("--chromium", help="the browser's executable")
    ap.add_argument("--pages", nargs="*", default=list(PAGES), help="pages, relative to the site")
    a = ap.parse_args()
    browser = chromium(a.chromium)
    if browser is None:
        print("no Chromium found: install Debian's chromium package (sudo apt-get install "
              "chromium) or name one with --chromium", file=sys.stderr)
        return 2
    site = pathlib.Path(a.site).resolve()
    if not (site / "index.html").exists():
        print(f"{site} has no index.html: build the site first (python -m sphinx -W -b html "
              "docs docs/_build/html)", file=sys.stderr)
        return 2
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"screenshots in {out}")
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        copy = pathlib.Path(tmp) / "site"
        shutil.copytree(site, copy)
        for rel in a.pages:
            if not (site / rel).exists():
                print(f"{rel}: not in the site -- FAILED")
                failed += 1
                continue
            problems = check_page(browser, site, copy, rel, out)
            failed += bool(problems)
            for p in problems:
                print(f"  {p}")
    print("every page passed" if not failed else f"{failed} of {len(a.pages)} pages failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
