"""Screenshots of the documentation site as a reader sees it, and a check of its figures' sizes.

Builds the site (``mkdocs build --strict`` into a temporary folder) or takes a built one (``--site``), serves it on a
free local port, and opens the home page and one results page per kind of task in headless Chromium at a 1280 px
wide window: a PNG per page goes to ``--out``, and for a page with figures a second one, ``<name>-figure.png``,
of the page with everything above its first figure taken out (the figure at the column's own width). On the
same pages every ``<img>`` is measured (its natural width against the width it is displayed at, by a small
script run in the page); an image scaled down by more than ``--max-shrink`` (2x) or scaled up at all is
reported, and the exit status is 1.

    python scripts/screenshot_docs.py --out /tmp/shots
    python scripts/screenshot_docs.py --site site --out /tmp/shots --pages results/probe-ud-minilm/

Chromium comes from the system (Debian: ``apt-get install chromium``); without it the script says so and exits 2.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import html
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WIDTH, HEIGHT = 1280, 2400
# The home page, then one results page per kind of task: sentences, tokens, ranking, probing.
PAGES = {
    "home": "",
    "sentences": "results/table1-minilm/",
    "tokens": "results/ner-minilm/",
    "ranking": "results/wikiqa-minilm/",
    "probing": "results/probe-ud-minilm/",
}
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Run in the page once it has loaded: each image's natural and displayed width, written into the DOM, so that
# ``--dump-dom`` carries it out.
MEASURE = """
<script>
window.addEventListener("load", () => {
  const sizes = [...document.querySelectorAll("article img")].map(img => ({
    src: img.getAttribute("src"), natural: img.naturalWidth, shown: img.getBoundingClientRect().width,
    column: img.closest("article").getBoundingClientRect().width}));
  const out = document.createElement("pre");
  out.id = "hire-image-sizes";
  out.textContent = JSON.stringify(sizes);
  document.body.appendChild(out);
});
</script>
"""

# Run in a copy of a page: everything in the article above the first figure removed, so that the figure shows at
# the top of the window at the width the column gives it.
FOCUS = """
<script>
const first = document.querySelector("article img");
if (first) {
  let node = first;
  while (node.parentElement && node.parentElement.tagName !== "ARTICLE") node = node.parentElement;
  while (node.previousElementSibling) node.previousElementSibling.remove();
}
</script>
"""


def fail(message: str, status: int = 2) -> None:
    print(f"screenshot_docs: {message}", file=sys.stderr)
    sys.exit(status)


def find_browser(name: str | None) -> str:
    """The Chromium executable: ``name`` if given, else the first of ``BROWSERS`` on PATH."""
    for candidate in [name] if name else BROWSERS:
        found = shutil.which(candidate)
        if found:
            return found
    fail(f"no Chromium found ({name or ', '.join(BROWSERS)}); install it (Debian: apt-get install chromium) "
         "or name it with --browser")
    raise AssertionError  # unreachable


def build_site(folder: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(folder)],
                            cwd=REPO, capture_output=True, text=True)
    if result.returncode:
        fail(f"mkdocs build --strict failed:\n{result.stdout}{result.stderr}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(folder: Path) -> Iterator[str]:
    """``folder`` served over HTTP on a free local port, for as long as the block runs; yields the base URL."""

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), functools.partial(Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def chromium(browser: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="hire-chromium-") as profile:
        return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                               f"--user-data-dir={profile}", f"--window-size={WIDTH},{HEIGHT}",
                               "--virtual-time-budget=5000", *args], capture_output=True, text=True, timeout=timeout)


def screenshot(browser: str, url: str, path: Path) -> None:
    result = chromium(browser, f"--screenshot={path}", url)
    if not path.is_file():
        fail(f"chromium wrote no screenshot of {url}:\n{result.stderr[-2000:]}")


@contextlib.contextmanager
def page_copy(site: Path, page: str, script: str) -> Iterator[str]:
    """A copy of the page with ``script`` at the end of its body, beside it (so that its links resolve), for as
    long as the block runs; yields its path in the site."""
    source = site / page / "index.html"
    copy = source.with_name("index.hire-shot.html")
    copy.write_text(source.read_text().replace("</body>", script + "</body>"))
    try:
        yield page + copy.name
    finally:
        copy.unlink()


def image_sizes(browser: str, site: Path, page: str, base: str) -> list[dict]:
    """The page's images as measured in the browser (:data:`MEASURE`, in a copy of the page), dumped."""
    with page_copy(site, page, MEASURE) as copy:
        dom = chromium(browser, "--dump-dom", base + copy).stdout
    start = dom.find('id="hire-image-sizes">')
    if start < 0:
        fail(f"{page or 'home page'}: the image sizes were not measured (the page did not finish loading?)")
    text = dom[start + len('id="hire-image-sizes">'):dom.index("</pre>", start)]
    return json.loads(html.unescape(text))


def problems(sizes: list[dict], max_shrink: float) -> list[str]:
    """Images scaled down by more than ``max_shrink`` or scaled up (more than a pixel of rounding)."""
    out = []
    for s in sizes:
        if not s["natural"] or not s["shown"]:
            out.append(f"{s['src']}: not displayed (natural {s['natural']} px, shown {s['shown']:.0f} px)")
        elif s["natural"] / s["shown"] > max_shrink:
            out.append(f"{s['src']}: {s['natural']} px shown at {s['shown']:.0f} px "
                       f"(scaled down {s['natural'] / s['shown']:.1f}x)")
        elif s["shown"] > s["natural"] + 1:
            out.append(f"{s['src']}: {s['natural']} px shown at {s['shown']:.0f} px (scaled up)")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder for the PNGs (made if missing)")
    parser.add_argument("--site", type=Path, help="a built site folder (default: build one with mkdocs)")
    parser.add_argument("--pages", nargs="*", help="site paths to shoot instead of the default set "
                        f"({', '.join(p or '(home)' for p in PAGES.values())})")
    parser.add_argument("--browser", help="the Chromium executable (default: the first of chromium, "
                        "chromium-browser, google-chrome on PATH)")
    parser.add_argument("--max-shrink", type=float, default=2.0,
                        help="report images displayed smaller than natural width / this (default 2)")
    args = parser.parse_args(argv)
    browser = find_browser(args.browser)
    pages = {p.strip("/").replace("/", "-") or "home": p.strip("/") + "/" if p.strip("/") else ""
             for p in args.pages} if args.pages else PAGES
    args.out.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        if args.site:
            site = args.site.resolve()
            if not (site / "index.html").is_file():
                fail(f"{site}: no index.html (build the site first, or leave out --site)")
        else:
            site = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hire-site-")))
            build_site(site)
        base = stack.enter_context(serve(site))
        found: list[str] = []
        for name, page in pages.items():
            if not (site / page / "index.html").is_file():
                fail(f"{site / page}: no such page in the site")
            path = args.out / f"{name}.png"
            screenshot(browser, base + page, path)
            sizes = image_sizes(browser, site, page, base)
            if sizes:
                with page_copy(site, page, FOCUS) as copy:
                    screenshot(browser, base + copy, args.out / f"{name}-figure.png")
            bad = problems(sizes, args.max_shrink)
            widths = ", ".join(f"{s['natural']}->{s['shown']:.0f}" for s in sizes) or "no images"
            column = f"column {sizes[0]['column']:.0f} px; " if sizes else ""
            print(f"{path}: {page or '(home)'}: {column}images natural->shown px: {widths}")
            found += [f"{page or '(home)'}: {b}" for b in bad]
    for line in found:
        print(f"  badly scaled: {line}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
