"""The report reads other people's run folders: whatever summary.json, config.json and
metrics.jsonl hold (any bytes, hostile JSON, markup, mathtext, a JSON nested 100,000
deep), a folder is either reported or skipped with one line, never a traceback;
what the report did not write itself is escaped in the HTML, the Markdown and the
charts. Run folders are written by hand here, in app/run/summary.py's shape."""

import json
import os
import re
import subprocess
import sys
import tempfile

import pytest
from browser import dom, needs_chromium
from conftest import ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app import report
from app.report import page as report_page
from app.engine import plots

XSS = "<img src=x onerror=alert(1)>"


def run_folder(folder, summary=None, config=None, metrics=None, epochs=3):
    """A small training run's folder: summary.json (app/run/summary.py's fields the
    report reads, `summary` over them), config.json and `epochs` metrics records.
    A value given as bytes is written as it is."""
    folder = str(folder)
    os.makedirs(folder, exist_ok=True)
    good = {"backend": "jax", "accelerator": "cpu", "device_kind": "cpu", "num_processes": 1,
            "num_replicas": 1, "model": "small_resnet", "dataset": "digits", "image_size": 8,
            "precision": "float32", "input_pipeline": "grain", "preprocessing": "small",
            "global_batch_size": 64, "epochs": epochs, "status": "completed",
            "epochs_completed": epochs, "images_per_sec": 1500.0, "step_time_ms": 42.0,
            "step_time_stderr_ms": 0.5, "best_val_top1": 0.9, "validation_examples": 360,
            "targets": [{"target_top1": 0.8}], "mfu": None, "machine": "gcp-n2-standard-4",
            "pricing": "on_demand", "price_per_hour_usd": 0.19, "cost_usd": 0.001,
            "versions": {"python": "3.11.7", "keras": "3.15.1", "jax": "0.8.1"},
            "attempts": [{"started_at": 1796000000.0, "pid": 1}]}
    files = {"summary.json": {**good, **(summary or {})} if not isinstance(summary, bytes)
             else summary,
             "config.json": config if config is not None else {
                 "model": "small_resnet", "dataset": "digits", "backend": "jax",
                 "epochs": epochs, "global_batch_size": 64, "base_learning_rate": 0.4,
                 "logdir": folder},
             "metrics.jsonl": metrics if metrics is not None else "".join(
                 json.dumps({"epoch": e, "val_top1": 0.5 + e / 40, "billed_hours": e / 3600,
                             "cost_usd": e * 1e-4}) + "\n" for e in range(1, epochs + 1))}
    for name, value in files.items():
        data = value if isinstance(value, bytes) else (
            value.encode() if isinstance(value, str) else json.dumps(value).encode())
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    return str(folder)


def _report(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "app", "report.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=300)


# ------------------------------------------------------------------- fuzzing
SCALARS = (st.none() | st.booleans() | st.integers(-2**70, 2**70)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=30)
           | st.sampled_from([XSS, "$\\foo$", "a|b\n# c", "`x` [l](javascript:1) *", 1e308]))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=8) | st.sampled_from(
                          ["global_batch_size", "images_per_sec", "started_at", "target_top1"]),
                          inner, max_size=4), max_leaves=12)
FIELDS = list(report.SUMMARY_FIELDS) + list(report.NESTED) + ["best", "versions"]
SUMMARIES = st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=12)
METRICS = st.lists(st.dictionaries(st.sampled_from(list(report.METRICS_FIELDS)), VALUES)
                   | VALUES, max_size=5)


def _json(value) -> bytes:
    return json.dumps(value, allow_nan=True).encode()  # NaN, Infinity: as Python writes them


FILES = st.one_of(st.binary(max_size=200), VALUES.map(_json),
                  st.sampled_from([b"[" * 100_000 + b"]" * 100_000, b"\xff\xfe", b"",
                                   b'{"a": 1e400}', b"NaN", b'{"a": "\xed\xa0\x80"}']))
HOSTILE = st.fixed_dictionaries({
    "summary": FILES | SUMMARIES.map(_json), "config": FILES | VALUES.map(_json),
    "metrics": FILES | METRICS.map(lambda records: b"\n".join(map(_json, records)))})


def _load(files: dict, folder: str):
    """load_run of a folder holding `files`: the run, or the skip's one line."""
    run_folder(folder, files["summary"], files["config"], files["metrics"])
    try:
        return report.load_run(folder)
    except report.SkippedRun as why:
        assert str(why) and "\n" not in str(why), repr(why)
        return None


@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(HOSTILE)
def test_any_bytes_in_a_run_folder_are_a_run_or_a_one_line_skip_and_the_report_is_built(files):
    with tempfile.TemporaryDirectory() as scratch:
        good = report.load_run(run_folder(os.path.join(scratch, "good")))
        hostile = _load(files, os.path.join(scratch, "hostile"))
        if hostile is not None:
            content = report.build([good, hostile])
            assert len({row["label"] for row in content["rows"]}) == 2
            json.dumps(content, allow_nan=False)  # report.json: finite numbers only
            for quote in (str, report_page.md_text):  # the HTML's words, and the Markdown's
                report_page.findings(content, quote)
                report_page.tables(content, quote)


@settings(max_examples=8, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(SUMMARIES, METRICS)
def test_a_report_of_a_good_run_and_a_hostile_one_is_written_and_escaped(summary, metrics):
    """The whole write (charts included): no raw markup reaches report.md or report.html."""
    with tempfile.TemporaryDirectory() as scratch:
        good = report.load_run(run_folder(os.path.join(scratch, "good")))
        hostile = _load({"summary": _json(summary), "config": b"{}",
                         "metrics": b"\n".join(map(_json, metrics))},
                        os.path.join(scratch, XSS))
        if hostile is None:
            return
        out = os.path.join(scratch, "out")
        report.write([good, hostile], None, out)
        md = open(os.path.join(out, "report.md"), encoding="utf-8").read()
        page = open(os.path.join(out, "report.html"), encoding="utf-8").read()
        assert "<" not in md  # the report writes no HTML into its Markdown
        charts = [n for n in os.listdir(out) if n.endswith(".png")]
        assert page.count("<img") == len(charts) and "<img src=x" not in page


# ---------------------------------------------------------------- the findings
def test_markup_from_a_run_folder_stays_text_in_the_markdown_and_the_html(tmp_path):
    """Finding 1: a summary field (and a folder name) holding <img onerror> is escaped."""
    first = run_folder(tmp_path / XSS, {"model": XSS, "device_kind": "cpu|`x`\n# h [a](b)"})
    second = run_folder(tmp_path / "plain", {"precision": "mixed_bfloat16"})
    done = _report(first, second, "--out", tmp_path / "r")
    assert done.returncode == 0, done.stderr
    md = (tmp_path / "r" / "report.md").read_text()
    page = (tmp_path / "r" / "report.html").read_text()
    assert "<img" not in md and "&lt;img src=x onerror=alert(1)&gt;" in md
    # One cell: its pipe, backticks, newline, # and link escaped.
    assert "cpu\\|\\`x\\`\\\\n\\# h \\[a\\](b)" in md
    columns = None
    for line in md.splitlines():  # every table row has its header's number of cells
        cells = len(re.findall(r"(?<!\\)\|", line))
        if line.startswith("| run |"):
            columns = cells
        elif line.startswith("|"):
            assert cells == columns, line
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert page.count("<img") == len(list((tmp_path / "r").glob("*.png")))


@needs_chromium
def test_markup_from_a_run_folder_makes_no_element_in_the_rendered_page(tmp_path):
    first = run_folder(tmp_path / "a", {"model": XSS, "precision": "mixed_bfloat16"})
    second = run_folder(tmp_path / "b", {"device_kind": XSS})
    done = _report(first, second, "--out", tmp_path / "r")
    assert done.returncode == 0, done.stderr
    page = dom(f"file://{tmp_path / 'r' / 'report.html'}", tmp_path / "dom")
    assert "<table" in page  # rendered
    assert '<img src="x"' not in page and "onerror=alert(1)&gt;" in page
    assert page.count("<img") == len(list((tmp_path / "r").glob("*.png")))


def test_a_folder_named_as_mathtext_is_drawn_as_its_name(tmp_path):
    """Finding 2: `$\\foo$` (a label from a folder name) reaches matplotlib as plain text."""
    folders = [run_folder(tmp_path / name) for name in ("$\\foo$", "$x^{$")]
    runs = [report.load_run(f) for f in folders]
    content = report.write(runs, None, str(tmp_path / "r"))
    assert [r["label"] for r in content["rows"]] == ["$\\foo$", "$x^{$"]
    for chart in ("throughput", "usd_per_million_images", "top1_vs_epoch"):
        assert (tmp_path / "r" / f"{chart}.png").read_bytes()[:4] == b"\x89PNG"
    assert plots.plain_text("$\\foo$") == "\\$\\foo\\$"  # shown by matplotlib as $\foo$


def test_a_json_nested_100000_deep_skips_its_run_with_one_line_and_the_others_are_reported(
        tmp_path):
    """Finding 3: one line per skipped folder; the good run is reported."""
    good = run_folder(tmp_path / "good")
    deep = run_folder(tmp_path / "deep", b"[" * 100_000 + b"]" * 100_000)
    done = _report(deep, good, "--out", tmp_path / "r")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert [line for line in done.stderr.splitlines() if "skipped" in line] == [
        f"warning: skipped {deep}: summary.json: nested deeper than 64 levels"]
    assert "small_resnet" in (tmp_path / "r" / "report.md").read_text().replace("\\_", "_")

    done = _report(deep, tmp_path / "missing", "--out", tmp_path / "r2")
    assert done.returncode == 2 and not (tmp_path / "r2").exists()
    lines = [line for line in done.stderr.splitlines() if line.startswith(("warning", "error"))]
    assert len(lines) == 3 and lines[-1].startswith("error: no run to report")


def test_a_figure_of_the_wrong_kind_is_shown_as_n_a_and_named_and_the_run_is_kept(tmp_path):
    """Finding 3: a string where a figure belongs, an infinite rate, a NaN in the
    metrics: the run stays, the figure is n/a and left out of the rankings."""
    folder = run_folder(tmp_path / "odd", {"images_per_sec": "fast", "image_size": 8.5,
                                           "best_val_top1": 7},
                        metrics='{"epoch": 1, "val_top1": NaN}\n{"epoch": "2"}\n')
    good = run_folder(tmp_path / "good")
    content = report.write([report.load_run(folder), report.load_run(good)], None,
                           str(tmp_path / "r"))
    odd = content["rows"][0]
    assert odd["images_per_sec"] is None and odd["image_size"] is None
    assert odd["invalid"] == ["best_val_top1", "image_size", "images_per_sec"]
    assert content["rankings"]["images_per_sec"] == ["good"]
    assert any("'images_per_sec' holds str 'fast'; accepted: number; shown as n/a" in line
               for line in content["caveats"])
    speed = next(line for line in (tmp_path / "r" / "report.md").read_text().splitlines()
                 if line.startswith("| odd | n/a"))
    assert speed.startswith("| odd | n/a | n/a | n/a |")


def test_a_metrics_file_that_is_a_fifo_skips_the_run_without_waiting(tmp_path):
    folder = run_folder(tmp_path / "fifo")
    os.remove(os.path.join(folder, "metrics.jsonl"))
    os.mkfifo(os.path.join(folder, "metrics.jsonl"))
    with pytest.raises(report.SkippedRun, match="metrics.jsonl: not a regular file"):
        report.load_run(folder)
