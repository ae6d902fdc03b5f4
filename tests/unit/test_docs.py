"""Every ``docs/<page>.md §N`` (and ``bench/RESULTS.md §N``) cited in the tree names a section
that page has, with or without backticks around the page."""
from __future__ import annotations

import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CITE = re.compile(r"((?:docs|bench)/[\w-]+\.md)`?((?: ?§[\d.]+[,/ ]*)+)")
HEADING = re.compile(r"^#{2,4} (\d+(?:\.\d+)*)\.? ", re.M)


def _sections(page: str) -> set[str]:
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        return set(HEADING.findall(f.read()))


def _texts():
    """(path, text) of every tracked file that may cite the docs."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    for name in files:
        if not name.endswith((".py", ".md", ".sh", ".ini", ".yaml")) and name != ".importlinter":
            continue
        try:
            with open(os.path.join(ROOT, name), encoding="utf-8") as f:
                yield name, f.read()
        except (OSError, UnicodeDecodeError):
            continue


def test_cited_sections_exist():
    missing = []
    for name, text in _texts():
        for page, refs in CITE.findall(text):
            sections = _sections(page)
            for ref in re.findall(r"§([\d.]+\d)", refs):
                # "§7.2.4" is item 4 of section 7.2 (sections have at most two levels).
                parent = ".".join(ref.split(".")[:2])
                if ref not in sections and not (ref.count(".") == 2 and parent in sections):
                    missing.append(f"{name}: {page} §{ref}")
    assert not missing, missing


#: How the reference documents outside the repository were cited (a checkout has none of them).
OUTSIDE = re.compile(r"(?<![\w-])shared/(?:docs|fixtures|vllm-peers|hooks)\b|(?<![\w/])"
                     r"(?:text-parity §|gevent-physics\.md|engine-core-protocol\.md)")


def test_no_comment_cites_a_document_outside_the_repository():
    found = [f"{name}: {m.group(0)}" for name, text in _texts()
             if name != "tests/unit/test_docs.py" for m in OUTSIDE.finditer(text)]
    assert not found, found
