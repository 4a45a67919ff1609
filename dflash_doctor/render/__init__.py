"""Renderers turn a finished Report into text; they decide nothing."""
