"""A real TensorBoard server, on loopback, reading runs made here on both backends:
scalars laid out as Keras lays them out, with descriptions and units; the HParams
dashboard, over a folder of runs and over the one run folder the closing `view:`
line serves; the profiler's step-time breakdown; and the time series as a reader
sees them in headless Chromium (screenshots under test-artifacts/)."""

import json
import sys

import pytest
from browser import dom, needs_chromium, screenshot
from conftest import run_cli, tiny_flags
from tensorboard_server import fetch, hparams_table, serving


@pytest.fixture(scope="module")
def runs(digits_dir, tmp_path_factory):
    """Two runs (TensorFlow and JAX) with a trace of steps 3..5, in one folder."""
    root = tmp_path_factory.mktemp("tb")
    for backend, extra in (("tensorflow", ["--target_top1=0.3", "--peak_tflops_per_device=1"]),
                           ("jax", [])):
        done = run_cli(*tiny_flags(digits_dir, root / backend, f"--backend={backend}",
                                   "--steps_per_epoch=8", "--profile_steps=3,5",
                                   "--log_every_steps=4", *extra))
        assert done.returncode == 0, done.stderr[-3000:]
        (root / f"{backend}.stdout").write_text(done.stdout)  # (not a run: TensorBoard skips it)
    return root


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_a_profiled_run_says_where_its_trace_went(runs, backend):
    """The closing lines and summary.json name the traced steps and
    the folder TensorBoard's Profile tab reads, and the trace is there."""
    summary = json.loads((runs / backend / "summary.json").read_text())
    folder = str(runs / backend / "plugins" / "profile")
    assert {k: v for k, v in summary["profile"].items() if k not in ("breakdown", "session")} == {
        "steps": [3, 5], "folder": folder}
    # the session this run wrote (not one planted beside it: test_steps.py), where its trace is
    assert list((runs / backend / "plugins" / "profile" / summary["profile"]["session"]).glob(
        "*.xplane.pb"))
    assert (f"profile: steps 3-5 traced to {folder} (TensorBoard's Profile tab, with the view "
            "command below)") in (runs / f"{backend}.stdout").read_text().splitlines()


@pytest.fixture(scope="module")
def server(runs):
    with serving([sys.executable, "-m", "tensorboard.main", "--logdir", str(runs)]) as base:
        yield base


def test_scalars_read_like_keras_one_x_axis_per_tag_train_and_validation_overlaid(server):
    tags = fetch(server + "/data/plugin/scalars/tags")
    for run in ("tensorflow", "jax"):
        assert {"throughput/epoch_images_per_sec", "throughput/batch_running_images_per_sec",
                "accuracy/epoch_top1", "cost/epoch_cost_usd", "cost/batch_cost_usd",
                "utilization/epoch_model_tflops_per_sec", "optimizer/epoch_learning_rate",
                "loss/epoch_loss", "loss/batch_loss"} <= set(tags[run + "/train"])
        # Top-1 and loss of both runs on one chart each, as Keras's callback draws them;
        # evaluation speed on a card of its own, never on training's.
        assert {"accuracy/epoch_top1", "loss/epoch_loss",
                "throughput/epoch_eval_images_per_sec"} <= set(tags[run + "/validation"])
        assert not any("batch_" in tag for tag in tags[run + "/validation"])
        assert not set(tags[run + "/validation"]) & set(tags[run + "/train"]) - {
            "accuracy/epoch_top1", "loss/epoch_loss"}
    # A target was set for the TensorFlow run only: no flat card for the other.
    assert "accuracy/epoch_targets_reached" in tags["tensorflow/validation"]
    assert not any("targets_reached" in tag for run in tags for tag in tags[run]
                   if run.startswith("jax"))

    def steps(run, tag):
        return [p[1] for p in fetch(server + f"/data/plugin/scalars/scalars?run={run}&tag={tag}")]

    # epoch_ tags at epochs 1, 2; batch_ tags at global steps (every 4th of 2 x 8).
    assert steps("jax/train", "throughput/epoch_images_per_sec") == [1, 2]
    assert steps("jax/validation", "accuracy/epoch_top1") == [1, 2]
    assert steps("jax/train", "throughput/batch_running_images_per_sec") == [4, 8, 12, 16]


def test_every_scalar_says_what_it_is_and_its_unit(server):
    tags = fetch(server + "/data/plugin/scalars/tags")
    for run, by_tag in tags.items():
        for tag, info in by_tag.items():
            assert "<em>Unit:" in info["description"], (run, tag, info)  # Markdown, rendered


RUN_FIGURES = ("val_top1", "best_val_top1", "images_per_sec", "mfu", "cost_usd",
               "usd_per_million_images")


def check_session(session, summary):
    """Every column the run measured is filled with summary.json's value (the run's,
    not its last epoch's), and the session has the run's status."""
    values = {v["name"]["tag"]: v["value"] for v in session["metricValues"]}
    measured = {f"run/{key}": summary[key] for key in RUN_FIGURES if summary[key] is not None}
    assert set(values) == set(measured), (values, measured)
    for tag, value in measured.items():
        assert values[tag] == pytest.approx(value, rel=1e-6), tag
    assert session["status"] == "STATUS_SUCCESS"
    assert session["hparams"]["status"] == "completed"
    assert shown(session["hparams"]["global_batch_size"]) == "64"  # not "64.000"


def shown(value) -> str:
    """A value as the HParams table shows it: the dashboard's prettyPrint prints a
    number with JavaScript's toPrecision(5), text as it is, and a table cell collapses
    the leading spaces of text (white-space: nowrap)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:#.5g}" if abs(value) < 1e5 else f"{value:.4e}"
    return " ".join(str(value).split())


def test_hparams_set_every_run_against_the_same_columns_filled_with_its_figures(runs, server):
    experiment, sessions = hparams_table(server)
    infos = {h["name"]: h for h in experiment["hparamInfos"]}
    assert {"accelerator", "backend", "global_batch_size", "precision",
            "price_per_hour_usd"} <= set(infos)
    assert all(h.get("description") for h in infos.values())
    # One set of columns for every run, in the runs' own folders, each with its unit.
    assert [(m["name"]["group"], m["name"]["tag"]) for m in experiment["metricInfos"]] == [
        ("", f"run/{key}") for key in RUN_FIGURES]
    assert all("Unit:" in m["description"] for m in experiment["metricInfos"])
    assert sorted(sessions) == ["jax", "tensorflow"]
    for name, session in sessions.items():
        # its own group, named for its folder: never averaged with a
        # run of another folder
        assert session["group"].startswith(f"{name} (") and len(session["group"]) < 40
        summary = json.loads((runs / name / "summary.json").read_text())
        last_epoch = [json.loads(line) for line in
                      (runs / name / "metrics.jsonl").read_text().splitlines()][-1]
        assert summary["images_per_sec"] != last_epoch["epoch_images_per_sec"]
        check_session(session, summary)
        assert session["hparams"]["backend"] == name
    assert {v["name"]["tag"] for v in sessions["jax"]["metricValues"]} == {
        f"run/{k}" for k in RUN_FIGURES} - {"run/mfu"}  # no peak given: no MFU measured


def test_the_printed_view_command_shows_the_run_in_hparams_filled(runs):
    """`view:` serves the one run folder: its HParams session is "." and its columns
    are filled from its own folder."""
    with serving([sys.executable, "-m", "tensorboard.main", "--logdir",
                  str(runs / "tensorflow")]) as base:
        experiment, sessions = hparams_table(base)
    assert list(sessions) == ["."]
    check_session(sessions["."], json.loads((runs / "tensorflow" / "summary.json").read_text()))
    assert len(experiment["metricInfos"]) == len(RUN_FIGURES)


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_the_profile_of_steps_3_to_5_has_a_step_time_breakdown(server, backend):
    plugins = fetch(server + "/data/plugins_listing")
    assert plugins["profile"]["enabled"]
    profile_runs = fetch(server + "/data/plugin/profile/runs")
    run = next(r for r in profile_runs if r.startswith(backend + "/"))
    assert "overview_page" in fetch(server + f"/data/plugin/profile/run_tools?run={run}")
    host = fetch(server + f"/data/plugin/profile/hosts?run={run}&tag=overview_page")[0]
    tables = fetch(server + f"/data/plugin/profile/data?run={run}&tag=overview_page"
                            f"&host={host['hostname']}")
    steps = next(t for t in tables if any(c["id"] == "stepnum" for c in t.get("cols", [])))
    assert [row["c"][0]["v"] for row in steps["rows"]] == ["train 3", "train 4", "train 5"]


@needs_chromium
def test_the_time_series_and_hparams_render_in_a_browser(server, tmp_path):
    """Screenshots a reader's view (kept as test artifacts): the cards of images/sec and
    top-1, and the HParams table. SVG charts: headless Chromium has no WebGL."""
    url = server + "/?forceSVG=true&tagFilter=images_per_sec%7Ctop1#timeseries"
    cards = ("throughput/epoch_images_per_sec", "throughput/batch_running_images_per_sec",
             "accuracy/epoch_top1")
    for attempt in range(4):  # the page fetches its data in real time: it may be late
        page = dom(url, tmp_path / f"dom-{attempt}", (1600, 1400), budget_ms=20000)
        if all(card in page for card in cards):
            break
    assert all(card in page for card in cards), [c for c in cards if c not in page]
    screenshot(url, "tensorboard-time-series.png", tmp_path / "ts", (1600, 1400), 30000,
               region=(200, 1100, 350, 1300), attempts=4)  # the charts
    screenshot(server + "/?forceSVG=true#hparams", "tensorboard-hparams.png", tmp_path / "hp",
               (1600, 900), 30000, region=(150, 300, 330, 1600), attempts=4)  # the table


def test_a_preempted_run_reads_preempted_in_hparams_and_its_batch_is_the_integer(
        digits_dir, tmp_path):
    """A run stopped by SIGTERM says "preempted" in its status column,
    and is not "Running" (no process trains it: TensorBoard has no status for a run
    whose rerun resumes it, so it has no session end, Unknown), as TensorBoard's own
    hparams plugin serves it; the batch shows as 32, not 32.000, and reads back as the
    integer 32."""
    import signal

    from processes import start, until

    from callbacks.records.metrics_file import read_metrics

    logdir = tmp_path / "preempted"
    process = start(tiny_flags(digits_dir, logdir, "--backend=jax", "--epochs=20",
                               "--steps_per_epoch=8", "--global_batch_size=32"))
    until(process, lambda: read_metrics(str(logdir)), "the first epoch in metrics.jsonl")
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 75, stderr[-2000:]
    assert json.loads((logdir / "summary.json").read_text())["status"] == "preempted"
    with serving([sys.executable, "-m", "tensorboard.main", "--logdir", str(tmp_path)]) as base:
        _, sessions = hparams_table(base)
    (session,) = sessions.values()
    assert session["status"] == "STATUS_UNKNOWN"
    assert session["hparams"]["status"] == "preempted"
    batch = session["hparams"]["global_batch_size"]
    assert shown(batch) == "32" and int(batch) == 32


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_the_step_breakdown_card_is_served(server, runs, backend):
    """The profiled steps' breakdown as scalars (ms per step by kind of work)
    and a table under the Text tab, read back by the real server; each kind's achieved
    rate, or why it has none (TensorFlow's column was blank)."""
    from urllib.parse import quote

    from callbacks.profiling import breakdown

    tags = fetch(server + "/data/plugin/scalars/tags")[backend + "/train"]
    kinds = {tag.split("/", 1)[1] for tag in tags if tag.startswith("step_breakdown/")}
    summary = json.loads((runs / backend / "summary.json").read_text())
    parts = summary["profile"]["breakdown"]["parts"]
    # the card's are the traced steps' kinds; summary.json's idle is the timed step's
    assert kinds - {"idle"} == set(parts) - {"idle"} | {"step"}
    texts = fetch(server + "/data/plugin/text/tags")
    assert "step_breakdown" in texts[backend + "/train"]
    table = fetch(f"{server}/data/plugin/text/text?run={quote(backend + '/train')}"
                  "&tag=step_breakdown")[-1]["text"]
    work = [part for kind, part in parts.items() if kind != "idle"]
    if backend == "jax":  # XLA's ops have FLOPs and bytes: the table gives the rates
        rates = [breakdown.rate_words(part).removeprefix(" at ") for part in work]
        assert all(rates) and all(rate in table for rate in rates), table
    else:  # TensorFlow's executor ops have no shapes in the trace: the table says so
        reasons = {part.get("no_rate") for part in work}
        assert reasons == {"TensorFlow's own ops: the trace gives their names, not their "
                           "shapes"}, parts
        assert all(reason in table for reason in reasons), table


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_the_startup_card_is_served(server, runs, backend):
    """The start-up timeline's card under the Text tab, read back by the real
    server: each part of summary.json's startup, with its seconds."""
    from urllib.parse import quote

    assert "startup" in fetch(server + "/data/plugin/text/tags")[backend + "/train"]
    card = fetch(f"{server}/data/plugin/text/text?run={quote(backend + '/train')}"
                 "&tag=startup")[-1]["text"]
    block = json.loads((runs / backend / "summary.json").read_text())["startup"]
    assert f"{block['seconds_to_first_step']:.2f} s to the first step" in card
    for part in block["parts"]:
        assert f"{part['part']}</td>" in card or f"| {part['part']} |" in card, card
