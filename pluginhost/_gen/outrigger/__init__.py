"""Generated package `outrigger`."""
