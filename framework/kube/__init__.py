"""Outrigger on a live Kubernetes cluster: the API server as the cluster's source of truth."""
