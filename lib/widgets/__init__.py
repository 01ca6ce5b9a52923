"""Interactive figures for the book: see :mod:`lib.widgets.core` for how they work.

Chapter-specific visuals live in one module per chapter (``lib.widgets.attention``, ...).
"""
from lib.widgets.core import Choice, Explorer, Slider, Text, Visual, explore, render_png

__all__ = ["Choice", "Explorer", "Slider", "Text", "Visual", "explore", "render_png"]
