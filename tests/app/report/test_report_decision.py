"""One verdict per folder: `app/report.py RUNS --target=T --price_catalog=FILE --out D`
prints the decision, and report.html and report.md written beside decision.md open with
the same lines; their steady-state figures below say what they leave out, and where
the steady state ranks another machine first, one sentence says why the two differ.

A full run (TensorFlow, 700 images/sec, a 10 s start-up) against a probe of another
machine (JAX, 640 images/sec, a 2 s start-up), one price: the run is the faster at the
steady state; the probe's machine reaches top-1 0.9 first (the first user's trial read
"Fastest: TensorFlow [digits] ... 1.07x as fast as JAX" over a decision naming JAX).
"""

import html
import re

from app.report import command

from decision_folders import COLUMNS, row, write_probe, write_run  # noqa: E402


def catalog(tmp_path):
    path = tmp_path / "prices.csv"
    rows = [row("fast", "^Fast X$", {"on_demand": 1.0}), row("slow", "^Slow Y$", {"on_demand": 1.0})]
    path.write_text(",".join(COLUMNS) + "\n" + "".join(
        ",".join(r[c] for c in COLUMNS) + "\n" for r in rows))
    return str(path)


def report(tmp_path, capsys, *extra):
    run = write_run(tmp_path / "run", rate=700.0)
    probe = write_probe(tmp_path / "probe", rate=640.0, startup=2.0)
    code = command.main([run, probe, "--target=0.9", "--out", str(tmp_path / "out"), *extra])
    return code, capsys.readouterr()


def test_the_report_opens_with_the_decisions_verdict(tmp_path, capsys):
    code, printed = report(tmp_path, capsys, f"--price_catalog={catalog(tmp_path)}")
    assert code == 0, printed.err
    said = printed.out.splitlines()
    cheapest = next(line for line in said if line.startswith("cheapest: "))
    fastest = next(line for line in said if line.startswith("fastest: "))
    assert cheapest.startswith("cheapest: 1 x Fast X (jax, probe probe)")
    assert fastest.startswith("fastest: 1 x Fast X (jax, probe probe)")
    assert "decided by start-up 2.0 s against 10.0 s" in fastest

    page = (tmp_path / "out" / "report.html").read_text()
    headings = re.findall(r"<h2>(.*?)</h2>", page)
    assert headings[0] == ("Decision: to top-1 0.9, start-up, evaluation and checkpoints "
                           "included")
    verdict = re.search(r"<ul id='decision'>(.*?)</ul>", page).group(1)
    items = [html.unescape(i) for i in re.findall(r"<li>(.*?)</li>", verdict)]
    assert items[:2] == [cheapest, fastest]  # one verdict, said once, the same words
    assert items[2] == ("The steady state below ranks 1 x Slow Y, TensorFlow fastest; to "
                        "top-1 0.9 the decision's fastest is 1 x Fast X, JAX: decided by "
                        "start-up 2.0 s against 10.0 s, which outweighs evaluation and "
                        "checkpoints 6.9 s against 6.3 s over 4 epochs.")
    findings = html.unescape(re.search(r"<ul id='findings'>(.*?)</ul>", page).group(1))
    assert ("Fastest at the steady state (start-up, evaluation and checkpoints excluded): "
            "1 x Slow Y, TensorFlow at 700 images/sec") in findings
    assert "Speed at the steady state (start-up, evaluation and checkpoints excluded)" in page

    markdown = (tmp_path / "out" / "report.md").read_text().splitlines()
    first = next(i for i, line in enumerate(markdown) if line.startswith("## "))
    assert markdown[first] == ("## Decision: to top-1 0.9, start-up, evaluation and "
                               "checkpoints included")
    assert markdown[first + 2].startswith("- cheapest: 1 x Fast X (jax, probe probe)")
    assert (tmp_path / "out" / "decision.md").exists()


def test_a_probe_of_the_runs_own_machine_is_no_second_verdict(tmp_path, capsys):
    """A probe of the run's machine (Slow Y, TensorFlow) starts sooner, so it is the
    decision's fastest while the run is the steady state's: one machine, measured twice,
    so no sentence sets them against each other (the README's CPU trial read "The steady
    state below ranks TensorFlow [digits] fastest; ... the decision's fastest is
    TensorFlow [probe-tf]")."""
    run = write_run(tmp_path / "run", rate=700.0)
    probe = write_probe(tmp_path / "probe", rate=690.0, startup=2.0, device_kind="Slow Y",
                        backend="tensorflow")
    assert command.main([run, probe, "--target=0.9", "--out", str(tmp_path / "out"),
                         f"--price_catalog={catalog(tmp_path)}"]) == 0
    fastest = next(line for line in capsys.readouterr().out.splitlines()
                   if line.startswith("fastest: "))
    assert fastest.startswith("fastest: 1 x Slow Y (tensorflow, probe probe)")
    assert fastest.endswith("; the only machine measured")
    page = (tmp_path / "out" / "report.html").read_text()
    verdict = re.search(r"<ul id='decision'>(.*?)</ul>", page).group(1)
    assert len(re.findall(r"<li>", verdict)) == 2 and "steady state below" not in verdict


def test_without_a_target_the_report_has_no_verdict(tmp_path):
    run = write_run(tmp_path / "run", rate=700.0)
    probe = write_probe(tmp_path / "probe", rate=640.0, startup=2.0)
    assert command.main([run, probe, "--out", str(tmp_path / "out")]) == 0
    page = (tmp_path / "out" / "report.html").read_text()
    assert "<ul id='decision'>" not in page and "Decision:" not in page


def test_a_price_catalog_it_cannot_read_is_one_line_before_any_file(tmp_path, capsys):
    """The report takes --price_catalog, the name app/main.py takes; a file it cannot use
    is one line and exit 2, and no report is written."""
    bad = tmp_path / "bad.csv"
    bad.write_text("not,a,catalog\n")
    code, printed = report(tmp_path, capsys, f"--price_catalog={bad}")
    assert code == 2
    (line,) = printed.err.strip().splitlines()
    assert line.startswith(f"error: the price catalog {bad}") and "header lacks" in line
    assert not (tmp_path / "out" / "report.html").exists()
