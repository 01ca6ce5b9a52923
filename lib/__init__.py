"""The book's code: every formula in the chapters is implemented and tested here."""
