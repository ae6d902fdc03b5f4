"""The settings table of ``docs/settings.md``, made from ``Config``'s declarations:
``python -m base.settings_page`` rewrites it; ``tests/unit/test_config.py`` fails when it is stale.

Runs on: a maintainer's command line and the tests.
"""
from __future__ import annotations

import os

from base.config import HERE, Config
from base.settings import settings_table, with_table

SETTINGS_PAGE = os.path.join(HERE, "docs", "settings.md")


def page_with_table(text: str) -> str:
    """``text`` (docs/settings.md) with the settings table made from the declarations."""
    return with_table(text, settings_table(decl for _, decl in Config.settings()))


if __name__ == "__main__":
    with open(SETTINGS_PAGE, encoding="utf-8") as f:
        current = f.read()
    with open(SETTINGS_PAGE, "w", encoding="utf-8") as f:
        f.write(page_with_table(current))
