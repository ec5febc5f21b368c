"""The plain arithmetic the callbacks, the summary and the report share: the bill
(bill.py: billed seconds, hours and dollars under each pricing option, the one money
format), step numbers, the steady-state window, target top-1s, a figure's spread.
Pure Python, no framework."""
