"""Outrigger plugin SDK and contracts: the types every plugin and the framework share."""
