"""Reading a profiler trace: where a traced training step's time went, and why.

- xprof.py: the profiler's own converters (xprof, as TensorBoard's Profile tab runs them):
  a trace session's events and its HLO modules' text;
- kinds.py: which kind of work each op is (convolutions, matrix products, attention,
  normalization, ...), from its HLO opcode, library call or Keras layer;
- hlo_text.py: an HLO module's text, HloProto text or XLA's dump format, read into one;
- hlo_cost.py: what each HLO instruction costs, its FLOPs and the bytes it moves, by
  XLA's rules for a dot and a convolution (contractions.py) and for the GPU's library
  calls that do their work (library_calls.py: cuDNN, cuBLAS);
- breakdown.py: the traced steps split by kind of work, each kind's achieved rate,
  and the line that says so;
- bandwidth.py: each accelerator's memory bandwidth, what a kind bound by memory is
  measured against;
- timed.py: the breakdown set against the timed steps' time: idle that is real;
- difference.py: two runs' breakdowns side by side: which kind of work made one slower.

The Profiler callback (callbacks/profiler.py) writes the trace and calls the breakdown;
the summary, the report and the benchmarks read what it found. Nothing here imports a
framework at module level (xprof is imported where it is called).
"""
