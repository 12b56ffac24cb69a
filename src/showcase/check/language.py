"""Is the visible text English? Judged from DOM text, never from pixels (fonts may be missing)."""

import re
import unicodedata

# Function words: frequent, short, and nearly disjoint between the languages a page is likely in.
FUNCTION_WORDS = {
    "en": "the and of to in is you that it for with on are this your be as at by from or an can was "
    "press click drag scroll use move zoom view camera world mouse".split(),
    "fr": "le la les et des du un une est dans pour que qui sur avec pas vous nous au aux ce cette sont par".split(),
    "de": "der die das und ist nicht mit ein eine zu den dem von sie auf für sich auch im wir ich".split(),
    "es": "el la los las y de que en un una es por con para del al se su lo como más pero".split(),
    "it": "il lo la gli le e di che un una è per con non del della sono si più questo ma".split(),
    "pt": "o a os as e de que em um uma é para com não do da no na se por mais".split(),
    "nl": "de het een en van is dat op te in niet met voor zijn je ze wat er maar".split(),
}
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


def _is_latin(ch: str) -> bool:
    return ch.isascii() or "LATIN" in unicodedata.name(ch, "")


def judge_english(text: str, max_foreign_letter_share: float, min_words: int) -> tuple[bool, dict]:
    """(is English or empty, figures)."""
    letters = [c for c in text if c.isalpha()]
    foreign = sum(1 for c in letters if not _is_latin(c))
    share = foreign / len(letters) if letters else 0.0
    words = [w.lower() for w in _WORD.findall(text)]
    hits = {lang: sum(1 for w in words if w in set(ws)) for lang, ws in FUNCTION_WORDS.items()}
    figures = {
        "letters": len(letters),
        "foreign_letter_share": round(share, 4),
        "words": len(words),
        "function_word_hits": hits,
    }
    if not letters:
        return True, figures
    if share > max_foreign_letter_share:
        return False, figures
    if len(words) >= min_words:
        best_other = max(v for k, v in hits.items() if k != "en")
        if best_other > hits["en"]:
            return False, figures
    return True, figures
