"""Chapter 05's experiments (being moved here from the chapter and lib)."""
