"""The app's modes, peers of one engine: train, sweep, input benchmark."""
