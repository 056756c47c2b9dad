"""Guided decoding (§11.4.4): grammars that are compiled in the background and constrain sampling."""

from minivllm.structured_output.choice import ChoiceGrammar, GrammarCompiler

__all__ = ["ChoiceGrammar", "GrammarCompiler"]
