"""HParams as a user sees it through a real TensorBoard server and its own hparams
plugin: two sweeps of the same points under one folder are
never averaged into one row; a sweep's axis is its first column; a batch reads "16",
not "16.000", and sorts as a number; each point says how it ended.

The plain run's record (its columns, its status when preempted) is checked in
tests/test_tensorboard.py, on the runs that file trains."""

import os
import sys

import pytest
from conftest import PATIENCE_SECONDS, ROOT
from processes import run, strict_json
from tensorboard_server import fetch, serving

from callbacks.records import hparams

NO_TF = os.path.join(ROOT, "tests", "no_tensorflow")
STATUSES = ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"]


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """Two sweeps of the same two points (batches 4 and 16), of other lengths, in one
    folder: runs/a and runs/b."""
    root = tmp_path_factory.mktemp("runs")
    for name, steps in (("a", 4), ("b", 8)):
        done = run(["--backend=jax", "--model=tests/sleepy_model.py:make_model",
                    "--dataset=synthetic", "--image_size=8", "--sweep_batch_sizes=4,16",
                    f"--steps_per_epoch={steps}", f"--logdir={root / name}"],
                   env={"PYTHONPATH": NO_TF}, timeout=PATIENCE_SECONDS)
        assert done.returncode == 0, done.stderr[-3000:]
    return root


def groups_of(base, order=None) -> list:
    """The session groups (the table's rows) as the dashboard asks for them; `order`
    sorts them by global_batch_size (ORDER_ASC or ORDER_DESC) on the server."""
    columns = [{"hparam": "global_batch_size", "order": order}] if order else []
    return fetch(base + "/data/plugin/hparams/session_groups", {
        "experimentName": "", "allowedStatuses": STATUSES, "colParams": columns,
        "startIndex": 0, "sliceSize": 100})["sessionGroups"]


def shown(value) -> str:
    """A value as the table shows it: numbers to 5 significant digits (the dashboard's
    prettyPrint, JavaScript's toPrecision(5)), text with its spaces collapsed (a cell's
    white-space: nowrap)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:#.5g}"
    return " ".join(str(value).split())


def test_two_sweeps_of_the_same_points_are_four_rows_each_its_own(sweeps):
    """`tensorboard --logdir runs` over two sweeps with the same point
    names: four groups of one session each, each group's images/sec its own sweep's
    (before, two groups averaged two sweeps' points); each group is named for the
    point, then its folder."""
    with serving([sys.executable, "-m", "tensorboard.main", "--logdir", str(sweeps)]) as base:
        groups = groups_of(base)
    assert len(groups) == 4, [g["name"] for g in groups]
    assert all(len(g["sessions"]) == 1 for g in groups)
    for name in ("a", "b"):
        for row in strict_json(sweeps / name / "sweep.json")["sweep"]:
            session = f"{name}/points/{row['point']}"
            (group,) = [g for g in groups if g["sessions"][0]["name"] == session]
            assert group["name"] == hparams.trial_id(
                str(sweeps / name / "points" / row["point"]),
                f"batch {row['global_batch_size']}", str(sweeps / name))
            assert group["name"].startswith(f"batch {row['global_batch_size']} · {name} (")
            value = {v["name"]["tag"]: v["value"] for v in group["metricValues"]}
            assert value["run/images_per_sec"] == pytest.approx(row["images_per_sec"])


def test_a_sweeps_axis_comes_first_and_reads_as_an_integer_in_numeric_order(sweeps):
    """Served as its `view:` line serves it, a sweep's table
    lists its axis first (the dashboard ticks the first five columns), the batch reads
    "4" and "16" (not "4.0000") and sorts 4 before 16 (as text, "16" < "4"); each point
    says how it ended."""
    folder = sweeps / "a"
    with serving([sys.executable, "-m", "tensorboard.main", "--logdir", str(folder)]) as base:
        experiment = fetch(base + "/data/plugin/hparams/experiment", {"experimentName": ""})
        ascending, descending = groups_of(base, "ORDER_ASC"), groups_of(base, "ORDER_DESC")
    infos = experiment["hparamInfos"]
    assert infos[0]["name"] == "global_batch_size" and infos[0]["differs"]
    assert not any(info.get("differs") for info in infos[1:])
    assert [shown(g["hparams"]["global_batch_size"]) for g in ascending] == ["4", "16"]
    assert [shown(g["hparams"]["global_batch_size"]) for g in descending] == ["16", "4"]
    assert all(int(g["hparams"]["global_batch_size"]) in (4, 16) for g in ascending)
    for group in ascending:
        assert group["hparams"]["status"] == "ok"
        assert group["sessions"][0]["status"] == "STATUS_SUCCESS"
        assert shown(group["hparams"]["image_size"]) == "8"
        assert group["name"].startswith(f"batch {shown(group['hparams']['global_batch_size'])}")
