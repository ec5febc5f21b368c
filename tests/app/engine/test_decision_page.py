"""The decision written out (app/engine/decision_page.py): its table and lines as a
user reads them, decision.md with a folder's hostile name escaped, decision.json
holding the figures, decision.png drawn with the frontier; a bad folder is a warning
and the others are decided on."""

import datetime
import json

from decision_folders import row, table_of, write_probe, write_run

from app.engine import decision_page

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
    assert ("check: 1 x Slow Y (tensorflow, run run) predicted 0.0056 h to 0.9, measured "
            "0.0056 h (+0.0%)") in said  # no probe of its machine: nothing to compare

    assert ("stale prices (check the seller's page): slow read 2026-05, over 90 days ago"
            in said)
    assert ("caveat: 1 x Fast X (jax, probe probe) was measured on a busy machine (the CPU's "
            "load average was 3 on 2 cores): its rate may be low and its start-up long; "
            "probe it again when it is idle") in said
    assert said[-1] == (f"spot: each interruption adds ${6 / 3600 * 0.5:,.4f} to fast (0 an "
                        "hour assumed; --interruptions_per_hour sets it)")


def test_a_full_run_is_checked_against_a_probe_of_its_own_machine(tmp_path):
    """A probe of the run's device, backend, devices, precision and job: its rate over
    the run's steady rate, on the check line (here 352 against 320: 1.10x)."""
    path = catalog_file(tmp_path, row("slow", "^Slow Y$", {"on_demand": 1.0}))
    same = write_probe(tmp_path / "same", device_kind="Slow Y", backend="tensorflow",
                       images_per_sec=352.0)
    result, _ = decision_page.decide([write_run(tmp_path / "run"), same], 0.9, path,
                                     today=TODAY)
    (check,) = [line for line in decision_page.lines(result) if line.startswith("check:")]
    assert check.endswith("(+0.0%); probe same saw 1.10x this run's steady rate")

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
    assert decision_page.lines(result)[:2] == [
        "cheapest: none predicted (no measured machine has a price and a full run)",
        "fastest: none predicted (no measured machine has a price and a full run)"]
    _ = table_of  # the rows' format is decision_folders'
