"""Text from a page, an agent or an upstream, made fit to show a person: control characters visible.

A terminal acts on the escapes such text may hold (ESC ] 0 ; sets its title, ESC [ 2 J clears the
screen, ESC [ 31 m colours what follows), a carriage return or a backspace overwrite what was
shown, and Unicode's bidirectional controls reorder it. Wherever such text reaches a person (the
CLI's tables and sentences, report.html, run-info's sentences) each of these characters is
written out as an escape a reader sees (`\\x1b`, `\\r`, `\\u202e`). JSON files keep the exact
text: JSON escapes control characters itself.
"""

import re

# C0 controls, DEL, C1 controls; the Arabic letter mark, left-to-right and right-to-left marks,
# bidirectional embeddings, overrides and isolates; the Unicode line and paragraph separators.
_OTHERS = "\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029"
_ANY = re.compile(f"[\x00-\x1f{_OTHERS}]")
_BUT_LINES = re.compile(f"[\x00-\x08\x0b-\x1f{_OTHERS}]")  # \t and \n kept

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _written_out(match: re.Match) -> str:
    char = match.group(0)
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def visible(text: object, keep_lines: bool = False) -> str:
    """`text` with every control character written out as an escape.

    keep_lines: newlines and tabs stay as they are (a block of several lines, a page that lays
    them out itself); otherwise they are written out too, for one line of a table or a sentence.
    """
    text = text if isinstance(text, str) else str(text)
    return (_BUT_LINES if keep_lines else _ANY).sub(_written_out, text)
