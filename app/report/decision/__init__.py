"""The decision `app/report.py RUNS --target=T` makes: which machine and pricing option
reach a target top-1 for the fewest dollars, and which the soonest, from probes and runs.

- predict.py: the arithmetic: each machine's hours and dollars to the target, term by term;
- inputs.py: what the decision reads from run folders, checked as untrusted;
- basis.py: what a prediction rests on: epochs to the target, epoch overhead, start-up;
- predicted.py: machines never probed, their rate predicted by the device model;
- why.py: the term of the winner's hours (or dollars) that decides;
- page.py: the decision written out: its lines, its table, decision.md, .json, .png;
- device_model.py: the step on a device never measured, predicted from one run's work by
  kind;
- device_rates.py: the rates table (device_rates.csv) the device model reads, each row
  citing its result JSON.
"""
