"""The scheduling framework: configuration, profiles and the runtime that runs plugins."""
