"""The plain arithmetic the callbacks, the summary and the report share: money, step
numbers, the steady-state window, target top-1s. Pure Python, no framework."""
