"""sasl.jaas.config values: Kafka's JaasContextTest cases and messages, StreamTokenizer's quirks,
and format_jaas reading back."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbroker.security.jaas import (
    LOGIN_MODULES,
    JaasEntry,
    format_jaas,
    parse_jaas_config,
    parse_jaas_entries,
    plain_users,
)

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def test_the_example():
    entry = parse_jaas_config(f'{SCRAM} required username="admin" password="a\\"b";')
    assert entry == JaasEntry(SCRAM, "required", {"username": "admin", "password": 'a"b'})


def test_no_options():
    assert parse_jaas_config("test.testConfigNoOptions required;") == JaasEntry("test.testConfigNoOptions", "required", {})


@pytest.mark.parametrize("flag", ["required", "requisite", "sufficient", "optional", "REQUIRED", "Optional"])
def test_control_flags(flag):
    assert parse_jaas_config(f"test.testControlFlag {flag} propName=propValue;").control_flag == flag.lower()


def test_options():
    assert parse_jaas_config("test.testSingleOption requisite propName=propValue;").options == {"propName": "propValue"}
    text = "test.testMultipleOptions sufficient " + " ".join(f"propName{i}=propValue{i}" for i in range(10)) + ";"
    assert parse_jaas_config(text).options == {f"propName{i}": f"propValue{i}" for i in range(10)}


def test_quoted_values_and_names():
    entry = parse_jaas_config('test.testQuotedOptionValue required propName="prop value" '
                              'propName2="value1 = 1, value2 = 2";')
    assert entry.options == {"propName": "prop value", "propName2": "value1 = 1, value2 = 2"}
    assert parse_jaas_config('test.testQuotedOptionName required "prop name"=propValue;').options == {
        "prop name": "propValue"}
    assert parse_jaas_config("m required a='single \"quoted\"';").options == {"a": 'single "quoted"'}


def test_numeric_option_needs_quotes():
    assert parse_jaas_config('test.testNumericOptionWithQuotes required option1="3";').options == {"option1": "3"}
    with pytest.raises(ValueError, match="^Value not specified for key 'option1' in JAAS config$"):
        parse_jaas_config("test.testNumericOptionWithoutQuotes required option1=3;")


def test_multiple_login_modules():
    text = " ".join(f"test.Module{i} required index=Index{i} module=Module{i};" for i in range(3))
    entries = parse_jaas_entries(text)
    assert [e.login_module for e in entries] == ["test.Module0", "test.Module1", "test.Module2"]
    assert entries[2].options == {"index": "Index2", "module": "Module2"}
    with pytest.raises(ValueError, match="^JAAS config property contains 3 login modules, should be 1 module$"):
        parse_jaas_config(text)


@pytest.mark.parametrize("text,message", [
    ("  required option1=value1;", "Invalid login module control flag 'option1' in JAAS config"),
    ("test.loginModule option1=value1;", "Invalid login module control flag 'option1' in JAAS config"),
    ("loginModule required option1;", "Value not specified for key 'option1' in JAAS config"),
    ("test.testMissingSemicolon required option1=value1", "JAAS config entry not terminated by semi-colon"),
    ("test.testInvalidControlFlag { option1=3;", "Login module control flag is not available in the JAAS config"),
    ("test.module", "Login module control flag not specified in JAAS config"),
    ("", "Login module not specified in JAAS config"),
    ("  /* only a comment */ ", "Login module not specified in JAAS config"),
    ("; required;", "Login module not specified in JAAS config"),
    ("m required a=-x;", "Value not specified for key 'a' in JAAS config"),
    ("m required =x;", "Value not specified for key 'null' in JAAS config"),
    ("com.sun.security.auth.module.JndiLoginModule required;",
     ("com.sun.security.auth.module.JndiLoginModule is not allowed. Update System property "
      "'org.apache.kafka.disallowed.login.modules' to allow com.sun.security.auth.module.JndiLoginModule")),
])
def test_invalid_configs(text, message):
    with pytest.raises(ValueError) as info:
        parse_jaas_config(text)
    assert str(info.value) == message


def test_tokenizer_quirks():
    # comments of both kinds; a lone '/' also starts a comment to the end of the line
    assert parse_jaas_config("m /* c */ required // c\n a=b / c\n ;").options == {"a": "b"}
    # Java string escapes in quotes, octal included; a quote ends at a line break
    assert parse_jaas_config('m required a="\\t\\101\\0\\q\\\\";').options == {"a": "\tA\0q\\"}
    assert parse_jaas_config('m required a="open\n;').options == {"a": "open"}
    # '-', '_', '$' and '.' inside words; words may not start with a digit, '.' or '-'
    assert parse_jaas_config("a-b.c_d$ required k-1=v.2$x;") == JaasEntry("a-b.c_d$", "required", {"k-1": "v.2$x"})
    assert parse_jaas_config('m required k="v1" k="v2";').options == {"k": "v2"}


def test_plain_users():
    entry = parse_jaas_config(f'{LOGIN_MODULES["PLAIN"]} required username="admin" password="admin-secret" '
                              'user_admin="admin-secret" user_alice="alice-secret";')
    assert plain_users(entry) == {"admin": "admin-secret", "alice": "alice-secret"}
    # Kafka reads user_ options only from PlainLoginModule's entry
    assert plain_users(JaasEntry(SCRAM, "required", {"user_admin": "x"})) == {}


def test_login_modules():
    assert LOGIN_MODULES == {
        "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
        "SCRAM-SHA-256": SCRAM, "SCRAM-SHA-512": SCRAM,
        "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
    }


def test_format_jaas():
    assert format_jaas(SCRAM, {"username": "admin", "password": 'a"b\\c'}) == (
        f'{SCRAM} required username="admin" password="a\\"b\\\\c";')
    assert format_jaas("m", {"1st": "x", "a b": "y"}, "optional") == 'm optional "1st"="x" "a b"="y";'
    with pytest.raises(ValueError):
        format_jaas("m", {}, "mandatory")


_text = st.text(st.characters(blacklist_categories=("Cs",)))


@given(st.sampled_from(sorted(set(LOGIN_MODULES.values())) + ["x", "a b", "9lives", "-m"]),
       st.dictionaries(_text, _text, max_size=5), st.sampled_from(["required", "requisite", "sufficient", "optional"]))
def test_format_jaas_reads_back(module, options, flag):
    assert parse_jaas_config(format_jaas(module, options, flag)) == JaasEntry(module, flag, options)


@given(st.text(max_size=60))
def test_any_text_parses_or_fails_with_value_error(text):
    try:
        parse_jaas_entries(text)
    except ValueError:
        pass
