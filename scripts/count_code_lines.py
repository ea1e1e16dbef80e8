"""Count a Python tree's hand-written code lines: lines that hold code, not blank, comment-only or docstring.

``python scripts/count_code_lines.py src`` prints the total; ``--per_file`` lists every file, largest first;
``--rev REV`` counts the tree as it was at a git revision (for a before/after figure). Written here because
what counts as a code line (docstrings out) is this project's definition, not a line counter's default.
"""

from __future__ import annotations

import argparse
import ast
import io
import subprocess
import sys
import tarfile
import tokenize
from pathlib import Path

SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}


def code_lines(source: str) -> int:
    """The number of lines of ``source`` that carry a token other than a comment or a docstring."""
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                docstrings.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in SKIPPED:
            lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines - docstrings)


def sources(folder: str, rev: str | None) -> dict[str, str]:
    """Every ``.py`` file under ``folder`` (at git revision ``rev`` if given) by path."""
    if rev is None:
        if not Path(folder).is_dir():
            raise ValueError(f"{folder}: {'not a folder' if Path(folder).exists() else 'no such folder'}")
        return {str(p): p.read_text(encoding="utf-8") for p in sorted(Path(folder).rglob("*.py"))}
    archive = subprocess.run(["git", "archive", rev, folder], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return {m.name: tar.extractfile(m).read().decode("utf-8")  # type: ignore[union-attr]
                for m in tar.getmembers() if m.isfile() and m.name.endswith(".py")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", help="the tree to count, e.g. src")
    parser.add_argument("--rev", help="a git revision: count the folder as it was there")
    parser.add_argument("--per_file", action="store_true", help="list every file's count, largest first")
    args = parser.parse_args(argv)
    try:
        files = sources(args.folder, args.rev)
    except subprocess.CalledProcessError as err:
        print(f"--rev {args.rev}: git could not read {args.folder} there ({err.stderr.decode().strip()})",
              file=sys.stderr)
        return 2
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    counts = {}
    for path, text in files.items():
        try:
            counts[path] = code_lines(text)
        except (SyntaxError, tokenize.TokenError) as err:
            print(f"{path}: not Python that parses ({err})", file=sys.stderr)
            return 2
    if args.per_file:
        for path, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"{n:6d}  {path}")
    physical = sum(len(text.splitlines()) for text in files.values())
    print(f"{args.folder}{'@' + args.rev if args.rev else ''}: {len(files)} files, {physical} lines, "
          f"{sum(counts.values())} code lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
