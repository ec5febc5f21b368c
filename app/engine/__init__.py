"""What every mode shares: backend and devices, models, the recipe, prices, measuring."""
