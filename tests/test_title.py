"""The world's title as a reader sees it."""

from showcase.run.title import world_title


def test_title_text_with_entities_and_whitespace():
    html = b"<!doctype html><html><head><title>\n  Voxel &amp; Co:\t&eacute;t&#233; &lt;3 </title></head></html>"
    assert world_title(html) == "Voxel & Co: été <3"


def test_first_h1_when_the_title_is_missing_or_empty():
    assert world_title(b"<title>  </title><body><h1 class=big>My <b>Block</b> World</h1><h1>Second</h1>") == "My Block World"
    assert world_title("<body><H1>Upper case tags</H1></body>") == "Upper case tags"


def test_script_inside_h1_is_not_text():
    assert world_title(b"<h1>Isle<script>var x = '<b>';</script> of Cubes</h1>") == "Isle of Cubes"


def test_no_title_at_all():
    assert world_title(b"<html><body><p>just a canvas</p><canvas></canvas></body></html>") is None
    assert world_title(b"") is None


def test_bad_bytes_and_unclosed_title():
    assert world_title(b"<title>Caf\xe9 \xff world") == "Caf\ufffd \ufffd world"


def test_a_title_inside_a_script_string_is_not_the_title():
    html = b"<script>document.title = '<title>fake</title>';</script><h1>Real</h1>"
    assert world_title(html) == "Real"
