"""One writer per run folder, decided under the lock: runs racing on a new
folder, a folder a kill left holding only run.lock, a run refused after its
preflight leaving nothing behind. Real processes, real files (app/run/rundir.py)."""

import json
import os
import time

import pytest
from conftest import PATIENCE_SECONDS, error_lines, tiny_flags
from processes import killed_at, run, snapshot, start

from callbacks.records.metrics_file import read_metrics

# When the second run starts after the first, spread from 0 to 1 s: together, and
# late enough that the first has made the folder but not yet written config.json
# (the window that failed: the second judged the folder before the first wrote it).
OFFSETS_SECONDS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_two_runs_racing_on_a_new_folder_one_trains(digits_dir, tmp_path, backend):
    for offset in OFFSETS_SECONDS:
        logdir = tmp_path / f"race-{offset}"
        args = tiny_flags(digits_dir, logdir, f"--backend={backend}")
        first = start(args)
        time.sleep(offset)
        second = start(args)
        ended = [(p, *p.communicate(timeout=PATIENCE_SECONDS)) for p in (first, second)]
        trained = [(p, out) for p, out, _ in ended if p.returncode == 0 and "status: completed"
                   in out and "run is complete" not in out]
        assert len(trained) == 1, [(p.returncode, err[-1500:]) for p, _, err in ended]
        winner = trained[0][0]
        loser, out, err = next(e for e in ended if e[0] is not winner)
        if loser.returncode == 2:  # it found the folder held
            errors = error_lines(err)
            assert len(errors) == 1 and "Traceback" not in err, err[-2000:]
            assert f"is in use by a live run (pid {winner.pid})" in errors[0]
        else:  # it started once the first had finished
            assert loser.returncode == 0 and f"run is complete: {logdir}" in out, err[-2000:]
        summary = json.loads((logdir / "summary.json").read_text())
        assert [a.get("pid") for a in summary["attempts"]] == [winner.pid]
        assert [r["epoch"] for r in read_metrics(str(logdir))] == [1, 2]


def test_a_folder_holding_only_run_lock_is_a_new_run(digits_dir, tmp_path):
    # A kill while config.json is written (the run's first atomic write) leaves the
    # lock file and config.json's temporary; a kill just before it, the lock file only.
    killed = tmp_path / "killed-early"
    killed_at(tiny_flags(digits_dir, killed), "atomic_write", 1)
    left = sorted(os.listdir(killed))
    assert left[-1] == "run.lock" and all(n.startswith(".tmp-") for n in left[:-1]), left
    only_lock = tmp_path / "only-lock"
    only_lock.mkdir()
    (only_lock / "run.lock").touch()
    for logdir in (killed, only_lock):
        done = run(tiny_flags(digits_dir, logdir))
        assert done.returncode == 0 and not error_lines(done.stderr), done.stderr[-2000:]
        assert "resuming from" not in done.stdout
        assert [r["epoch"] for r in read_metrics(str(logdir))] == [1, 2]
        assert json.loads((logdir / "summary.json").read_text())["status"] == "completed"
        assert not [n for n in os.listdir(logdir) if ".tmp-" in n]


def test_a_run_refused_after_its_preflight_leaves_nothing_behind(digits_dir, tmp_path):
    missing = f"--dataset=folder:{tmp_path / 'no-such-data'}"
    new = tmp_path / "parent" / "new"  # two levels made by the preflight, both removed
    refused = run(tiny_flags(digits_dir, new, missing))
    errors = error_lines(refused.stderr)
    assert refused.returncode == 2 and len(errors) == 1, refused.stderr[-2000:]
    assert "is not a folder" in errors[0] and "Traceback" not in refused.stderr
    assert not (tmp_path / "parent").exists()

    empty = tmp_path / "empty"
    empty.mkdir()
    refused = run(tiny_flags(digits_dir, empty, missing))
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert empty.is_dir() and os.listdir(empty) == []  # the folder stays; no run.lock

    # A folder that is not a run's is refused, and keeps no run.lock of this run.
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    refused = run(tiny_flags(digits_dir, other))
    assert refused.returncode == 2 and "not a run folder" in error_lines(refused.stderr)[0]
    assert os.listdir(other) == ["notes.txt"]


def test_fresh_moves_aside_only_a_run_folder_and_refuses_anything_else(digits_dir, tmp_path):
    """--fresh on a folder this app did not write (a dataset, another
    tool's output with a config.json of its own) renamed it DIR.old-<time> and left a
    run.lock in it. Now one line, exit 2, the folder as it was, nothing beside it;
    a run folder whose config.json was damaged is still a run's, and moves aside."""
    dataset = tmp_path / "photos"
    (dataset / "train" / "cat").mkdir(parents=True)
    (dataset / "train" / "cat" / "1.jpg").write_bytes(b"\xff\xd8 not really")
    (dataset / "config.json").write_text('{"architectures": ["ViT"], "model_type": "vit"}')
    before = snapshot(dataset)
    for extra in (["--fresh"], []):
        refused = run(tiny_flags(digits_dir, dataset, *extra))
        errors = error_lines(refused.stderr)
        assert refused.returncode == 2 and len(errors) == 1, refused.stderr[-2000:]
        assert errors[0] == (
            f"error: --logdir={dataset} is not a run folder (it holds config.json, train and "
            "no config.json of a run of this app); choose a new or empty folder (--fresh "
            "moves aside only a run folder)")
        assert "Traceback" not in refused.stderr
        assert snapshot(dataset) == before  # no run.lock, nothing renamed
        assert sorted(os.listdir(tmp_path)) == ["photos"]

    damaged = tmp_path / "damaged-run"  # the app's lock and records, config.json cut short
    damaged.mkdir()
    for name, text in (("run.lock", ""), ("billing.json", '{"attempts": []}'),
                       ("config.json", '{"model": "small_res')):
        (damaged / name).write_text(text)
    refused = run(tiny_flags(digits_dir, damaged))
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert "cannot read config.json" in error_lines(refused.stderr)[0]
    done = run(tiny_flags(digits_dir, damaged, "--fresh", "--epochs=1"))
    assert done.returncode == 0, done.stderr[-2000:]
    aside = [p for p in os.listdir(tmp_path) if p.startswith("damaged-run.old-")]
    assert len(aside) == 1 and f"--fresh: moved the previous contents of {damaged}" in done.stdout
    assert (tmp_path / aside[0] / "config.json").read_text() == '{"model": "small_res'
    assert json.loads((damaged / "summary.json").read_text())["status"] == "completed"
