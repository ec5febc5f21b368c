"""Help that helps: `--help` lists the project's flags in BUILD.md's groups, and a near
miss gets a suggestion (or how to install what is missing), in a second, from the
real command."""

import dataclasses
import os
import re
import time

import pytest
from conftest import ROOT, error_lines, run_cli

from flags import Config
from flags.definitions import ACTIONS, GROUPS


def test_every_flag_is_in_exactly_one_group():
    grouped = [name for names in GROUPS.values() for name in names]
    assert sorted(grouped) == sorted([f.name for f in dataclasses.fields(Config)] + [*ACTIONS])


def test_help_lists_the_project_flags_by_group_with_defaults():
    done = run_cli("--help")
    assert done.returncode == 0, done.stderr[-2000:]
    text = done.stdout
    assert text.startswith("usage: python app/main.py")
    headers = [line[:-1] for line in text.splitlines() if re.fullmatch(r"[a-z]+:", line)]
    assert headers == ["examples", *GROUPS]
    listed = re.findall(r"^  --(\w+)(?:=|\[=)", text, re.MULTILINE)
    assert listed == [name for names in GROUPS.values() for name in names]
    assert "--global_batch_size=64" in text and "Images per step" in text
    assert "--logtostderr" not in text and "absl" not in text.split("--helpfull")[0]


def test_build_md_uses_the_groups_of_help():
    text = open(os.path.join(ROOT, "BUILD.md")).read()
    rows = dict(re.findall(r"^\| (\w+) \| (.*) \|$", text, re.MULTILINE))
    for group, names in GROUPS.items():
        assert group in rows, group
        assert re.findall(r"`--(\w+)", rows[group]) == list(names), group


NO_JAX = os.path.join(os.path.dirname(__file__), "no_jax")


@pytest.mark.parametrize("args, env, expected", [
    (["--dataset=cifar10"], None, "did you mean tfds:cifar10?"),
    (["--dataset=imagenet"], None, "did you mean imagenet2012?"),
    (["--machine=tpu-v5e"], None, "did you mean gcp-tpu-v5e?"),
    (["--model=resnet5"], None, "did you mean resnet50?"),
    (["--dataset=folder:/nonexistent/pets"], None, "/nonexistent/pets is not a folder"),
    (["--backend=jax"], {"PYTHONPATH": NO_JAX}, 'needs jax, which does not import here'),
])
def test_a_near_miss_or_a_missing_piece_is_one_line_in_seconds(tmp_path, args, env, expected):
    began = time.time()
    done = run_cli(*args, f"--logdir={tmp_path / 'run'}", env=env)
    seconds = time.time() - began
    errors = error_lines(done.stderr)
    assert done.returncode == 2 and len(errors) == 1 and expected in errors[0], done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "run").exists()
    assert seconds < 10  # no framework is started to find these (it takes 5-20 s)
    if "jax" in args[0]:
        assert 'pip install -U jax (CPU), "jax[cuda13]" (NVIDIA GPU)' in errors[0]


def test_the_help_examples_are_valid_configs_and_imagenet_names_its_accelerator():
    """Each example of `--help` (as printed, its continuation lines joined) is a
    config the app accepts; the ImageNet one asks for an accelerator (the default is
    the CPU, where ResNet-50's 90 epochs would take months)."""
    import shlex

    from flags import FLAGS, config_from_flags, define_flags

    done = run_cli("--help")
    assert done.returncode == 0, done.stderr[-2000:]
    section = done.stdout.split("\nexamples:\n")[1].split("\n\n")[0]
    examples = [shlex.split(line) for line in section.replace("\\\n", " ").splitlines()]
    assert len(examples) == 3 and all(e[:2] == ["python", "app/main.py"] for e in examples)
    define_flags()
    configs = []
    for argv in examples:
        FLAGS.unparse_flags()
        argv = [a.replace("configs/", os.path.join(ROOT, "configs") + "/") for a in argv]
        FLAGS(["main", *argv[2:], "--logdir=/tmp/unused"])
        try:
            configs.append(config_from_flags(FLAGS))
        finally:
            FLAGS.unparse_flags()
    imagenet = configs[2]
    assert imagenet.dataset == "imagenet2012" and imagenet.accelerator == "gpu"
