"""Prompts and conversations: how a task becomes what the model sees (``/prompt``, ``/messages``)."""

from envbuilder.prompting._flatten import flatten_messages
from envbuilder.prompting._images import image_blocks, sniff_mime
from envbuilder.prompting._prompter import SAMPLE_ROWS, Prompter

__all__ = ["SAMPLE_ROWS", "Prompter", "flatten_messages", "image_blocks", "sniff_mime"]
