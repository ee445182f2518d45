"""Shared test support: the scripted OpenAI-compatible stub and factories. Only tests and
bench/ import from here."""
