"""A font that draws Chinese in matplotlib figures, and a check that no glyph is missing.

The font comes from PyPI with the other requirements: `pylopdf-fonts-zh-cn` ships
Noto Sans SC (SIL Open Font License), Simplified Chinese plus Latin, and the
SentencePiece marker "▁". It is registered with matplotlib's `font_manager` at
plot time; `KERAS_TRANSFORMER_FONT=/path/to/font.otf` picks another file.
Texts use the family list `[that font, "DejaVu Sans"]`, so a character the first
lacks falls back to matplotlib's own font.

Matplotlib reports a character no font of the list has with a warning such as
"Glyph 26426 (\\N{CJK UNIFIED IDEOGRAPH-673A}) missing from font(s) DejaVu Sans.",
and draws an empty box; `draw_checked` and `save_checked` collect those warnings.
"""

import contextlib
import functools
import logging
import os
import warnings

FONT_ENV = "KERAS_TRANSFORMER_FONT"
FALLBACK_FAMILY = "DejaVu Sans"
_MISSING_MARKERS = ("missing from font", "missing from current font", "does not have a glyph")


def cjk_font_path():
    """The font file for Chinese text: $KERAS_TRANSFORMER_FONT, else Noto Sans SC from PyPI.

    Raises:
        FileNotFoundError: when neither is available, saying how to install one.
    """
    path = os.environ.get(FONT_ENV)
    if path:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{FONT_ENV}={path} is not a font file.")
        return path
    try:
        import pylopdf_fonts_zh_cn
    except ImportError:
        raise FileNotFoundError(
            "No font for Chinese text: `pip install pylopdf-fonts-zh-cn` (pinned in "
            f"requirements.txt), or set {FONT_ENV} to a .ttf/.otf file with CJK glyphs."
        ) from None
    return str(pylopdf_fonts_zh_cn.sans_path())


@functools.cache
def register_font(path):
    """Adds a font file to matplotlib's font manager; returns its family name."""
    from matplotlib import font_manager

    font_manager.fontManager.addfont(path)
    return font_manager.FontProperties(fname=path).get_name()


def cjk_font_family():
    """The font family list for figure texts: the CJK font first, then the fallback."""
    return [register_font(cjk_font_path()), FALLBACK_FAMILY]


def is_missing_glyph_message(message):
    return any(marker in message for marker in _MISSING_MARKERS)


class _Collect(logging.Handler):
    def __init__(self, messages):
        super().__init__(logging.DEBUG)
        self.messages = messages

    def emit(self, record):
        message = record.getMessage()
        if is_missing_glyph_message(message):
            self.messages.append(message)


@contextlib.contextmanager
def missing_glyphs():
    """Collects matplotlib's missing-glyph warnings and log records raised inside.

    Yields:
        The list the messages are appended to.

    Example:
        >>> with missing_glyphs() as missing:  # doctest: +SKIP
        ...     figure.canvas.draw()
        >>> assert not missing
    """
    messages = []
    handler = _Collect(messages)
    logger = logging.getLogger("matplotlib")
    logger.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield messages
        for warning in caught:
            text = str(warning.message)
            if is_missing_glyph_message(text):
                messages.append(text)
            else:  # not ours to swallow
                warnings.warn_explicit(
                    warning.message, warning.category, warning.filename, warning.lineno
                )
    finally:
        logger.removeHandler(handler)


def _canvas(figure):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not isinstance(figure.canvas, FigureCanvasAgg):
        FigureCanvasAgg(figure)
    return figure.canvas


def draw_checked(figure):
    """Renders `figure` with Agg; returns the missing-glyph messages (empty: all drawn)."""
    with missing_glyphs() as missing:
        _canvas(figure).draw()
    return missing


def save_checked(figure, path, **kwargs):
    """Saves `figure` (format from the file name); returns the missing-glyph messages."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    with missing_glyphs() as missing:
        _canvas(figure).print_figure(path, **kwargs)
    return missing
