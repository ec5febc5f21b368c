"""The decision written out (app/report/decision/page.py): its table and lines as a
user reads them, decision.md with a folder's hostile name escaped, decision.json
holding the figures, decision.png drawn with the frontier; a bad folder is a warning
and the others are decided on."""

import datetime
import json

from decision_folders import row, table_of, write_probe, write_run

from app.report.decision import page as decision_page

TODAY = datetime.date(2026, 12, 6)


def catalog_file(tmp_path, *rows):
    from decision_folders import COLUMNS

    path = tmp_path / "prices.csv"
    path.write_text(",".join(COLUMNS) + "\n" + "".join(
        ",".join(r[c] for c in COLUMNS) + "\n" for r in rows))
    return str(path)


def folders(tmp_path):
    busy = {"before": {"cpu_cores": 2, "load_average_1m": 3}}
    return [write_run(tmp_path / "run"), write_probe(tmp_path / "probe", machine_state=busy),
            write_probe(tmp_path / "$x|`y`*"), str(tmp_path / "missing")]


def test_the_table_and_the_lines(tmp_path):
    path = catalog_file(tmp_path, row("fast", "^Fast X$", {"on_demand": 2.0, "spot": 0.5}),
                        row("slow", "^Slow Y$", {"on_demand": 1.0}, date="2026-05",
                            provider="nebius"))
    result, warnings = decision_page.decide(folders(tmp_path), 0.9, path, today=TODAY)
    assert warnings == [f"warning: the decision leaves out {tmp_path / 'missing'}: holds no "
                        "summary.json (not a run folder)"]
    lines = decision_page.table(result).splitlines()
    assert lines[0].split() == ["rank", "machine", "measured", "sold", "as", "option", "hours",
                                "dollars", "$/h", "read", "frontier"]
    # 11 s at $0.5/h for each probe, then 20 s at $1/h (read 2026-05: stale), 11 s at $2/h;
    # the probes' spot is faster and cheaper than anything else: the frontier.
    assert [" ".join(line.split()) for line in lines[1:]] == [
        "1 1 x Fast X (jax, probe probe) fast spot 0.0031 $0.0015 0.5 2026-12-01 yes",
        "2 1 x Fast X (jax, probe $x|`y`*) fast spot 0.0031 $0.0015 0.5 2026-12-01 yes",
        "3 1 x Slow Y (tensorflow, run run) slow on demand 0.0056 $0.0056 1 2026-05*",
        "4 1 x Fast X (jax, probe probe) fast on demand 0.0031 $0.0061 2 2026-12-01",
        "5 1 x Fast X (jax, probe $x|`y`*) fast on demand 0.0031 $0.0061 2 2026-12-01"]
    assert f"{11 / 3600 * 0.5:.4f}" == "0.0015" and f"{11 / 3600 * 2:.4f}" == "0.0061"
    said = decision_page.lines(result)
    assert said[0] == result["cheapest"] and said[1] == result["fastest"]
    assert ("check: 1 x Slow Y (tensorflow, run run) measured 0.0056 h to 0.9; predicted from "
            "its own figures 0.0056 h (+0.0%)") in said  # no probe of its machine

    assert ("stale prices (check the seller's page): slow read 2026-05, over 90 days ago"
            in said)
    assert ("caveat: 1 x Fast X (jax, probe probe) was measured on a busy machine (the CPU's "
            "load average was 3 on 2 cores): its rate may be low and its start-up long; "
            "probe it again when it is idle") in said
    assert said[-1] == (f"spot: each interruption adds ${6 / 3600 * 0.5:,.4f} to fast (0 an "
                        "hour assumed; --interruptions_per_hour sets it)")


def test_a_full_run_is_checked_against_a_probe_of_its_own_machine(tmp_path):
    """A probe of the run's device, backend, devices, precision and job: its hours
    against the run's measured ones, and its rate over the run's steady rate (here 352
    against 320: 1.10x; 6 s + 4 x 640/352 x 1.25 s = 15.09 s against 20 s: -24.5%,
    over the 10% a probe may be off its full run, so a caveat)."""
    path = catalog_file(tmp_path, row("slow", "^Slow Y$", {"on_demand": 1.0}))
    same = write_probe(tmp_path / "same", device_kind="Slow Y", backend="tensorflow",
                       images_per_sec=352.0)
    result, _ = decision_page.decide([write_run(tmp_path / "run"), same], 0.9, path,
                                     today=TODAY)
    said = decision_page.lines(result)
    checks = [line for line in said if line.startswith("check:")]
    assert checks == [
        "check: 1 x Slow Y (tensorflow, run run) measured 0.0056 h to 0.9; predicted from its "
        "own figures 0.0056 h (+0.0%)",
        "check: 1 x Slow Y (tensorflow, run run) measured 0.0056 h to 0.9; predicted from probe "
        "same 0.0042 h (-24.5%), its rate 1.10x this run's steady rate"]
    assert ("caveat: probe same predicted 1 x Slow Y (tensorflow, run run)'s hours -24.5% off "
            "its full run (over 10%): the probe's rate or start-up is not the run's; probe "
            "again, or trust the full run") in said


def test_the_files_hold_the_figures_and_escape_what_folders_supplied(tmp_path):
    path = catalog_file(tmp_path, row("fast", "^Fast X$", {"on_demand": 2.0}))
    result, _ = decision_page.decide(folders(tmp_path), 0.9, path, today=TODAY)
    out = tmp_path / "out"
    written = decision_page.write(result, str(out))
    assert sorted(written) == sorted(decision_page.DECISION_FILES)
    assert (out / "decision.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    saved = json.loads((out / "decision.json").read_text())
    assert [o["dollars"] for o in saved["options"]] == [o["dollars"] for o in result["options"]]
    markdown = (out / "decision.md").read_text()
    assert "probe \\$x\\|\\`y\\`\\*" in markdown and "$x|`y`*" not in markdown
    assert "![dollars against hours to 0.9](decision.png)" in markdown
    assert "- epochs: 4: the first epoch at top-1 &gt;= 0.9" in markdown


def test_with_no_price_nothing_is_drawn_and_the_lines_say_so(tmp_path):
    path = catalog_file(tmp_path, row("other", "^Other$", {"on_demand": 1.0}))
    result, _ = decision_page.decide([write_run(tmp_path / "run", machine=None),
                                      write_probe(tmp_path / "probe", machine=None)], 0.9,
                                     path, today=TODAY)
    assert result["options"] == []
    written = decision_page.write(result, str(tmp_path / "out"))
    assert "decision.png" not in written
    assert decision_page.lines(result)[0] == (
        "decision: hours predicted, dollars not: no catalog row sells Fast X, Slow Y and no "
        "run carries a price of its own (give --price_catalog a row for it, or probe with "
        "--price_per_hour_usd)")
    _ = table_of  # the rows' format is decision_folders'


def test_an_interrupted_run_is_checked_with_its_interruption(tmp_path):
    """Epoch 3 was interrupted and resumed: it took its 2.5 s, a 10 s start-up and 1.25 s
    of work lost (half an epoch). Its own prediction adds that resume (10 + 0.5 x 2.5 s)
    to its 20 s: 31.25 s, as measured (before, the line said -36.0%)."""
    path = catalog_file(tmp_path, row("slow", "^Slow Y$", {"on_demand": 1.0}))
    attempts = [{"resumed_from": {"epoch": 0, "step": 0}},
                {"resumed_from": {"epoch": 2, "step": 0}}]
    run = write_run(tmp_path / "run", attempts=attempts, extra_seconds={3: 11.25})
    result, _ = decision_page.decide([run], 0.9, path, today=TODAY)
    (check,) = [line for line in decision_page.lines(result) if line.startswith("check:")]
    assert check == ("check: 1 x Slow Y (tensorflow, run run) measured 0.0087 h to 0.9; "
                     "predicted from its own figures and its 1 interruption(s) 0.0087 h (+0.0%)")
    assert f"{31.25 / 3600:.4f}" == "0.0087"


def test_an_unreached_target_is_the_headline(tmp_path):
    path = catalog_file(tmp_path, row("slow", "^Slow Y$", {"on_demand": 1.0}))
    text, warnings = decision_page.report([write_run(tmp_path / "run")], 0.999,
                                          str(tmp_path / "out"), path)
    assert text.splitlines()[0] == (
        "decision: no full run reached top-1 0.999 (the best logged: 0.9500): nothing to "
        "predict from; train longer or give a lower --target")
    assert "none predicted" not in text and warnings == []


def test_one_folder_given_twice_is_read_once_with_a_warning(tmp_path):
    """The adversarial pass: `P` and `P/.` doubled every option and check line."""
    path = catalog_file(tmp_path, row("slow", "^Slow Y$", {"on_demand": 1.0}))
    run = write_run(tmp_path / "run")
    result, warnings = decision_page.decide([run, run + "/.", run + "/"], 0.9, path,
                                            today=TODAY)
    assert [m["name"] for m in result["machines"]] == ["run"]
    assert len(result["options"]) == 1
    assert warnings == [f"warning: {run}/. is {run} given again: read once",
                        f"warning: {run}/ is {run} given again: read once"]


def test_probes_of_one_job_that_disagree_beyond_their_spreads_are_flagged(tmp_path):
    """Three probes of one machine and job: two whose windows overlap (1,300-1,420 and
    1,350-1,500 images/sec) agree; the third (700-840) lies outside both and is flagged
    against each, and its own windows' spread (1.20x) is not past the caveat's."""
    path = catalog_file(tmp_path, row("fast", "^Fast X$", {"on_demand": 1.0}))
    probes = [write_probe(tmp_path / name, rate=rate, repeats=3, images_per_sec_min=low,
                          images_per_sec_max=high)
              for name, rate, low, high in (("p1", 1372.7, 1300.0, 1420.0),
                                            ("p2", 1400.0, 1350.0, 1500.0),
                                            ("p3", 705.1, 700.0, 840.0))]
    result, _ = decision_page.decide([write_run(tmp_path / "run"), *probes], 0.9, path,
                                     today=TODAY)
    flagged = [line for line in decision_page.lines(result) if "disagree" in line]
    assert flagged == [
        "caveat: probes p1 (1,372.7 images/sec, 1,300.0-1,420.0) and p3 (705.1, 700.0-840.0) "
        "of one machine disagree beyond their spreads: its speed moved between them; probe "
        "again when it is idle",
        "caveat: probes p2 (1,400.0 images/sec, 1,350.0-1,500.0) and p3 (705.1, 700.0-840.0) "
        "of one machine disagree beyond their spreads: its speed moved between them; probe "
        "again when it is idle"]
    wide = write_probe(tmp_path / "wide", rate=600.0, repeats=3, images_per_sec_min=363.4,
                       images_per_sec_max=819.5)
    result, _ = decision_page.decide([write_run(tmp_path / "run2"), wide], 0.9, path,
                                     today=TODAY)
    assert ("caveat: 1 x Fast X (jax, probe wide): its 3 windows spread over 363.4-819.5 "
            "images/sec (2.26x): the machine's speed moved while it was probed"
            in decision_page.lines(result))
