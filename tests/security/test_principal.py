"""Principals: KafkaPrincipal, Kafka's SslPrincipalMapperTest, and certificate subjects printed as
Java's X500Principal.getName() prints them (the expected strings are OpenJDK 17's output for the
same certificates)."""

import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import NameOID
from hypothesis import given
from hypothesis import strategies as st

from kbroker.security.principal import (
    ANONYMOUS,
    KafkaPrincipal,
    SslPrincipalMapper,
    distinguished_name,
    name_der_to_rfc2253,
    parse_principal,
)


def test_kafka_principal():
    assert str(KafkaPrincipal("User", "alice")) == "User:alice"
    assert ANONYMOUS == KafkaPrincipal("User", "ANONYMOUS") and str(ANONYMOUS) == "User:ANONYMOUS"
    assert parse_principal("User:CN=a:b") == KafkaPrincipal("User", "CN=a:b")
    assert parse_principal("Group:") == KafkaPrincipal("Group", "")
    for bad in ("", "alice"):
        with pytest.raises(ValueError, match="expected a string in format principalType:principalName but got"):
            parse_principal(bad)


# SslPrincipalMapperTest


@pytest.mark.parametrize("rules", [
    "DEFAULT",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
    "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
])
def test_valid_rules(rules):
    SslPrincipalMapper.from_rules(rules)


@pytest.mark.parametrize("rules", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
])
def test_invalid_rules(rules):
    with pytest.raises(ValueError, match="^Invalid rule: `"):
        SslPrincipalMapper.from_rules(rules)


def test_ssl_principal_mapper():
    rules = ["RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
             "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
             "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
             "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
             "DEFAULT"]
    mapper = SslPrincipalMapper.from_rules(", ".join(rules))
    assert mapper.name_for("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name_for("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name_for("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name_for("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.name_for("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"


@pytest.mark.parametrize("expected,rules", [
    ("[]", ""),
    ("[DEFAULT]", "DEFAULT"),
    ("[RULE:/]", "RULE://"),
    ("[RULE:/.*]", "RULE:/.*/"),
    ("[RULE:/.*/L]", "RULE:/.*/L"),
    ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
    ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
    ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
    ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
    ("[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]", "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "),
    # empty rules are ignored
    ("[]", ",   , , ,      , , ,   "),
    ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
    ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
    ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
    # escape sequences
    ("[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]", "RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//"),
    ("[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]", "RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/"),
    # rules rule
    ("[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]",
     "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT"),
])
def test_rules_splitting(expected, rules):
    assert str(SslPrincipalMapper.from_rules(rules)) == f"SslPrincipalMapper(rules = {expected})"


def test_comma_with_whitespace():
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name_for("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_no_matching_rule():
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=(.*?),OU=x$/$1/")
    with pytest.raises(ValueError, match=r"^No rules apply to CN=a,OU=y, rules \[RULE:\^CN=\(\.\*\?\),OU=x\$/\$1\]$"):
        mapper.name_for("CN=a,OU=y")
    assert SslPrincipalMapper.from_rules(None).name_for("CN=a") == "CN=a"
    with pytest.raises(ValueError, match="No rules apply"):
        SslPrincipalMapper.from_rules("").name_for("CN=a")


def test_replacement_is_javas():
    def name(rule, dn):
        return SslPrincipalMapper.from_rules(rule).name_for(dn)
    assert name("RULE:^CN=(?<who>[^,]+),.*$/${who}!/", "CN=a,O=b") == "a!"
    assert name("RULE:^CN=([^,]+),O=(.*)$/$2.$1/", "CN=a,O=b") == "b.a"
    # a reference past the groups stays literal (Kafka's escapeLiteralBackReferences), $12 reads as $1 then 2
    assert name("RULE:^CN=([^,]+),.*$/$3-$12/", "CN=a,O=b") == "$3-a2"
    assert name("RULE:^CN=([^,]+),.*$/\\$1/", "CN=a,O=b") == "$1"
    with pytest.raises(ValueError):  # no groups at all: $1 is Java's IndexOutOfBoundsException
        name("RULE:^CN=.*$/$1/", "CN=a")


def test_invalid_pattern():
    with pytest.raises(ValueError):
        SslPrincipalMapper.from_rules("RULE:^CN=(.*$/$1/")


# certificate subjects

A = x509.NameAttribute
KEY = ec.generate_private_key(ec.SECP256R1())


def certificate(*rdns) -> bytes:
    subject = x509.Name([x509.RelativeDistinguishedName(r if isinstance(r, list) else [r]) for r in rdns])
    start = datetime.datetime(2024, 1, 1)
    builder = (x509.CertificateBuilder().subject_name(subject)
               .issuer_name(x509.Name([A(NameOID.COMMON_NAME, "ca")])).public_key(KEY.public_key())
               .serial_number(1).not_valid_before(start).not_valid_after(start + datetime.timedelta(days=1)))
    return builder.sign(KEY, hashes.SHA256()).public_bytes(serialization.Encoding.DER)


@pytest.mark.parametrize("rdns,expected", [
    ([A(NameOID.COUNTRY_NAME, "US"), A(NameOID.ORGANIZATION_NAME, "acme"), A(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"),
      A(NameOID.COMMON_NAME, "client")], "CN=client,OU=eng,O=acme,C=US"),
    ([A(NameOID.COMMON_NAME, 'a,b+c=d#e<f>g;h"i\\j')], 'CN=a\\,b\\+c\\=d\\#e\\<f\\>g\\;h\\"i\\\\j'),
    ([A(NameOID.COMMON_NAME, " lead and trail ")], "CN=\\ lead and trail\\ "),
    ([A(NameOID.COMMON_NAME, "#hash")], "CN=\\#hash"),
    ([A(NameOID.COMMON_NAME, "   ")], "CN=\\ \\ \\ "),
    ([A(NameOID.COMMON_NAME, "x\ry\r")], "CN=x\ry\\\r"),
    ([A(NameOID.COMMON_NAME, "nul\0in")], "CN=nul\\00in"),
    ([A(NameOID.COMMON_NAME, "ünïcødé 中文 😀")], "CN=ünïcødé 中文 😀"),
    ([A(NameOID.EMAIL_ADDRESS, "a@b.c"), A(NameOID.COMMON_NAME, "e")], "CN=e,1.2.840.113549.1.9.1=#16056140622e63"),
    ([A(NameOID.SERIAL_NUMBER, "1234")], "2.5.4.5=#130431323334"),
    ([A(NameOID.DOMAIN_COMPONENT, "com"), A(NameOID.DOMAIN_COMPONENT, "example"), A(NameOID.USER_ID, "jdoe")],
     "UID=jdoe,DC=example,DC=com"),
    ([A(NameOID.STREET_ADDRESS, "1 Main St"), A(NameOID.LOCALITY_NAME, "Town"),
      A(NameOID.STATE_OR_PROVINCE_NAME, "ST")], "ST=ST,L=Town,STREET=1 Main St"),
    ([[A(NameOID.COMMON_NAME, "multi"), A(NameOID.ORGANIZATIONAL_UNIT_NAME, "valued")]], "CN=multi+OU=valued"),
    # Java decodes every string type's bytes as UTF-8, a BMPString's too; other types are printed as hex
    ([A(NameOID.COMMON_NAME, "bmp", _type=_ASN1Type.BMPString)], "CN=\\00b\\00m\\00p"),
    ([A(NameOID.COMMON_NAME, "uni", _type=_ASN1Type.UniversalString)], "CN=#1c0c000000750000006e00000069"),
    ([A(NameOID.COMMON_NAME, "vis", _type=_ASN1Type.VisibleString)], "CN=#1a03766973"),
    ([A(NameOID.COMMON_NAME, "t61", _type=_ASN1Type.T61String)], "CN=t61"),
    ([A(NameOID.COMMON_NAME, "ia5", _type=_ASN1Type.IA5String)], "CN=ia5"),
    ([A(NameOID.TITLE, "Dr"), A(NameOID.GIVEN_NAME, "G"), A(NameOID.SURNAME, "S"), A(NameOID.PSEUDONYM, "p")],
     "2.5.4.65=#0c0170,2.5.4.4=#0c0153,2.5.4.42=#0c0147,2.5.4.12=#0c024472"),
    ([A(x509.ObjectIdentifier("1.3.6.1.4.1.99999.1"), "custom"), A(x509.ObjectIdentifier("2.999.1"), "big arc")],
     "2.999.1=#0c0762696720617263,1.3.6.1.4.1.99999.1=#0c06637573746f6d"),
    ([], ""),
    ([A(NameOID.COMMON_NAME, "under_score@at*star!bang&amp%pct")], "CN=under_score@at*star!bang&amp%pct"),
])
def test_distinguished_name_is_javas(rdns, expected):
    assert distinguished_name(certificate(*rdns)) == expected


def test_distinguished_name_then_mapping():
    dn = distinguished_name(certificate(A(NameOID.COUNTRY_NAME, "US"), A(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"),
                                        A(NameOID.COMMON_NAME, "Client-1")))
    assert SslPrincipalMapper.from_rules("RULE:^CN=([^,]+),.*$/$1/L,DEFAULT").name_for(dn) == "client-1"


@pytest.mark.parametrize("data", [b"", b"\x30\x00", b"not a certificate", b"\x30\x82\xff\xff"])
def test_not_a_certificate(data):
    with pytest.raises(ValueError):
        distinguished_name(data)


@given(st.binary(max_size=64))
def test_name_parser_fails_only_with_value_error(data):
    try:
        name_der_to_rfc2253(data)
    except ValueError:
        pass
