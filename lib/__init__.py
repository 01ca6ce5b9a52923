"""The book's code: every formula in the chapters is implemented and tested here."""
from jaxtyping import install_import_hook

from lib.checked import CHECKED_MODULES

# Every call into these modules is checked against its signature (lib/checked.py).
install_import_hook(CHECKED_MODULES, "lib.checked.typechecked")
