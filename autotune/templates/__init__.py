"""Operator definitions and schedule templates shipped with tiletune."""
