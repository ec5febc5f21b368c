"""callbacks/records/summary_fields.py: summary.json's table, read and written as one.
Every field the report reads of a summary is in the table (its reader takes the
table's fields, and its code asks for no other); every field of a campaign's part of
the table is written by the campaigns' code. (That a training run writes every RUN
field is checked on a real run's summary.json: tests/test_console.py.)"""

import ast
import glob
import os

from conftest import ROOT

from app.report import reading
from callbacks.records import summary_fields

# The campaigns' writers: the modes and the timed windows' spread (app/engine/measure.py).
CAMPAIGN_WRITERS = ("app/modes/sweep.py", "app/modes/ladder.py", "app/modes/points.py",
                    "app/modes/bench.py", "app/engine/measure.py")
# How the report's code holds a summary: the record read, and the checked figures.
SUMMARY_HOLDERS = ("record", "summary", "s", 'run["summary"]')


def _asked(path: str) -> set[str]:
    """The names `path` asks a summary for: `HOLDER.get("name")`, `HOLDER["name"]`."""
    asked = set()
    for node in ast.walk(ast.parse(open(os.path.join(ROOT, path)).read())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get" and ast.unparse(node.func.value) in SUMMARY_HOLDERS
                and node.args and isinstance(node.args[0], ast.Constant)):
            asked.add(node.args[0].value)
        elif (isinstance(node, ast.Subscript) and ast.unparse(node.value) in SUMMARY_HOLDERS
              and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
            asked.add(node.slice.value)
    return asked


def _written(paths) -> set[str]:
    """Every name `paths` write as a key: dict literals, keyword arguments, item stores."""
    written = set()
    for path in paths:
        for node in ast.walk(ast.parse(open(os.path.join(ROOT, path)).read())):
            if isinstance(node, ast.Dict):
                written |= {k.value for k in node.keys if isinstance(k, ast.Constant)}
            elif isinstance(node, ast.Call):
                written |= {k.arg for k in node.keywords if k.arg}
            elif (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store)
                  and isinstance(node.slice, ast.Constant)):
                written.add(node.slice.value)
    return written


def test_the_report_reads_the_tables_fields_and_asks_for_no_other():
    assert reading.SUMMARY_FIELDS == summary_fields.FIELDS
    assert reading.NESTED == summary_fields.LISTS
    # the table's names, its lists' items' fields, and what load_run adds to the checked
    # figures: the step breakdown, from "profile"
    checked = (summary_fields.NAMES | {"breakdown"}
               | {field for fields in summary_fields.LISTS.values() for field in fields})
    report = sorted(glob.glob(os.path.join(ROOT, "app", "report", "*.py")))
    outside = {os.path.relpath(path, ROOT): sorted(_asked(os.path.relpath(path, ROOT))
                                                   - checked) for path in report}
    assert not any(outside.values()), outside


def test_the_checker_sees_a_field_asked_outside_the_table(tmp_path):
    path = tmp_path / "reader.py"
    path.write_text('a = record.get("gpu_hours")\nb = s["mode"]\nc = other.get("x")\n')
    assert _asked(str(path)) == {"gpu_hours", "mode"}


def test_the_campaigns_write_their_part_of_the_table():
    written = _written(CAMPAIGN_WRITERS)
    part = (set(summary_fields.CAMPAIGN_FIELDS) | set(summary_fields.CAMPAIGN_LISTS)
            | set(summary_fields.CAMPAIGN_OBJECTS)
            | {field for fields in summary_fields.CAMPAIGN_LISTS.values() for field in fields})
    assert part <= written, sorted(part - written)


def test_the_decision_reads_the_tables_fields_and_asks_for_no_other():
    """The decision's reader takes the table's DECISION_FIELDS (a rate and the epochs
    above 0, as it divides by them) and asks a summary for nothing outside the table."""
    from app.report.decision import inputs

    assert set(inputs.FIELDS) == set(summary_fields.DECISION_FIELDS)
    for name, (kind, low, high) in inputs.FIELDS.items():
        table = summary_fields.DECISION_FIELDS[name]
        assert (kind, high) == (table[0], table[2])
        assert low == table[1] or (name in inputs.POSITIVE and low > 0), name
    asked = _asked("app/report/decision/inputs.py")
    assert asked and asked <= set(summary_fields.NAMES), sorted(asked - summary_fields.NAMES)


def test_a_probe_writes_its_part_of_the_table():
    written = _written(("app/modes/probe.py", "app/engine/measure.py", "app/models/flops.py"))
    part = set(summary_fields.PROBE_FIELDS) | set(summary_fields.PROBE_OBJECTS) \
        | set(summary_fields.WORK_FIELDS)
    assert part <= written, sorted(part - written)


def test_the_table_is_the_runs_the_campaigns_and_the_decisions_part_each_checkable():
    assert set(summary_fields.NAMES) == (
        set(summary_fields.RUN_FIELDS) | set(summary_fields.RUN_LISTS)
        | set(summary_fields.RUN_OBJECTS) | set(summary_fields.CAMPAIGN_FIELDS)
        | set(summary_fields.CAMPAIGN_LISTS) | set(summary_fields.CAMPAIGN_OBJECTS)
        | set(summary_fields.DECISION_FIELDS) | set(summary_fields.DECISION_OBJECTS))
    specs = [*summary_fields.FIELDS.values(), *summary_fields.DECISION_FIELDS.values(),
             *(spec for fields in summary_fields.LISTS.values() for spec in fields.values())]
    for kind, low, high in specs:
        assert kind in ("text", "number", "integer")
        assert (low is None) == (high is None) == (kind == "text")
