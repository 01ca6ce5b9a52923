"""Chapter 06's experiments (being moved here from the chapter and lib)."""
