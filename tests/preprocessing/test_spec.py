"""preprocessing/spec.py: the batch's shares, computed and checked in one place."""

import pytest

from preprocessing.spec import BatchError, BatchShape, InputSpec


def test_the_global_batch_is_divided_once_into_processes_and_replicas():
    shape = BatchShape(512, num_processes=2, devices_per_process=4)
    assert (shape.num_replicas, shape.per_process, shape.per_replica) == (8, 256, 64)
    assert shape.per_process * shape.num_processes == shape.global_size
    assert shape.per_replica * shape.num_replicas == shape.global_size
    assert [BatchShape(9, num_processes=3).largest_shard(n) for n in (0, 9, 10)] == [0, 3, 4]


@pytest.mark.parametrize("global_size, processes, devices", [(63, 1, 2), (64, 3, 1), (96, 2, 5)])
def test_a_batch_the_replicas_cannot_share_is_one_line(global_size, processes, devices):
    with pytest.raises(BatchError) as raised:
        BatchShape(global_size, processes, devices)
    message = str(raised.value)
    replicas = processes * devices
    assert "\n" not in message
    assert f"--global_batch_size={global_size} is not divisible by the {replicas} replicas" in message
    assert f"use a multiple of {replicas}" in message


@pytest.mark.parametrize("bad", [0, -4, 2.0, True, None])
def test_only_positive_integers_make_a_batch(bad):
    with pytest.raises(BatchError):
        BatchShape(bad)
    with pytest.raises(BatchError):
        BatchShape(64, devices_per_process=bad)


def test_the_input_spec_reads_its_batch_sizes_from_the_shape():
    spec = InputSpec(data_dir="", image_size=8, batch=BatchShape(48, num_processes=3),
                     process_index=2)
    assert (spec.batch_size, spec.num_processes) == (16, 3)
    assert InputSpec(data_dir="", image_size=8).num_processes == 1  # no batch: checks only
