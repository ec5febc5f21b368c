"""Input pipelines: from a `--dataset` to the batches `fit` reads.

The contract (a few files at this level):
- `spec.py`: what a builder is given (`InputSpec`) and returns (`Datasets`), and
  `DataError`, every data mistake in one line;
- `augment.py`: what each augmentation preset means (framework-free), the one
  definition every pipeline implements;
- `streams.py`: from a dataset's records to one of the pipelines (`auto`'s rule);
- `feed.py`: hands a Python iterable of batches to Keras `fit`;
- `files.py`: small filesystem facts shared by the data builders, the decoders and the
  run folder.

The wings, one folder each:
- `datasets/`: where images come from, one module per `--dataset` kind, and the
  registry (`make_datasets`, `check_dataset`);
- `tfdata/`: the tf.data pipeline and its TensorFlow image ops (TensorFlow backend);
- `host/`: the TensorFlow-free pipeline on the CPU: grain's worker processes and the
  numpy image ops (bit-for-bit the tf.data ones); `host/native/` asks Linux's prctl
  that the workers die with the run;
- `device/`: a dataset decoded once and held in accelerator memory (JAX; on TensorFlow
  the same is tf.data with the decoded images cached);
- `gpu/`: JPEGs decoded by the GPU's JPEG engines and augmented there (JAX);
  `gpu/native/` calls its C libraries, and `gpu/README.md` says what bites there.
  The two native/ floors are the only places that call C (ctypes).

Imports point from datasets/ to streams.py to the pipeline wings to the contract,
never back (tests/test_layout.py). This module imports nothing.
"""
