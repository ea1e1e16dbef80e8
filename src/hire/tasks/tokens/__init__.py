"""Token tasks: a tag per word (named entities, chunks, parts of speech): CoNLL-2003 by name (``--data.task
conll2003``, ``--data.tag_column ner|chunk|pos``) or a user's files in CoNLL columns or token JSON lines
(``--data.task custom --data.format conll|tokens``). The kind (its options and checks) is here; what training and
prediction ask of it is :mod:`hire.tasks.tokens.tasktype`."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from hire.checks import ConfigError
from hire.optionfields import NonNegativeInt, option_field
from hire.tasktype import TaskKind, register_task_kind

if TYPE_CHECKING:
    from hire.config import DataConfig


@dataclass
class TokenDataOptions:
    """How a token task's files are read and its tags scored."""

    token_column: NonNegativeInt = option_field(0, "conll files: the word's column (0-based)")
    tag_column: NonNegativeInt | Literal["ner", "chunk", "pos"] | None = option_field(
        None, "token tasks: the tag column: ner, chunk or pos for conll2003 (default ner); a conll file's 0-based "
        "column (default: the last)")
    separator: str | None = option_field(None, "conll files: the column separator (default: a tab where the lines "
                                         "have one, else runs of spaces)")
    scheme: Literal["auto", "iob1", "iob2", "bioes", "none"] = option_field(
        "auto", "token tasks: the tags' scheme, detected by default; iob1, iob2 and bioes are read as IOB2 and "
        "scored as entities; none: plain tags (parts of speech), scored by accuracy")
    subword: Literal["first", "last", "mean"] = option_field(
        "first", "token tasks: where a word is read: its first sub-token (BERT), its last, or their mean")
    context: Literal["sentence", "document"] = option_field(
        "sentence", "token tasks: document: the neighbouring sentences of the same document are read as context "
        "(predictions only for the sentence itself)")
    unknown_tags: Literal["error", "o"] = option_field(
        "error", "token tasks: a dev/test tag that training never saw is an error, or (o) read as O")


class TokenKind(TaskKind):
    name = "token"
    order = 1
    implementation = "hire.tasks.tokens.tasktype:TOKEN"
    data_options = TokenDataOptions
    formats = MappingProxyType({"conll": "conll (a word per line in columns, a blank line after each sentence)",
               "tokens": "tokens (JSON lines with 'tokens' and 'tags')"})
    predict_formats = ("text", "conll", "tokens")
    predictor = "hire.tasks.tokens.predict"
    named_help = "conll2003 (a tag per word: NER, chunks or parts of speech)"
    data_dir_help = "CoNLL-2003's (default: $HIRE_CONLL2003_DIR, else ../shared/data/conll2003)"
    only_for = "token tasks (--data.task conll2003, or custom files in --data.format conll or tokens)"

    def handles(self, cfg: DataConfig) -> bool:
        return cfg.task.lower() == "conll2003" or (cfg.task.lower() == "custom" and cfg.format in self.formats)

    def named_task(self, name: str) -> tuple[str, tuple[str, ...]] | None:
        """``conll2003`` (entity F1; also the name its runs record, ``CoNLL-2003``, and ``CoNLL-2003-chunk`` /
        ``-pos``, the latter scored by token accuracy)."""
        key = name.lower().replace("-", "").replace("_", "")
        if key == "conll2003":  # strict entity F1 alone is the score
            return "conll2003", ("f1",)
        if key in ("conll2003pos", "conll2003chunk"):  # chunks are scored as spans, as conlleval does
            return name, ("accuracy",) if key.endswith("pos") else ("f1",)
        return None

    def task_names(self) -> tuple[str, ...]:
        return ("conll2003",)

    def check_options(self, cfg: DataConfig) -> None:
        check_separator(cfg.separator)

    def check_data(self, cfg: DataConfig) -> None:
        if cfg.task.lower() != "custom" and isinstance(cfg.tag_column, int):
            raise ConfigError(f"--data.tag_column: conll2003's tag columns are ner, chunk and pos, not "
                              f"{cfg.tag_column}")
        if cfg.task.lower() == "custom" and isinstance(cfg.tag_column, str):
            raise ConfigError(f"--data.tag_column {cfg.tag_column}: names are for conll2003; give a custom conll "
                              "file's tag column by its 0-based index")

    def describe(self) -> str:
        return "tags words"

    def evaluation_data(self, task: str, model: str, config: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """CoNLL-2003, read with the tag column, context and sub-token the model was trained with."""
        options = config.get("task_options") or {}
        return "CoNLL-2003", {"task": "conll2003", "tag_column": options.get("tag_column"),
                              "context": options.get("context", "sentence"), "subword": config.get("subword", "first")}


# What a user types for a tab or for spaces that reaches the program as other characters (the shell keeps a
# backslash; no shell turns a word into a tab).
_SEPARATOR_WORDS = {"\\t": "a tab", "\\\\t": "a tab", "tab": "a tab", "\\s": "spaces", "\\s+": "spaces",
                    "space": "a space", "spaces": "spaces", "whitespace": "spaces"}


def check_separator(separator: str | None, option: str = "--data.separator") -> None:
    """A CoNLL file's column separator: one exact string that the lines are split at. Refused, with what to type
    instead: an empty one; the two characters backslash and t (or the word ``tab``), typed for a tab; several
    spaces or other blanks, which would split only where exactly that run of them stands (leaving the option out
    splits at runs of spaces, or at a tab where the lines have one). These would otherwise fail later at the first
    word line, blamed on the tag column."""
    if separator is None:
        return
    default = "leave the option out to split at a tab where the lines have one, else at runs of spaces"
    if separator == "":
        raise ConfigError(f"{option}: empty; {default}")
    meant = _SEPARATOR_WORDS.get(separator.strip().lower())
    if meant == "a tab":
        raise ConfigError(f"{option} '{separator}': these characters themselves, not a tab; type a real tab "
                          f"(--data.separator $'\\t' in bash, separator: \"\\t\" in a --config file), or {default}")
    if meant is not None:
        raise ConfigError(f"{option} '{separator}': these characters themselves, not {meant}; type the character "
                          f"itself in quotes (--data.separator ' '), or {default}")
    if separator.isspace() and separator not in (" ", "\t"):
        raise ConfigError(f"{option} {separator!r}: would split only where exactly these {len(separator)} blanks "
                          f"stand; give one space (' ') or one tab, or {default}")



TOKEN_KIND = register_task_kind(TokenKind())
