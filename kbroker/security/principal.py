"""Who a connection is: `KafkaPrincipal` (User:alice), the ANONYMOUS one, the TLS client
certificate's subject as Java's X500Principal.getName() (RFC 2253) prints it, and
`ssl.principal.mapping.rules` (Kafka's SslPrincipalMapper) turning that name into the principal's.

The rules' patterns are Java regular expressions run by Python's `re` (ASCII classes, as Java's are);
the constructs the two do not share (possessive `*+`, `\\p{..}` classes, `&&` intersections) are not
translated. Replacements follow Java's Matcher.replaceAll ($n, ${name}, backslash escapes), after
Kafka's own escaping of back references to groups the pattern does not have.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cryptography import x509

from kbroker.security import _java

__all__ = [
    "ANONYMOUS",
    "DEFAULT_SSL_PRINCIPAL_MAPPING_RULES",
    "USER_TYPE",
    "KafkaPrincipal",
    "SslPrincipalMapper",
    "distinguished_name",
    "name_der_to_rfc2253",
    "parse_principal",
]

USER_TYPE = "User"
DEFAULT_SSL_PRINCIPAL_MAPPING_RULES = "DEFAULT"


@dataclass(frozen=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


def parse_principal(text: str) -> KafkaPrincipal:
    """SecurityUtils.parseKafkaPrincipal: `type:name`, split at the first ':'."""
    if not text or ":" not in text:
        raise ValueError(f"expected a string in format principalType:principalName but got {text}")
    principal_type, _, name = text.partition(":")
    return KafkaPrincipal(principal_type, name)


# --- ssl.principal.mapping.rules ----------------------------------------------------------------

_RULE_PATTERN = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE_PATTERN)
_BACK_REFERENCE = re.compile(r"\$(\d+)", re.ASCII)
_GROUP_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")


def _compile(pattern: str) -> re.Pattern[str]:
    """A Java pattern for `re`: named groups (?<n>..) become (?P<n>..); ASCII classes as in Java."""
    try:
        return re.compile(re.sub(r"\(\?<([A-Za-z][A-Za-z0-9]*)>", r"(?P<\1>", pattern), re.ASCII)
    except re.error as exc:
        raise ValueError(f"{exc} in pattern {pattern}") from None


def _escape_literal_back_references(replacement: str, groups: int) -> str:
    """Kafka's Rule.escapeLiteralBackReferences (from NiFi): `$n` past the pattern's groups, after
    dropping trailing digits while n >= 10, becomes a literal `\\$n`. Positions found in the original
    string are applied to the string as it is being changed, exactly as Kafka's loop does."""
    if groups == 0:
        return replacement
    value = replacement
    for m in _BACK_REFERENCE.finditer(replacement):
        number = m.group(1)
        if number.startswith("0"):
            continue
        index = _java.parse_int(number)
        while index > groups and index >= 10:
            index //= 10
        if index > groups:
            start = m.start(1)
            value = value[:start - 1] + "\\" + value[start - 1:]
    return value


def _expand(replacement: str, m: re.Match[str]) -> str:
    """Java's Matcher.appendReplacement expansion of `replacement` for the match `m`."""
    groups = m.re.groups
    out = []
    i, n = 0, len(replacement)
    while i < n:
        ch = replacement[i]
        if ch == "\\":
            i += 1
            if i >= n:
                raise ValueError("character to be escaped is missing")
            out.append(replacement[i])
            i += 1
        elif ch == "$":
            i += 1
            if i >= n:
                raise ValueError("Illegal group reference: group index is missing")
            if replacement[i] == "{":
                end = replacement.find("}", i)
                if end == -1:
                    raise ValueError("named capturing group is missing trailing '}'")
                name = replacement[i + 1:end]
                if not _GROUP_NAME.fullmatch(name):
                    raise ValueError("named capturing group has 0 length name" if not name
                                     else f"Illegal character in group name {name}")
                if name not in m.re.groupindex:
                    raise ValueError(f"No group with name {{{name}}}")
                group = m.group(name)
                i = end + 1
            else:
                if not "0" <= replacement[i] <= "9":
                    raise ValueError("Illegal group reference")
                ref = ord(replacement[i]) - ord("0")
                if ref > groups:
                    raise ValueError(f"No group {ref}")
                i += 1
                while i < n and "0" <= replacement[i] <= "9":
                    candidate = ref * 10 + ord(replacement[i]) - ord("0")
                    if candidate > groups:
                        break
                    ref = candidate
                    i += 1
                group = m.group(ref)
            if group is not None:
                out.append(group)
        else:
            out.append(ch)
            i += 1
    return "".join(out)


class _Rule:
    def __init__(self, pattern: str | None = None, replacement: str | None = None,
                 lower: bool = False, upper: bool = False) -> None:
        self.is_default = pattern is None
        self.pattern_text = pattern
        self.pattern = None if pattern is None else _compile(pattern)
        self.replacement = replacement
        self.lower = lower
        self.upper = upper

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        assert self.replacement is not None
        replacement = _escape_literal_back_references(self.replacement, self.pattern.groups)
        result = self.pattern.sub(lambda m: _expand(replacement, m), dn)
        if self.lower:
            return result.lower()
        if self.upper:
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.is_default:
            return "DEFAULT"
        text = "RULE:" + (self.pattern_text or "")
        if self.replacement is not None:
            text += "/" + self.replacement
        if self.lower:
            text += "/L"
        elif self.upper:
            text += "/U"
        return text


class SslPrincipalMapper:
    """Kafka's SslPrincipalMapper: the first rule whose pattern matches the whole DN names the principal."""

    def __init__(self, rules: list[_Rule]) -> None:
        self._rules = rules

    @classmethod
    def from_rules(cls, text: str | None) -> SslPrincipalMapper:
        """Parse `ssl.principal.mapping.rules` (None: the default, DEFAULT); ValueError as Kafka's
        IllegalArgumentException."""
        if text is None:
            text = DEFAULT_SSL_PRINCIPAL_MAPPING_RULES
        rules = []
        for m in _RULE_SPLITTER.finditer(text.strip()):
            rule = m.group(1)
            p = _RULE_PARSER.match(rule)
            if p is None:  # pragma: no cover - the last alternative matches anything
                raise ValueError(f"Invalid rule: {rule}")
            if len(rule) != p.end():
                raise ValueError(f"Invalid rule: `{rule}`, unmatched substring: `{rule[p.end():]}`")
            if p.group(1) is not None:
                rules.append(_Rule())
            elif p.group(2) is not None:
                rules.append(_Rule(p.group(2), p.group(4), p.group(6) == "L", p.group(6) == "U"))
            # an empty rule is ignored
        return cls(rules)

    def name_for(self, distinguished_name: str) -> str:
        """The principal name for a DN; ValueError (Kafka's NoMatchingRule) when no rule applies."""
        for rule in self._rules:
            name = rule.apply(distinguished_name)
            if name is not None:
                return name
        raise ValueError(f"No rules apply to {distinguished_name}, rules {_java.list_str(self._rules)}")

    def __str__(self) -> str:
        return f"SslPrincipalMapper(rules = {_java.list_str(self._rules)})"

    __repr__ = __str__


# --- the certificate's subject, as X500Principal.getName() --------------------------------------

# AVAKeyword's RFC 2253 keywords; any other attribute type is printed as its OID
_RFC2253_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O", "2.5.4.11": "OU",
    "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID",
}
# AVA.isDerString(value, false): PrintableString, T61String, IA5String, GeneralString, BMPString, UTF8String
_DER_STRING_TAGS = frozenset({0x13, 0x14, 0x16, 0x1B, 0x1E, 0x0C})
_ESCAPEES = ',=+<>#;"\\'


def _is_printable_string_char(ch: str) -> bool:
    """DerValue.isPrintableStringChar."""
    return ("a" <= ch <= "z") or ("A" <= ch <= "Z") or ("0" <= ch <= "9") or ch in " '()+,-./:=?"


class _Der:
    """Just enough DER to walk a certificate to its subject."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def tlv(self, pos: int, end: int) -> tuple[int, int, int, int]:
        """(tag, content start, content end, next position) of the element at pos."""
        data = self.data
        if pos + 2 > end:
            raise ValueError("truncated DER")
        tag = data[pos]
        pos += 1
        if tag & 0x1F == 0x1F:
            while True:
                if pos >= end:
                    raise ValueError("truncated DER tag")
                more = data[pos] & 0x80
                pos += 1
                if not more:
                    break
        if pos >= end:
            raise ValueError("truncated DER")
        first = data[pos]
        pos += 1
        if first < 0x80:
            length = first
        elif first == 0x80:
            raise ValueError("indefinite length in DER")
        else:
            count = first & 0x7F
            if pos + count > end:
                raise ValueError("truncated DER length")
            length = int.from_bytes(data[pos:pos + count], "big")
            pos += count
        if pos + length > end:
            raise ValueError("truncated DER content")
        return tag, pos, pos + length, pos + length

    def children(self, start: int, end: int) -> list[tuple[int, int, int, int]]:
        """(tag, element start, content start, content end) of each element in [start, end)."""
        out = []
        pos = start
        while pos < end:
            tag, content, content_end, nxt = self.tlv(pos, end)
            out.append((tag, pos, content, content_end))
            pos = nxt
        return out


def _oid(body: bytes) -> str:
    if not body:
        raise ValueError("empty OID")
    arcs: list[int] = []
    value = 0
    for byte in body:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    if body[-1] & 0x80:
        raise ValueError("truncated OID")
    first = arcs[0]
    head = [0, first] if first < 40 else [1, first - 40] if first < 80 else [2, first - 80]
    return ".".join(str(a) for a in head + arcs[1:])


def _ava_rfc2253(oid: str, tag: int, content: bytes, encoded: bytes) -> str:
    """AVA.toRFC2253String (non-canonical)."""
    keyword = _RFC2253_KEYWORDS.get(oid, oid)
    if keyword[0].isdigit() or tag not in _DER_STRING_TAGS:
        return f"{keyword}=#{encoded.hex()}"
    # new String(value.getDataBytes(), UTF_8), whatever the string type (a BMPString too)
    value = content.decode("utf-8", "replace")
    escaped = []
    for ch in value:
        if ch in _ESCAPEES:
            escaped.append("\\" + ch)
        elif ch == "\0":
            escaped.append("\\00")
        else:
            escaped.append(ch)
    chars = "".join(escaped)
    lead = 0
    while lead < len(chars) and chars[lead] in " \r":
        lead += 1
    trail = len(chars) - 1
    while trail >= 0 and chars[trail] in " \r":
        trail -= 1
    return keyword + "=" + "".join(("\\" + c) if (i < lead or i > trail) else c for i, c in enumerate(chars))


def name_der_to_rfc2253(der: bytes, start: int = 0, end: int | None = None) -> str:
    """X500Name.getRFC2253Name of a DER Name: RDNs last to first, joined by ','; an RDN's values in
    their encoded order, joined by '+'."""
    d = _Der(der)
    end = len(der) if end is None else end
    tag, content, content_end, _ = d.tlv(start, end)
    if tag != 0x30:
        raise ValueError("Name is not a SEQUENCE")
    rdns = []
    for rdn_tag, _, rdn_start, rdn_end in d.children(content, content_end):
        if rdn_tag != 0x31:
            raise ValueError("RDN is not a SET")
        avas = []
        for ava_tag, _, ava_start, ava_end in d.children(rdn_start, rdn_end):
            if ava_tag != 0x30:
                raise ValueError("AVA is not a SEQUENCE")
            parts = d.children(ava_start, ava_end)
            if len(parts) != 2 or parts[0][0] != 0x06:
                raise ValueError("AVA is not an OID and a value")
            (_, _, oid_start, oid_end), (value_tag, value_pos, value_start, value_end) = parts
            avas.append(_ava_rfc2253(_oid(der[oid_start:oid_end]), value_tag, der[value_start:value_end],
                                     der[value_pos:value_end]))
        rdns.append("+".join(avas))
    return ",".join(reversed(rdns))


def distinguished_name(cert_der: bytes) -> str:
    """The certificate subject as Java's X500Principal.getName() prints it (RFC 2253), e.g.
    CN=client,OU=eng,O=acme,C=US; ValueError if cert_der is not a DER certificate."""
    x509.load_der_x509_certificate(cert_der)  # ValueError for anything that is not a certificate
    d = _Der(cert_der)
    _, cert_start, cert_end, _ = d.tlv(0, len(cert_der))
    _, tbs_start, tbs_end, _ = d.tlv(cert_start, cert_end)
    fields = d.children(tbs_start, tbs_end)
    if fields and fields[0][0] == 0xA0:  # [0] EXPLICIT version
        fields = fields[1:]
    # serialNumber, signature, issuer, validity, subject
    if len(fields) < 5:
        raise ValueError("TBSCertificate has no subject")
    _, subject_pos, _, subject_end = fields[4]
    return name_der_to_rfc2253(cert_der, subject_pos, subject_end)
