"""The plain arithmetic the callbacks, the summary and the report share. Pure Python,
no framework.

- bill.py: billed seconds, hours and dollars under each pricing option, the one money
  format;
- steps.py: the run's position (`Position`): how training steps are numbered across
  epochs, fits and attempts, and how many images they are;
- window.py: the steady-state window: which training steps are timed;
- targets.py: when a target top-1 was first reached, from a run's per-epoch history;
- spread.py: repeated measurements of one figure: their median and spread, said one way.
"""
