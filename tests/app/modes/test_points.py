"""The campaign's records read back as untrusted input: sweep.json
and ladder.json rows that were edited, cut or forged (markup as images/sec, 1e308,
missing fields, nested junk) are checked row by row; what passes prints in the
tables, the ladder's gains and "why" lines and the summary without a traceback, and
what fails is measured again, said in a warning."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.modes import ladder, points, sweep
from callbacks.records import untrusted

SWEEP_NAMES = ["global_batch_size=8", "global_batch_size=16"]
LADDER_NAMES = [r.name for r in ladder.RUNGS]


def campaign(mode):
    names = SWEEP_NAMES if mode == "sweep" else LADDER_NAMES
    return points.Campaign(mode=mode, unit="point", names=names, head={"started_at": 1.0},
                           measure=None, summarize=None, write=None, closing=None,
                           first_line="")


def read_back(tmp_path, mode, record):
    path = tmp_path / f"{mode}.json"
    path.write_text(record if isinstance(record, str) else json.dumps(record))
    return points.read_finished(str(tmp_path), campaign(mode))


GOOD = {"point": "global_batch_size=8", "status": "ok", "images_per_sec": 120.5,
        "settings": {"global_batch_size": 8}, "global_batch_size": 8,
        "step_time_ms": 66.4, "per_device_batch_size": 8,
        "breakdown": {"step_ms": 66.0, "parts": {"convolutions": {"ms": 40.0, "share": 0.6},
                                                  "idle": {"ms": 26.0, "share": 0.4}}}}


def test_a_good_row_is_kept_and_fields_not_listed_are_left_out(tmp_path, capsys):
    done, started = read_back(tmp_path, "sweep", {"sweep": [{**GOOD, "extra": [1]}],
                                                   "started_at": 1700000000.5})
    assert started == 1700000000.5
    assert done["global_batch_size=8"] == GOOD  # "extra" is left out
    assert capsys.readouterr().err == ""


def test_every_largest_change_difference_writes_is_read_back_as_it_was(tmp_path, capsys):
    """A rung's largest change in each form callbacks/profiling/difference.py writes: a
    kind named, no kind moved with the speed, two backends (kind null, no figures). A
    completed ladder whose rung had no kind was measured again on its rerun at 3ab39fc."""
    from callbacks.profiling import difference

    def side(ms, rate, backend="jax"):
        return {"breakdown": {"step_ms": sum(ms.values()), "parts": {
            k: {"ms": v, "share": v / sum(ms.values())} for k, v in ms.items()}},
            "global_batch_size": 8, "images_per_sec": rate, "backend": backend}

    a = side({"convolutions": 40.0, "idle": 26.0}, 120.0)
    changes = [difference.largest_change(a, side({"convolutions": 30.0, "idle": 26.0}, 140.0)),
               difference.largest_change(a, side({"convolutions": 41.0, "idle": 27.0}, 130.0)),
               difference.largest_change(a, side({"convolutions": 40.0, "idle": 26.0}, 130.0,
                                                 "tensorflow"))]
    assert [c["kind"] for c in changes] == ["convolutions", None, None]
    rows = [{**GOOD, "point": name, "largest_change": change}
            for name, change in zip(LADDER_NAMES, changes)]
    done, _ = read_back(tmp_path, "ladder", {"ladder": rows})
    assert capsys.readouterr().err == ""  # none measured again
    for name, change in zip(LADDER_NAMES, changes):
        kept = done[name]["largest_change"]
        assert kept["kind"] == change["kind"] and kept["words"] == change["words"]
        assert (kept["before_us"], kept["after_us"]) == (change.get("before_us"),
                                                         change.get("after_us"))
    lines = ladder.why_lines([{**done[name], "rung": name} for name in LADDER_NAMES[:3]])
    assert [line.split(": ", 1)[1].split(" (")[0] for line in lines] == [
        c["words"].split(" (")[0] for c in changes]
    # a named kind still needs its figures
    bare = {**GOOD, "point": LADDER_NAMES[0], "largest_change": {"kind": "convolutions"}}
    assert read_back(tmp_path, "ladder", {"ladder": [bare]})[0] == {}
    assert "'before_us' is missing" in capsys.readouterr().err


def test_edited_cut_or_forged_rows_are_said_and_measured_again(tmp_path, capsys):
    """Markup as images/sec, 1e308 with no step time, a field missing: each row one
    warning naming the field, none kept (so each is measured again)."""
    rows = [{**GOOD, "images_per_sec": "<b>fast</b>"},
            {**GOOD, "point": "global_batch_size=16", "images_per_sec": 1e308,
             "step_time_ms": None},
            {k: v for k, v in GOOD.items() if k != "images_per_sec"}]
    done, _ = read_back(tmp_path, "sweep", {"sweep": rows})
    assert done == {}
    warnings = capsys.readouterr().err.splitlines()
    assert len(warnings) == 3, warnings
    assert "'images_per_sec' holds str '<b>fast</b>'; accepted: number" in warnings[0]
    assert "'images_per_sec' holds float 1e+308; accepted: number in [0, 1000000000000.0]" \
        in warnings[1]
    assert "'images_per_sec' is missing" in warnings[2]
    assert all(w.startswith("warning: ") and w.endswith("it is measured again")
               for w in warnings)


def test_a_file_that_is_not_json_is_one_warning_and_every_point_again(tmp_path, capsys):
    assert read_back(tmp_path, "ladder", "{not json") == ({}, None)
    (line,) = capsys.readouterr().err.splitlines()
    assert "cannot be read (not JSON" in line and "every point is measured again" in line


SCALARS = (st.none() | st.booleans() | st.integers(-2**70, 2**70)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30)
           | st.sampled_from(["<b>x</b>", "\x1b[2J", "ok", "skipped: why", 1e308, -1.0]))
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=20)
FIELDS = list(points.ROW_FIELDS) + ["point", "status", "settings", "breakdown", "windows",
                                    "tried", "largest_change", "data_fingerprint"]
ROW = st.fixed_dictionaries(
    {"point": st.sampled_from(SWEEP_NAMES + LADDER_NAMES) | SCALARS,
     "status": st.sampled_from(["ok", "out of memory", "skipped: no"]) | SCALARS},
    optional={name: JSON for name in FIELDS if name not in ("point", "status")})


KINDS = {"number": st.floats(0, 1e6), "integer": st.integers(1, 4096),
         "text": st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=20),
         "bool": st.booleans()}
PART = st.fixed_dictionaries({"ms": st.floats(0, 1e3), "share": st.floats(0, 1)})
# Rows that mostly pass: each field of its kind, now and then a hostile value.
PLAUSIBLE = st.fixed_dictionaries(
    {"point": st.sampled_from(SWEEP_NAMES + LADDER_NAMES), "status": st.just("ok"),
     "images_per_sec": st.floats(0.5, 1e5)},
    optional={**{name: KINDS[kind] | SCALARS for name, (kind, _, _) in
                 points.ROW_FIELDS.items() if name != "images_per_sec"},
              "breakdown": st.fixed_dictionaries(
                  {"step_ms": st.floats(0, 1e3),
                   "parts": st.dictionaries(st.sampled_from(["convolutions", "idle", "x"]),
                                            PART, max_size=3)}) | JSON,
              "settings": st.dictionaries(st.sampled_from(["global_batch_size", "precision"]),
                                          SCALARS, max_size=2)})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(rows=st.lists(PLAUSIBLE | ROW | JSON, max_size=6),
       mode=st.sampled_from(["sweep", "ladder"]))
def test_hostile_rows_never_end_in_a_traceback(tmp_path, rows, mode):
    """Whatever the rows hold: reading them back, then everything that shows them (the
    table, the ladder's gains and why, the summary) runs, and each kept row's figures
    are of their kind and range."""
    done, _ = read_back(tmp_path, mode, {mode: rows})
    for row in done.values():
        assert isinstance(row["status"], str) and row["status"].isprintable()
        rate = row.get("images_per_sec")
        assert rate is None or (isinstance(rate, (int, float)) and 0 <= rate <= 1e12)
        assert row["status"] != "ok" or rate is not None
    if mode == "sweep":
        plan = {name: {"global_batch_size": int(name.split("=")[1])} for name in SWEEP_NAMES}
        summary = sweep._summarize({"started_at": 1.0, "axes": {"global_batch_size": []}},
                                   done, plan, "completed")
        sweep.format_table(summary["sweep"])
        sweep.axis_series(summary["sweep"], summary["best"], "global_batch_size")
    else:
        summary = ladder._summarize({"started_at": 1.0}, done, "completed")
        ladder.format_table(summary["ladder"])
        for rung in ladder.RUNGS:  # what the next rung would start from
            settings, built_on = ladder.base_of(rung, done)
            assert isinstance(settings, dict) and set(built_on) <= {"built_on"}
        assert summary["total_gain"] is None or summary["total_gain"] >= 0


def test_every_row_field_is_read_through_the_untrusted_checks():
    """A row's figure of the wrong kind is a RecordError naming it, never a TypeError."""
    for name, (kind, _, _) in points.ROW_FIELDS.items():
        wrong = 1.5 if kind in ("text", "integer", "bool") else "text"
        try:
            points.checked_row({**GOOD, name: wrong})
        except untrusted.RecordError as error:
            assert repr(name) in str(error), (name, error)
        else:
            raise AssertionError(f"{name}={wrong!r} was kept")


STATE = {"device_kind": "NVIDIA H100 80GB HBM3", "accelerator": "gpu", "devices_per_process": 1,
         "host": {"cpu": "AMD EPYC 9654", "cores": 16}, "software": {"jax": "0.11.2"},
         "driver": "580.95.05", "cuda_driver": "13.0",
         "devices": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "max_sm_clock_mhz": 1980}],
         "timed_window": {"samples": 40, "devices": [
             {"samples": 40, "sm_clock_mhz": {"mean": 1980.0, "min": 1980.0, "max": 1980.0},
              "throttle_share": {"gpu_idle": 0.1}, "other_processes": []}]},
         "not_sampled": None}


def test_a_rows_machine_state_is_kept_as_written_and_a_bad_one_left_out(tmp_path, capsys):
    """Each point's machine (app/run/machine_block.py) comes back with its row; one
    whose fields fail the machine state's checks, or whose text would break a line, is
    left out and the row kept (its measurement stands)."""
    done, _ = read_back(tmp_path, "sweep", {"sweep": [{**GOOD, "machine_state": STATE}]})
    assert done["global_batch_size=8"]["machine_state"] == STATE
    for bad in ({**STATE, "driver": 580}, {**STATE, "host": {"cpu": "EPYC\n\x1b[31m"}}):
        done, _ = read_back(tmp_path, "sweep", {"sweep": [{**GOOD, "machine_state": bad}]})
        assert done["global_batch_size=8"]["machine_state"] is None
        assert done["global_batch_size=8"]["images_per_sec"] == 120.5
    assert capsys.readouterr().err == ""
