"""Typed facts about a host and the parsers that produce them from raw bytes."""
