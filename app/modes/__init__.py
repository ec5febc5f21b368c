"""The app's modes, peers of one engine: train, sweep, the effort ladder, the input
benchmark and the probe; the sweep and the ladder are campaigns of measured points
(points.py runs them, bench.py measures each, point_folders.py names it)."""
