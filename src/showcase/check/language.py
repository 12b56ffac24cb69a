"""Is the visible text English? Judged from the text a person sees (showcase.check.visible_text),
never from pixels (fonts may be missing).

Two rules: letters outside the Latin script (a Chinese or Russian page) are counted directly; a
Latin-script text is identified by py3langid (langid.py's naive Bayes model over byte n-grams,
about a hundred languages, 4.5 MB installed, offline, a few milliseconds a text). Until 3.0 a count of function words decided, and a 9-word Portuguese
HUD line ("... arraste para orbitar · scroll zoom") read as English: on a line that short the
few function words are outweighed by the HUD's loanwords (scroll, zoom, drag).
"""

import re
import threading
import unicodedata

from py3langid.langid import MODEL_FILE, LanguageIdentifier

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
MAX_CHARS = 20_000  # the text judged is cut here: enough for any HUD, bounded for a page that floods its DOM

_identifier: LanguageIdentifier | None = None
_lock = threading.Lock()


def identifier() -> LanguageIdentifier:
    """The model, loaded once per process (about 0.8 s: the check warms it while the browser starts).

    Probabilities are normalized (py3langid scales the scores by the text's length before the
    softmax, so a ratio of two languages' probabilities means the same on a short line and a page)."""
    global _identifier
    with _lock:
        if _identifier is None:
            _identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        return _identifier


def _is_latin(ch: str) -> bool:
    return ch.isascii() or "LATIN" in unicodedata.name(ch, "")


def judge_english(text: str, max_foreign_letter_share: float, min_words: int, min_odds: float) -> tuple[bool, dict]:
    """(is English or empty, figures).

    Not English when more than max_foreign_letter_share of the letters are not Latin, or, given at
    least min_words words, when some other language is at least min_odds times as likely as English."""
    text = text[:MAX_CHARS]
    letters = [c for c in text if c.isalpha()]
    foreign = sum(1 for c in letters if not _is_latin(c))
    share = foreign / len(letters) if letters else 0.0
    words = _WORD.findall(text)
    figures: dict = {
        "letters": len(letters),
        "foreign_letter_share": round(share, 4),
        "words": len(words),
        "language": None,
    }
    if not letters:
        return True, figures
    if share > max_foreign_letter_share:
        return False, figures
    if len(words) < min_words:
        figures["language"] = f"not judged (fewer than {min_words} words)"
        return True, figures
    ranked = identifier().rank(text)
    english = next((p for lang, p in ranked if lang == "en"), 0.0)
    other, other_p = next((lang, p) for lang, p in ranked if lang != "en")
    odds = other_p / english if english > 0 else float("inf")
    figures.update(language=ranked[0][0], english_probability=round(english, 4), likeliest_other=other,
                   other_probability=round(other_p, 4), other_to_english=round(min(odds, 1e6), 2))
    return odds < min_odds, figures
