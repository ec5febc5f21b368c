"""callbacks/records/events.py: TensorBoard event files rewound to a checkpoint."""

from callbacks.records import events


def test_rewind_drops_what_came_after_a_checkpoint(tmp_path):
    writer = events.EventWriter(str(tmp_path))
    for step in range(1, 6):
        writer.scalar("accuracy/epoch_top1", step / 10, step)
        writer.scalar("loss/batch_loss", step / 10, step * 10)
    writer.close()
    duplicate = events.EventWriter(str(tmp_path))
    duplicate.scalar("accuracy/epoch_top1", 0.2, 2)  # a redone epoch
    duplicate.close()
    last = {"accuracy/epoch_top1": 3, "loss/batch_loss": 30}
    assert events.rewind(str(tmp_path), last.get) == 4
    points = [(v.tag, e.step) for path in events.event_files(str(tmp_path))
              for e in events.read_events(path) for v in e.summary.value]
    assert sorted(points) == [("accuracy/epoch_top1", s) for s in (1, 2, 3)] + [
        ("loss/batch_loss", s) for s in (10, 20, 30)]
