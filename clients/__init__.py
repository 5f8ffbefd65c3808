"""Clients of the framework's Scheduler API."""
