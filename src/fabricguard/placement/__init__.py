"""Placement: Kueue's side of the platform (flavors, topologies, queues, the fabric check) from the profile."""
