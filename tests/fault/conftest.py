"""The fault-injection suite: every test here is marked ``fault`` and runs with ``make test``.

Each test injects one fault a user or an attacker could cause (a second process, a full
disk, a corrupt file, hostile text, a signal mid-turn) and asserts what the user would
notice: nothing acknowledged is lost, the process ends with a reason, no crash.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/fault/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.fault)
