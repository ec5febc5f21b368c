"""app/models/memory.py: what a training step keeps (checked against counts by hand),
and what a process may still take under a control group's limit (real files)."""

import keras

from app.models import memory
from app.models import make_model

# ResNet-50 v1.5 at 224 px, the app's build: the output values of each convolution
# (and the logits), an image: the 4x4 space-to-depth stem, then per stage the first
# block (its 1x1 at the input's size, the strided 3x3, the 1x1 out, the projection)
# and the others (1x1, 3x3, 1x1 at the stage's size).
STEM = 112 * 112 * 64


def _stage(side_in, side, width, blocks):
    first = side_in**2 * width + side**2 * width + 2 * side**2 * 4 * width
    return first + (blocks - 1) * side**2 * (width + width + 4 * width)


RESNET50_KEPT = (STEM + _stage(56, 56, 64, 3) + _stage(56, 28, 128, 4) + _stage(28, 14, 256, 6)
                 + _stage(14, 7, 512, 3) + 1000)


def test_a_step_keeps_the_outputs_of_the_layers_with_weights_as_counted_by_hand():
    assert RESNET50_KEPT == 11_114_984
    model = make_model("resnet50", 1000, 224)
    assert memory.kept_bytes_per_image(model, 1) == RESNET50_KEPT
    assert memory.step_bytes(model, 256, 4) == 256 * 4 * RESNET50_KEPT + 3 * 4 * 25_610_152

    inputs = keras.Input((16, 16, 3))
    x = keras.layers.Conv2D(8, 3, padding="same")(inputs)  # 16 x 16 x 8 kept
    x = keras.layers.BatchNormalization()(x)  # normalizations: fused, not counted
    x = keras.layers.ReLU()(keras.layers.GlobalAveragePooling2D()(x))  # no weights
    tiny = keras.Model(inputs, keras.layers.Dense(10)(x))  # 10 kept
    assert memory.kept_bytes_per_image(tiny, 2) == 2 * (16 * 16 * 8 + 10)


def test_the_room_under_a_control_groups_limit_is_the_limit_less_what_the_group_holds(
        tmp_path, monkeypatch):
    (tmp_path / "memory.max").write_text("8589934592\n")  # 8 GiB
    (tmp_path / "memory.current").write_text(f"{5 << 30}\n")
    monkeypatch.setattr(memory, "CGROUP_LIMIT_FILES", (str(tmp_path / "memory.max"),))
    monkeypatch.setattr(memory, "CGROUP_USAGE_FILES", (str(tmp_path / "memory.current"),))
    room, what = memory.headroom()
    assert room == 3 << 30
    assert what == (f"this control group's memory limit ({tmp_path / 'memory.max'}) of 8.00 "
                    "GiB less the 5.00 GiB the group holds already")
    (tmp_path / "memory.max").write_text("max\n")  # no limit: the host's memory
    assert memory.headroom()[1] in ("this host's memory",
                                    "this process's address-space limit (RLIMIT_AS)")
