"""Kafka's `sasl.jaas.config` values: `<LoginModule> <flag> (<name>=<value>)*;`, read as Kafka's
JaasConfig reads them (java.io.StreamTokenizer with // and /* */ comments, '-', '_' and '$' as word
characters, quoted strings with Java escapes, unquoted numbers refused as values) and checked as
JaasContext checks the property (exactly one login module, JndiLoginModule disallowed); the login
module each mechanism needs; the inverse, for the client configs we generate; and PLAIN's
`user_<name>` options.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "CONTROL_FLAGS",
    "DISALLOWED_LOGIN_MODULES",
    "LOGIN_MODULES",
    "JaasEntry",
    "format_jaas",
    "parse_jaas_config",
    "parse_jaas_entries",
    "plain_users",
]

LOGIN_MODULES: dict[str, str] = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}
CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
# JaasUtils.DISALLOWED_LOGIN_MODULES_DEFAULT (the system property that changes it is not modelled)
DISALLOWED_LOGIN_MODULES = frozenset({"com.sun.security.auth.module.JndiLoginModule"})
_DISALLOWED_PROPERTY = "org.apache.kafka.disallowed.login.modules"
_PLAIN_USER_PREFIX = "user_"


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    control_flag: str  # one of CONTROL_FLAGS
    options: dict[str, str] = field(default_factory=dict)


# --- java.io.StreamTokenizer, configured as JaasConfig configures it --------------------------

_TT_EOF, _TT_NUMBER, _TT_WORD = -1, -2, -3
_CT_WHITESPACE, _CT_DIGIT, _CT_ALPHA, _CT_QUOTE, _CT_COMMENT = 1, 2, 4, 8, 16


def _ctype_table() -> list[int]:
    ct = [0] * 256
    for lo, hi in ((ord("a"), ord("z")), (ord("A"), ord("Z")), (160, 255)):
        for c in range(lo, hi + 1):
            ct[c] |= _CT_ALPHA
    for c in range(ord(" ") + 1):
        ct[c] = _CT_WHITESPACE
    ct[ord("/")] = _CT_COMMENT
    ct[ord('"')] = _CT_QUOTE
    ct[ord("'")] = _CT_QUOTE
    for c in "0123456789.-":
        ct[ord(c)] |= _CT_DIGIT
    for c in "-_$":  # JaasConfig's wordChars
        ct[ord(c)] |= _CT_ALPHA
    return ct


_CT = _ctype_table()
_NEED_CHAR = 0x7FFFFFFF


def _ctype(c: int) -> int:
    return _CT[c] if c < 256 else _CT_ALPHA


class _Tokenizer:
    """StreamTokenizer.nextToken over a string, for the settings JaasConfig uses (slash-slash and
    slash-star comments on, end of line not significant, no lower-casing)."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._pos = 0
        self._peekc = _NEED_CHAR
        self.ttype = -4  # TT_NOTHING
        self.sval: str | None = None

    def _read(self) -> int:
        if self._pos >= len(self._text):
            return -1
        c = ord(self._text[self._pos])
        self._pos += 1
        return c

    def next_token(self) -> int:
        while True:
            self.sval = None
            c = self._peekc
            if c < 0:
                c = _NEED_CHAR
            if c == _NEED_CHAR:
                c = self._read()
                if c < 0:
                    self.ttype = _TT_EOF
                    return self.ttype
            self.ttype = c
            self._peekc = _NEED_CHAR
            ct = _ctype(c)
            while ct & _CT_WHITESPACE:
                if c == ord("\r"):
                    c = self._read()
                    if c == ord("\n"):
                        c = self._read()
                else:
                    c = self._read()
                if c < 0:
                    self.ttype = _TT_EOF
                    return self.ttype
                ct = _ctype(c)
            if ct & _CT_DIGIT:
                if c == ord("-"):
                    c = self._read()
                    if c != ord(".") and not ord("0") <= c <= ord("9"):
                        self._peekc = c
                        self.ttype = ord("-")
                        return self.ttype
                seen_dot = False
                while True:
                    if c == ord(".") and not seen_dot:
                        seen_dot = True
                    elif not ord("0") <= c <= ord("9"):
                        break
                    c = self._read()
                self._peekc = c
                self.ttype = _TT_NUMBER
                return self.ttype
            if ct & _CT_ALPHA:
                buf = []
                while True:
                    buf.append(chr(c))
                    c = self._read()
                    ct = _CT_WHITESPACE if c < 0 else _ctype(c)
                    if not ct & (_CT_ALPHA | _CT_DIGIT):
                        break
                self._peekc = c
                self.sval = "".join(buf)
                self.ttype = _TT_WORD
                return self.ttype
            if ct & _CT_QUOTE:
                self.ttype = c
                buf = []
                d = self._read()
                while d >= 0 and d != self.ttype and d != ord("\n") and d != ord("\r"):
                    if d == ord("\\"):
                        c = self._read()
                        first = c
                        if ord("0") <= c <= ord("7"):
                            c = c - ord("0")
                            c2 = self._read()
                            if ord("0") <= c2 <= ord("7"):
                                c = (c << 3) + (c2 - ord("0"))
                                c2 = self._read()
                                if ord("0") <= c2 <= ord("7") and first <= ord("3"):
                                    c = (c << 3) + (c2 - ord("0"))
                                    d = self._read()
                                else:
                                    d = c2
                            else:
                                d = c2
                        else:
                            c = {ord("a"): 0x7, ord("b"): 0x8, ord("f"): 0xC, ord("n"): 0xA, ord("r"): 0xD,
                                 ord("t"): 0x9, ord("v"): 0xB}.get(c, c)
                            d = self._read()
                    else:
                        c = d
                        d = self._read()
                    buf.append(chr(c) if c >= 0 else "\uffff")  # a trailing backslash reads EOF: (char) -1
                self._peekc = _NEED_CHAR if d == self.ttype else d
                self.sval = "".join(buf)
                return self.ttype
            if c == ord("/"):
                c = self._read()
                if c == ord("*"):
                    prevc = 0
                    while True:
                        c = self._read()
                        if c == ord("/") and prevc == ord("*"):
                            break
                        if c == ord("\r"):
                            c = self._read()
                            if c == ord("\n"):
                                c = self._read()
                        elif c == ord("\n"):
                            c = self._read()
                        if c < 0:
                            self.ttype = _TT_EOF
                            return self.ttype
                        prevc = c
                    continue  # return nextToken()
                # '//', or (since '/' is also the comment character) '/' and any character: a comment to
                # the end of the line; the character after the '/' is never looked at, even a newline
                while True:
                    c = self._read()
                    if c in (ord("\n"), ord("\r")) or c < 0:
                        break
                self._peekc = c
                continue
            if ct & _CT_COMMENT:  # pragma: no cover - '/' is the only comment character, handled above
                continue
            self.ttype = c
            return self.ttype


def _control_flag(flag: str | None) -> str:
    if flag is None:
        raise ValueError("Login module control flag is not available in the JAAS config")
    upper = flag.upper()
    if upper not in ("REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL"):
        raise ValueError(f"Invalid login module control flag '{flag}' in JAAS config")
    return upper.lower()


def _parse_entry(tok: _Tokenizer) -> JaasEntry:
    login_module = tok.sval
    if tok.next_token() == _TT_EOF:
        raise ValueError("Login module control flag not specified in JAAS config")
    flag = _control_flag(tok.sval)
    options: dict[str, str] = {}
    while tok.next_token() != _TT_EOF and tok.ttype != ord(";"):
        key = tok.sval
        if tok.next_token() != ord("=") or tok.next_token() == _TT_EOF or tok.sval is None:
            raise ValueError(f"Value not specified for key '{'null' if key is None else key}' in JAAS config")
        if key is None:
            # Java puts it under a null key; a name-less option is no use to anyone
            raise ValueError("Option name not specified in JAAS config")
        options[key] = tok.sval
    if tok.ttype != ord(";"):
        raise ValueError("JAAS config entry not terminated by semi-colon")
    if not login_module:
        # AppConfigurationEntry's own IllegalArgumentException (it has no message)
        raise ValueError("Login module not specified in JAAS config")
    return JaasEntry(login_module, flag, options)


def parse_jaas_entries(text: str) -> list[JaasEntry]:
    """Every entry of a JAAS property value, as Kafka's JaasConfig parses it; ValueError with
    Kafka's words."""
    tok = _Tokenizer(text)
    entries = []
    while tok.next_token() != _TT_EOF:
        entries.append(_parse_entry(tok))
    if not entries:
        raise ValueError("Login module not specified in JAAS config")
    return entries


def parse_jaas_config(text: str) -> JaasEntry:
    """A `sasl.jaas.config` value: exactly one allowed login module (JaasContext's rules)."""
    entries = parse_jaas_entries(text)
    if len(entries) != 1:
        raise ValueError(f"JAAS config property contains {len(entries)} login modules, should be 1 module")
    module = entries[0].login_module.strip()
    if module in DISALLOWED_LOGIN_MODULES:
        raise ValueError(f"{module} is not allowed. Update System property '{_DISALLOWED_PROPERTY}' to allow {module}")
    return entries[0]


def _is_word(text: str) -> bool:
    """Whether the tokenizer reads `text` back as one word (else it must be quoted)."""
    if not text:
        return False
    first = _ctype(ord(text[0]))
    if not first & _CT_ALPHA or first & _CT_DIGIT:
        return False
    return all(_ctype(ord(ch)) & (_CT_ALPHA | _CT_DIGIT) for ch in text[1:])


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def format_jaas(module: str, options: Mapping[str, str], control_flag: str = "required") -> str:
    """The `sasl.jaas.config` value for one login module, every value quoted (names too, when they
    are not plain words), so that parse_jaas_config reads back exactly `options`."""
    flag = _control_flag(control_flag)
    parts = [module if _is_word(module) else _quote(module), flag]
    parts += [f"{k if _is_word(k) else _quote(k)}={_quote(v)}" for k, v in options.items()]
    return " ".join(parts) + ";"


def plain_users(entry: JaasEntry) -> dict[str, str]:
    """PLAIN's users (user_<name>="<password>"), read only from PlainLoginModule's entry as Kafka's
    PlainServerCallbackHandler reads them."""
    if entry.login_module != LOGIN_MODULES["PLAIN"]:
        return {}
    return {k[len(_PLAIN_USER_PREFIX):]: v for k, v in entry.options.items() if k.startswith(_PLAIN_USER_PREFIX)}
