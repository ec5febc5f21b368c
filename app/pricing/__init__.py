"""Prices: what a run is billed at, from a catalog kept as data.

- catalog.py: the price catalog (prices.csv, or --price_catalog): read, checked, listed
  (PRICES.md says where each price comes from and what is empty and why);
- prices.py: the catalog row a run is billed as, and under which option.
"""
