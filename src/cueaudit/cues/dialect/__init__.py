"""Dialect cue (AAVE): pluggable SAE→AAVE translators, a translation cache and an audit."""
