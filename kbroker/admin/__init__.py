"""Administration over the Kafka protocol: a small blocking client (`client`) and the commands built
on it (`groups`: what Kafka's kafka-consumer-groups.sh does). It talks to any Kafka-compatible
broker, kbroker or Apache Kafka, and never imports the broker's own layers."""
