"""Loaders of the real name sources (Rosenman, Tzioumis, Elder & Hayes, SSA) and the
derivation of race × gender name lists from them (paper §3.2, Appendix A.1)."""
