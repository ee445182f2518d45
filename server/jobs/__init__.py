"""Durable background jobs: a row per job, a function per kind, workers that resume."""
