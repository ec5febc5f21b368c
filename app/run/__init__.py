"""A run's bookkeeping: the context, run folder, ledger, resume and summary."""
