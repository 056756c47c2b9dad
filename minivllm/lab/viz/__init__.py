"""Figures and widgets for chapter 11: see figures.py (pure builders) and widgets.py (apps)."""
