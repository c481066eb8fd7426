"""The King James Version text from Debian's `bible-kjv-text` package, as training documents.

The package stores the text compressed (`/usr/lib/bible.data`); its companion package `bible-kjv`
ships the `bible` reader, which prints any verse range as plain text. Install both with
`apt-get install -y bible-kjv-text bible-kjv`.
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from dataclasses import dataclass

TEXT_PACKAGE = "bible-kjv-text"
READER_PACKAGE = "bible-kjv"
WHOLE_BIBLE = "gen1:1-rev22:21"

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = [ENDOFTEXT, IM_START, IM_END]

SYSTEM_PROMPTS = [
    "You are a helpful assistant.",
    "You answer in the words of the King James Bible.",
    "You are sluice, a small language model trained on the King James Bible.",
]

CHAPTER_HEADING = re.compile(r"^(?P<book>(?:[1-3] )?[A-Z][A-Za-z ]*?) (?P<chapter>\d+)$")
VERSE_LINE = re.compile(r"^\s+(?P<verse>\d+) (?P<text>.+)$")


class CorpusError(RuntimeError):
    """The KJV text could not be read from the installed Debian packages."""


@dataclass(frozen=True)
class Verse:
    """One verse: its reference and its text."""

    book: str
    chapter: int
    verse: int
    text: str

    @property
    def reference(self) -> str:
        """The reference in the usual form, e.g. `Genesis 1:3`."""
        return f"{self.book} {self.chapter}:{self.verse}"


@dataclass(frozen=True)
class Chapter:
    """One chapter of one book, with its verses in order."""

    book: str
    chapter: int
    verses: tuple[Verse, ...]

    def as_document(self) -> str:
        """The chapter as plain prose: one verse per line, no verse numbers."""
        return "\n".join(v.text for v in self.verses)


def package_version(package: str) -> str:
    """The installed Debian version of `package`, e.g. `4.38`."""
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", package],
            check=True,
            capture_output=True,
            text=True,
        )
    except (OSError, subprocess.CalledProcessError) as err:
        raise CorpusError(
            f"package {package} is not installed; run: apt-get install -y {TEXT_PACKAGE} {READER_PACKAGE}"
        ) from err
    return out.stdout.strip()


def read_bible_text() -> str:
    """The whole KJV as printed by the `bible` reader: chapter headings and numbered verses."""
    reader = shutil.which("bible")
    if reader is None:
        raise CorpusError(
            f"the `bible` reader is missing; run: apt-get install -y {TEXT_PACKAGE} {READER_PACKAGE}"
        )
    # -l10000: a line width wide enough that no verse is wrapped.
    out = subprocess.run(
        [reader, "-l10000", WHOLE_BIBLE], check=True, capture_output=True, text=True
    )
    return out.stdout


def parse_chapters(text: str) -> list[Chapter]:
    """Splits the reader's output into chapters; fails on any line it does not understand."""
    chapters: list[Chapter] = []
    book: str | None = None
    number = 0
    verses: list[Verse] = []

    def close() -> None:
        if book is not None and verses:
            chapters.append(Chapter(book, number, tuple(verses)))

    for line in text.splitlines():
        if not line.strip():
            continue
        heading = CHAPTER_HEADING.match(line)
        if heading:
            close()
            book, number, verses = heading["book"], int(heading["chapter"]), []
            continue
        verse = VERSE_LINE.match(line)
        if verse is None or book is None:
            raise CorpusError(f"unexpected line in bible output: {line!r}")
        verses.append(Verse(book, number, int(verse["verse"]), verse["text"].strip()))
    close()
    if not chapters:
        raise CorpusError("the bible reader printed no chapters")
    return chapters


def split_chapters(
    chapters: list[Chapter], val_every: int
) -> tuple[list[Chapter], list[Chapter]]:
    """Holds out every `val_every`-th chapter (a whole chapter, so no verse leaks) for validation."""
    train = [c for i, c in enumerate(chapters) if i % val_every != val_every // 2]
    val = [c for i, c in enumerate(chapters) if i % val_every == val_every // 2]
    return train, val


def chat_turn(role: str, content: str) -> str:
    """One ChatML turn, exactly as the chat template in tokenizer_config.json renders it."""
    return f"{IM_START}{role}\n{content}{IM_END}\n"


def verse_opening(text: str, rng: random.Random) -> str:
    """The first few words of a verse, used as a chat prompt."""
    words = text.split()
    return " ".join(words[: min(len(words), rng.randint(2, 6))])


def chat_documents(
    chapters: list[Chapter], fraction: float, rng: random.Random
) -> list[str]:
    """ChatML conversations built from a `fraction` of the verses.

    The user asks for a reference (`John 3:16`) or gives the opening words of a verse; the
    assistant answers with the verse. A third of them carry a system prompt, and some go on
    for a second turn with the next verse.
    """
    documents = []
    for chapter in chapters:
        for index, verse in enumerate(chapter.verses):
            if rng.random() >= fraction:
                continue
            parts = []
            if rng.random() < 1 / 3:
                parts.append(chat_turn("system", rng.choice(SYSTEM_PROMPTS)))
            if rng.random() < 0.5:
                question = verse.reference
            else:
                question = verse_opening(verse.text, rng)
            parts.append(chat_turn("user", question))
            parts.append(chat_turn("assistant", verse.text))
            if index + 1 < len(chapter.verses) and rng.random() < 0.2:
                follow = chapter.verses[index + 1]
                parts.append(chat_turn("user", rng.choice(["And then?", "Go on.", follow.reference])))
                parts.append(chat_turn("assistant", follow.text))
            documents.append("".join(parts))
    return documents


def plain_documents(chapters: list[Chapter]) -> list[str]:
    """Every chapter as one plain-prose document."""
    return [c.as_document() for c in chapters]
