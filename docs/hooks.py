"""mkdocs hooks for the documentation site (mkdocs.yml ``hooks:``); this file is not a page.

1. The experiments' figures and HTML reports are served from where they are committed: every
   ``experiments/**/*.png`` and ``experiments/*/report.html`` becomes a file of the site at the same path
   (``/experiments/...``), so the generated results pages show them without a copy in ``docs/``.
2. A page links such a file as a path from the repository root climbing out of ``docs/``
   (``../../experiments/x/figures/y.png`` from ``docs/results/x.md``): right on GitHub, and rewritten here
   to the site's own path (one ``../`` fewer).
3. Math is rendered to MathML when the site is built (no JavaScript, no network): ``$$ ... $$`` blocks and
   ``$...$`` inline, outside code, the syntax GitHub renders too.
4. The API pages' docstrings use Sphinx roles (``:class:`HireModel```), which mkdocstrings shows as text: the
   role is dropped and its target stays as code.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from latex2mathml.converter import convert
from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parent.parent
SERVED = ("experiments/**/*.png", "experiments/*/report.html")  # repository files the site serves as they are

# Code that must stay as it is: fenced blocks (``` or ~~~, indented or not) and inline code spans.
_CODE = re.compile(r"(^[ \t]*(`{3,}|~{3,}).*?^[ \t]*\2[ \t]*$|`+[^`\n]*?`+)", re.S | re.M)
_DISPLAY = re.compile(r"^[ \t]*\$\$\s*\n(.+?)\n[ \t]*\$\$[ \t]*$", re.S | re.M)
_INLINE = re.compile(r"(?<![\\$\w])\$(?=\S)([^$\n]+?)(?<=\S)\$(?![\w$])")


def on_files(files: Files, config: Any) -> Files:
    for pattern in SERVED:
        for path in sorted(REPO.glob(pattern)):
            files.append(File.generated(config, path.relative_to(REPO).as_posix(), abs_src_path=str(path)))
    return files


def _math(text: str) -> str:
    text = _DISPLAY.sub(lambda m: '\n<div class="math">' + convert(m.group(1).strip(), display="block") + "</div>\n",
                        text)
    # In a <span>: a line that starts with a bare <math> would be taken for a block of raw HTML.
    return _INLINE.sub(lambda m: '<span class="math">' + convert(m.group(1)) + "</span>", text)


_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj):(?=<code>)")


def on_page_content(html: str, page: Any, config: Any, files: Files) -> str:
    return _ROLE.sub("", html) if page.file.src_uri.startswith("reference/") else html


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    depth = page.file.src_uri.count("/")
    climb = "../" * (depth + 1)
    markdown = markdown.replace(f"]({climb}experiments/", f"]({'../' * depth}experiments/")
    parts = _CODE.split(markdown)
    # split() with two groups gives [text, code, fence, text, code, fence, ...]: convert the text parts only.
    out = []
    for i in range(0, len(parts), 3):
        out.append(_math(parts[i]))
        if i + 1 < len(parts):
            out.append(parts[i + 1])
    return "".join(out)
