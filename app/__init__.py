"""The app: entry point (main.py), backend and distribution (distribute.py), the
model factory (models.py), the recipe (recipe.py), one run (train.py), the
throughput sweep (sweep.py), the report (report.py), and their helpers."""
