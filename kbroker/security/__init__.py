"""Connection security's decisions, without I/O: SASL mechanisms (PLAIN, SCRAM, OAUTHBEARER),
SCRAM credentials, JAAS lines, principals and their mapping rules, and the per-connection
authentication state machine. The TLS and SASL exchanges on the socket are server/'s.
"""
