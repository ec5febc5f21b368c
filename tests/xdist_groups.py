"""How the suite shares two CPU cores: pytest-xdist workers (.ci/run runs
`pytest -n 2 --dist loadgroup`), with this file's grouping instead of xdist's.

A test that uses a module-scoped fixture (one CLI run that several tests assert on)
runs on the worker that runs the rest of its module's users of that fixture, so
the fixture runs once; every other test goes to whichever worker is free, the
groups first (the largest first), then the `slow` tests, then the rest. (pytest-xdist
3.8's own loadgroup renames test ids to carry the group, which pytest 9 no longer
allows: every test went its own way and shared fixtures ran once per worker.)

The workers collect; the controller schedules from test ids alone. So each worker
writes the groups it found to GROUPS_FILE (in the session's folder, made by the
first process that loads conftest.py), and the controller's scheduler reads it once
every worker has collected.
"""

import json
import os

from xdist.scheduler import LoadScopeScheduling

GROUPS_FILE = "xdist-groups.json"


def shares_a_module_fixture(item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    defs = [d for ds in (info.name2fixturedefs.values() if info else ()) for d in ds]
    return any(d.scope in ("module", "class", "package") for d in defs)


def group_of(item) -> str | None:
    """An explicit xdist_group mark's name, else the test's file if it shares a
    module-scoped fixture, else None (scheduled alone)."""
    mark = item.get_closest_marker("xdist_group")
    if mark is not None:
        return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    return item.nodeid.split("::")[0] if shares_a_module_fixture(item) else None


def order_and_record(items, session_dir: str) -> None:
    """On a worker: the `slow` tests first (a serial run keeps the files' order), and
    the groups written for the controller."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    groups = {item.nodeid: group for item in items if (group := group_of(item))}
    path = os.path.join(session_dir, GROUPS_FILE)
    temporary = f"{path}.{os.getpid()}"
    with open(temporary, "w") as f:
        json.dump(groups, f)
    os.replace(temporary, path)  # every worker writes the same map


class SharedFixtureScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with a scope per group, and per test elsewhere."""

    def __init__(self, config, session_dir: str, log=None):
        super().__init__(config, log)
        self._path = os.path.join(session_dir, GROUPS_FILE)
        self._groups = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:  # first called once every worker has collected
            try:
                with open(self._path) as f:
                    self._groups = json.load(f)
            except FileNotFoundError:  # no worker got as far as grouping
                self._groups = {}
        return self._groups.get(nodeid, nodeid)
