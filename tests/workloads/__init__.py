"""Workloads written as another author would: trainers the service was not written for."""
