"""KafkaJS 2.2.4 through every security protocol: test_security_clients.py's scenario with KafkaJS as
one more family (kafkajskit.KafkaJSClient, registered as securitykit's "kafkajs" adapter), against a
broker of this module's own serving PLAINTEXT, SSL, MTLS, SASL_PLAINTEXT and SASL_SSL
(securitykit.running_setup).

Every case of securitykit.CASES: SSL, SSL with a client certificate (mTLS, the mapped principal), and
SASL_PLAINTEXT / SASL_SSL with PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER (an unsecured
token made by the test, handed to KafkaJS's oauthBearerProvider). Each: the idempotent KafkaJS
producer writes keyed records with headers and a ~40 kB value per partition through the listener,
a KafkaJS group member reads them back through it (exact content and order, offsets dense from 0),
the broker knows the idempotent producer (last sequence per partition) and the group committed the
end of every partition; no password of the run in the broker's log.
"""

from __future__ import annotations

import kafkajskit  # noqa: F401 - registers the "kafkajs" adapter
import pytest
import securitykit as sk
import test_security_clients as scenarios

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("kbroker")]


@pytest.fixture(scope="module")
def secure(kt, tmp_path_factory):
    yield from sk.running_setup(kt, tmp_path_factory.mktemp("security-kafkajs"))


@pytest.fixture(scope="module")
def kbroker(secure):
    """The module's broker, under the name conftest's guard and failure reports look for."""
    return secure.broker


@pytest.mark.parametrize("case_id", list(sk.CASES))
def test_idempotent_produce_and_group_consume(secure, kt, request, tmp_path, case_id):
    scenarios.test_idempotent_produce_and_group_consume(secure, kt, request, tmp_path, "kafkajs", case_id)


def test_zz_broker_log_holds_no_password(secure, kbroker):
    scenarios.test_zz_broker_log_holds_no_password(secure, kbroker)
