"""The app's modes, peers of one engine: train, sweep, the effort ladder, the input
benchmark and the probe; the sweep and the ladder are campaigns of measured points.

- train.py: training, top to bottom (`run(context) -> summary dict`);
- train_callbacks.py: a training run's callbacks, in the order their figures flow;
- sweep.py: images/sec at each point of a grid of settings (--sweep, --sweep_batch_sizes);
- ladder.py: the effort ladder (--benchmark=ladder): what each of the app's settings buys;
- points.py: the campaign the sweep and the ladder share, each point kept as it finishes;
- bench.py: one measured point, a sweep's or a ladder rung's;
- point_folders.py: a point's names and its folder, <logdir>/points/<name>;
- input_benchmark.py: --benchmark=input: is the input pipeline or the accelerator the
  bottleneck?
- probe.py: --benchmark=probe: how fast this machine trains the user's model, in about a
  minute.
"""
