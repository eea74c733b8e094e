"""A reader for gcfg ("git-config style") INI text, as OCCM's cloud.conf uses.

It only tokenises: it yields one :class:`Statement` per section header and per
variable, in file order, and leaves typing (strings, booleans, lists) to the
caller's schema. Syntax errors raise :class:`GcfgSyntaxError`; gcfg treats them
as fatal, unlike unknown names, which are the schema's business.

Rules kept from gcfg:

* names start with a letter and hold letters, digits and ``-``; they are
  compared case-insensitively (the caller lower-cases them);
* ``[section]`` or ``[section "subsection"]``; subsection names are
  case-sensitive and may not be empty;
* ``name = value``; a bare ``name`` (no ``=``) is a *blank* value, distinct
  from ``name =`` (the empty string);
* ``;`` and ``#`` start a comment outside double quotes;
* values lose unquoted leading/trailing whitespace; double quotes may wrap
  any part of a value and are removed; escapes ``\\\\ \\" \\n \\t``; a ``\\``
  at the end of a line continues the value on the next line (outside quotes);
* a leading UTF-8 BOM is skipped; NUL is illegal.

Deliberate leniency: ``_`` is accepted inside names and reads as ``-``, so
``auth_url`` and ``auth-url`` are the same key (gcfg rejects ``_``, so no
file that OCCM accepts reads differently here).
"""

from __future__ import annotations

from dataclasses import dataclass

_ESCAPES = {"\\": "\\", '"': '"', "n": "\n", "t": "\t"}
_BLANKS = " \t\r"


class GcfgSyntaxError(ValueError):
    """The text is not valid gcfg; ``line`` is 1-based."""

    def __init__(self, source: str, line: int, message: str) -> None:
        super().__init__(f"{source}:{line}: {message}")
        self.source = source
        self.line = line
        self.message = message


@dataclass(frozen=True)
class Statement:
    """A section header (``name is None``) or one variable occurrence.

    ``value is None`` means a blank variable (``name`` with no ``=``).
    ``section`` and ``name`` are lower-cased, with ``_`` read as ``-``.
    """

    section: str
    subsection: str | None
    name: str | None
    value: str | None
    line: int


def normalise_name(name: str) -> str:
    """Fold a section or variable name the way gcfg matches it to a field."""
    return name.lower().replace("_", "-")


def _is_name_start(ch: str) -> bool:
    if not ch:
        return False
    return ("a" <= ch <= "z") or ("A" <= ch <= "Z") or (ord(ch) >= 0x80 and ch.isalpha())


def _is_name_char(ch: str) -> bool:
    if not ch:
        return False
    return (
        _is_name_start(ch)
        or "0" <= ch <= "9"
        or (ord(ch) >= 0x80 and ch.isdigit())
        or ch in "-_"
    )


class _Scanner:
    """Character cursor over the whole text; tracks the line for errors."""

    def __init__(self, text: str, source: str) -> None:
        self.text = text
        self.source = source
        self.pos = 0
        self.line = 1

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def advance(self) -> str:
        ch = self.peek()
        self.pos += 1
        if ch == "\n":
            self.line += 1
        return ch

    def error(self, message: str) -> GcfgSyntaxError:
        return GcfgSyntaxError(self.source, self.line, message)

    def skip_blanks(self) -> None:
        while self.peek() and self.peek() in _BLANKS:
            self.advance()

    def at_line_end(self) -> bool:
        """True at end of line, end of text or a comment (consumed to EOL)."""
        ch = self.peek()
        if ch in (";", "#"):
            while self.peek() not in ("", "\n"):
                self.advance()
            return True
        return ch in ("", "\n")

    def finish_line(self) -> None:
        self.skip_blanks()
        if not self.at_line_end():
            raise self.error("expected EOL, EOF, or comment")
        if self.peek() == "\n":
            self.advance()

    def name(self, what: str) -> str:
        if not _is_name_start(self.peek()):
            raise self.error(f"expected {what}")
        start = self.pos
        while self.peek() and _is_name_char(self.peek()):
            self.advance()
        return self.text[start : self.pos]

    def escape(self) -> str:
        ch = self.advance()
        if ch not in _ESCAPES:
            raise self.error("unknown escape sequence")
        return _ESCAPES[ch]

    def quoted(self) -> str:
        """A subsection name: ``"..."`` on one line, with escapes."""
        self.advance()  # opening quote
        out: list[str] = []
        while True:
            ch = self.advance()
            if ch in ("", "\n"):
                raise self.error("string not terminated")
            if ch == '"':
                return "".join(out)
            out.append(self.escape() if ch == "\\" else ch)

    def value(self) -> str:
        """A value after ``=``: to end of line or comment, quotes removed."""
        self.skip_blanks()
        out: list[str] = []
        keep = 0  # length of ``out`` up to the last char that is not trailing blank
        in_quote = False
        while True:
            ch = self.peek()
            if not in_quote and ch in ("", "\n", ";", "#"):
                break
            if ch == "":
                raise self.error("string not terminated")
            self.advance()
            if ch == '"':
                in_quote = not in_quote
                keep = len(out)
            elif ch == "\\":
                if not in_quote and self.peek() in ("\n", "\r"):
                    if self.peek() == "\r":
                        self.advance()
                    if self.advance() != "\n":
                        raise self.error("unquoted '\\' must be followed by new line")
                    continue  # line continuation: the newline is dropped
                out.append(self.escape())
                keep = len(out)
            elif in_quote and ch == "\n":
                raise self.error("string not terminated")
            elif ch == "\r":
                continue  # CRs are stripped, as gcfg does for CRLF files
            else:
                out.append(ch)
                if in_quote or ch not in _BLANKS:
                    keep = len(out)
        return "".join(out[:keep])


def parse(text: str, source: str = "<config>") -> list[Statement]:
    """Tokenise gcfg ``text`` into statements; raise on any syntax error."""
    if "\x00" in text:
        raise GcfgSyntaxError(source, text[: text.index("\x00")].count("\n") + 1, "illegal character NUL")
    if text.startswith("\ufeff"):
        text = text[1:]
    scan = _Scanner(text, source)
    out: list[Statement] = []
    section: str | None = None
    subsection: str | None = None
    while True:
        scan.skip_blanks()
        if scan.at_line_end():
            if scan.advance() == "":
                return out
            continue
        line = scan.line
        if scan.peek() == "[":
            section, subsection = _section_header(scan)
            out.append(Statement(section, subsection, None, None, line))
            continue
        if section is None:
            raise scan.error("expected section header")
        if not _is_name_start(scan.peek()):
            raise scan.error("expected section header or variable declaration")
        name = normalise_name(scan.name("variable name"))
        scan.skip_blanks()
        value: str | None = None
        if not scan.at_line_end():
            if scan.advance() != "=":
                raise scan.error("expected '='")
            value = scan.value()
        scan.finish_line()
        out.append(Statement(section, subsection, name, value, line))


def _section_header(scan: _Scanner) -> tuple[str, str | None]:
    scan.advance()  # "["
    scan.skip_blanks()
    section = normalise_name(scan.name("section name"))
    scan.skip_blanks()
    subsection: str | None = None
    if scan.peek() == '"':
        subsection = scan.quoted()
        if subsection == "":
            raise scan.error("empty subsection name")
        scan.skip_blanks()
    if scan.peek() != "]":
        raise scan.error("expected right bracket")
    scan.advance()
    scan.finish_line()
    return section, subsection


def quote(value: str) -> str:
    """Render ``value`` so that :func:`parse` reads it back unchanged."""
    body = "".join("\\" + {"\n": "n", "\t": "t"}.get(c, c) if c in '\\"\n\t' else c for c in value)
    return f'"{body}"'


_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


def parse_bool(value: str | None) -> bool:
    """gcfg booleans; ``None`` is a bare key, which means true."""
    if value is None or value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ValueError(f"failed to parse {value!r} as bool")
