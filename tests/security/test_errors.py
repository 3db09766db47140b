"""The failure messages SaslAuthenticate carries, worded as Kafka's SaslServerAuthenticator words them."""

from kbroker.security.errors import (
    INVALID_RECEIVE_SIZE,
    IllegalSaslStateError,
    SaslAuthenticationError,
    invalid_credentials_message,
    unsupported_mechanism_message,
)


def test_generic_invalid_credentials_message():
    assert invalid_credentials_message("SCRAM-SHA-256") == (
        "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256")
    assert invalid_credentials_message("PLAIN", reauthenticating=True) == (
        "Authentication failed during re-authentication due to invalid credentials with SASL mechanism PLAIN")


def test_generic_error_keeps_its_detail_and_rewords_for_reauthentication():
    err = SaslAuthenticationError.invalid_credentials("SCRAM-SHA-512", "Invalid client credentials")
    assert err.message == str(err) == invalid_credentials_message("SCRAM-SHA-512")
    assert err.detail == "Invalid client credentials"
    assert err.client_message() == err.message
    assert err.client_message(reauthenticating=True) == invalid_credentials_message("SCRAM-SHA-512",
                                                                                    reauthenticating=True)


def test_specific_error_is_sent_as_is():
    err = SaslAuthenticationError("Authentication failed: Invalid username or password")
    assert err.client_message(reauthenticating=True) == "Authentication failed: Invalid username or password"
    assert err.detail is None and err.mechanism is None


def test_other_messages():
    assert INVALID_RECEIVE_SIZE == "Failing SASL authentication due to invalid receive size"
    assert unsupported_mechanism_message("GSSAPI") == "Unsupported SASL mechanism GSSAPI"
    assert IllegalSaslStateError("Unexpected challenge in Sasl server state COMPLETE").message.endswith("COMPLETE")
