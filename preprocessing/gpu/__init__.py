"""JPEGs decoded on the GPU and augmented there (JAX); see README.md beside this file."""
