"""Inference backends and the shard runner that writes response tables."""
