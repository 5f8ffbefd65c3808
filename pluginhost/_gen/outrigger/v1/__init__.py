"""Generated package `outrigger.v1`."""
